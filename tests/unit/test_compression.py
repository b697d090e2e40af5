"""store/compression.py and the training of its dictionary: pure logic, no database."""

from __future__ import annotations

import random

import pytest
import zstandard

from graph.store.compression import (
    MAGIC,
    SAMPLE_EVERY,
    WINDOW,
    Compression,
    DictionaryMissing,
)
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


def framed(dictionary: bytes, seed: int) -> tuple[str, bytes]:
    """A message's text, and the frame a writer with `dictionary` (id 7) stores for it."""
    writer = Compression(None, enabled=True)
    writer.learn([(7, dictionary)])
    text = texts(1, seed=seed)[0]
    frame = writer.stored(text, text.encode())
    assert isinstance(frame, bytes)
    return text, frame


def test_disabled_it_inflates_but_stores_text(dictionary: bytes) -> None:
    text, frame = framed(dictionary, 2)
    reader = Compression(None, enabled=False)
    reader.learn([(7, dictionary)])
    assert not reader.compressing and reader.stored(text, text.encode()) == text
    assert reader.inflate_rows(("id", "data"), [(1, frame), (2, "t")]) == [(1, text), (2, "t")]


def test_a_frame_of_an_unknown_dictionary_is_refused(dictionary: bytes) -> None:
    _, frame = framed(dictionary, 3)
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


def test_messages_too_alike_give_no_dictionary() -> None:
    assert train(['{"role":"user","content":"hi"}'] * 1000, ident=1) is None
    pings = [f'{{"role":"user","content":"{("ping", "pong")[i % 2]}"}}' for i in range(1000)]
    assert train(pings, ident=1) is None


def test_a_dictionary_that_no_longer_fits_the_messages_is_said_to_have_drifted() -> None:
    # Learnt from short numbered notes, then used for long messages of other words.
    notes = [f'{{"role":"user","content":"note {i} of {i * 7}"}}' for i in range(1000)]
    made = train(notes, ident=1)
    assert made is not None
    compression = Compression(None, enabled=True)
    compression.learn([(1, made)])
    rng = random.Random(9)
    other = ["".join(rng.choices("qwertyuiopzxcv", k=7)) for _ in range(300)]
    drifted = False
    for _ in range(SAMPLE_EVERY * WINDOW):
        text = f'{{"kind":"tool","output":"{" ".join(rng.choices(other, k=40))}"}}'
        compression.stored(text, text.encode())
        drifted = drifted or compression.drifted()
    assert drifted
    # A dictionary learnt from such messages fits them.
    fitting = Compression(None, enabled=True)
    fitting.learn([(2, train(texts(1000, seed=5), ident=2) or b"")])
    assert fitting.newest == 2
    for text in texts(SAMPLE_EVERY * WINDOW, seed=6):
        fitting.stored(text, text.encode())
        assert not fitting.drifted()


def test_new_messages_use_the_newest_dictionary_and_every_one_stays_readable(
    dictionary: bytes,
) -> None:
    compression = Compression(None, enabled=True)
    compression.learn([(7, dictionary)])
    old = texts(1, seed=7)[0]
    old_frame = compression.stored(old, old.encode())
    newer = train(texts(1000, seed=8), ident=8)
    assert newer is not None
    compression.learn([(8, newer), (7, dictionary)])
    assert compression.newest == 8
    new = texts(1, seed=9)[0]
    new_frame = compression.stored(new, new.encode())
    assert isinstance(new_frame, bytes)
    assert zstandard.get_frame_parameters(new_frame).dict_id == 8
    assert compression.inflate_rows(("data",), [(old_frame,), (new_frame,)]) == [(old,), (new,)]


def test_a_transcript_of_frames_of_several_dictionaries_is_read_whole(dictionary: bytes) -> None:
    compression = Compression(None, enabled=True)
    compression.learn([(7, dictionary)])
    older = texts(30, seed=10)
    older_frames = [compression.stored(t, t.encode()) for t in older]
    compression.learn([(8, train(texts(1000, seed=11), ident=8) or b"")])
    newer = texts(30, seed=12)
    newer_frames = [compression.stored(t, t.encode()) for t in newer]
    rows = [(f,) for pair in zip(older_frames, newer_frames, strict=True) for f in pair]
    expected = [(t,) for pair in zip(older, newer, strict=True) for t in pair]
    assert compression.inflate_rows(("data",), rows) == expected


def test_a_frame_carries_a_checksum_of_its_text(dictionary: bytes) -> None:
    # Read with another dictionary than its own (one that took its id after a downgrade and
    # an upgrade, say), a frame fails its checksum rather than reads as other text.
    _, frame = framed(dictionary, 13)
    assert zstandard.get_frame_parameters(frame).has_checksum
