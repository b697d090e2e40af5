"""store/compression.py and the training of its dictionary: pure logic, no database."""

from __future__ import annotations

import random

import pytest

from graph.store.compression import MAGIC, Compression, DictionaryMissing
from graph.store.dictionary_training import train

WORDS = ["".join(random.Random(i).choices("abcdefghij", k=2 + i % 7)) for i in range(400)]


def texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        f'{{"role":"user","content":"{" ".join(rng.choices(WORDS, k=30))}"}}' for _ in range(count)
    ]


@pytest.fixture(scope="module")
def dictionary() -> bytes:
    made = train(texts(1000), ident=7)
    assert made is not None
    return made


def test_a_message_round_trips_through_a_frame_that_names_its_dictionary(
    dictionary: bytes,
) -> None:
    compression = Compression(None, enabled=True)
    assert not compression.compressing
    assert compression.stored("x", b"x") == "x"  # no dictionary yet: text
    compression.learn([(7, dictionary)])
    assert compression.compressing
    for text in texts(50, seed=1):
        frame = compression.stored(text, text.encode())
        assert isinstance(frame, bytes) and frame.startswith(MAGIC)
        assert len(frame) < 0.6 * len(text.encode())
        assert compression.inflate(frame) == text
        assert compression.inflate_value(frame) == text
    assert compression.inflate_value("plain") == "plain"


def test_a_frame_is_stored_only_when_it_is_smaller(dictionary: bytes) -> None:
    compression = Compression(None, enabled=True)
    compression.learn([(7, dictionary)])
    tiny = '{"a":1}'
    assert compression.stored(tiny, tiny.encode()) == tiny


def test_disabled_it_inflates_but_stores_text(dictionary: bytes) -> None:
    writer = Compression(None, enabled=True)
    writer.learn([(7, dictionary)])
    text = texts(1, seed=2)[0]
    frame = writer.stored(text, text.encode())
    reader = Compression(None, enabled=False)
    reader.learn([(7, dictionary)])
    assert not reader.compressing and reader.stored(text, text.encode()) == text
    assert reader.inflate_rows(("id", "data"), [(1, frame), (2, "t")]) == [(1, text), (2, "t")]


def test_a_frame_of_an_unknown_dictionary_is_refused(dictionary: bytes) -> None:
    writer = Compression(None, enabled=True)
    writer.learn([(7, dictionary)])
    text = texts(1, seed=3)[0]
    frame = writer.stored(text, text.encode())
    assert isinstance(frame, bytes)
    with pytest.raises(DictionaryMissing):
        Compression(None, enabled=False).inflate(frame)


def test_too_few_messages_train_no_dictionary() -> None:
    assert train(['{"a":1}'] * 3, ident=1) is None


def test_rows_of_frames_text_and_other_columns_are_inflated_in_place(dictionary: bytes) -> None:
    compression = Compression(None, enabled=True)
    compression.learn([(7, dictionary)])
    values = texts(5, seed=4)
    frames = [compression.stored(t, t.encode()) for t in values]
    assert compression.inflate_rows(("data",), [(f,) for f in frames]) == [(t,) for t in values]
    mixed = [(1, frames[0]), (2, "text"), (3, frames[1]), (4, None)]
    assert compression.inflate_rows(("seq", "data"), mixed) == [
        (1, values[0]),
        (2, "text"),
        (3, values[1]),
        (4, None),
    ]
    plain = [(1, "a")]
    assert compression.inflate_rows(("seq", "data"), plain) is plain
