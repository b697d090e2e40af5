"""The pure parts of encryption at rest: wrapping data keys, the blind index's words and
digests, and the master key setting's checks."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from graph.settings import Settings, SettingsError
from graph.store.encryption import (
    PREFIX,
    BlindIndex,
    Encryption,
    EncryptionError,
    Lost,
    MasterKey,
    blind_words,
    generate_key,
    is_sealed,
)
from graph.store.key_store import SQLiteKeyStore


def master(raw: bytes | None = None) -> MasterKey:
    return MasterKey(raw or os.urandom(32), setting="CONVOGRAPH_ENCRYPTION_KEY")


async def ready_encryption(tmp_path: Path, *, binary: bool) -> Encryption:
    """Encryption over a key store file in `tmp_path`, as SQLite (`binary`) or PostgreSQL
    stores its values."""
    encryption = Encryption(
        master(), None, SQLiteKeyStore(tmp_path / "keys", busy_timeout_ms=1000), binary=binary
    )
    await encryption.ready()
    return encryption


def test_a_wrapped_data_key_unwraps_under_its_master_key_only() -> None:
    data_key = os.urandom(32)
    key = master()
    stored = key.wrap("cabc", data_key)
    assert stored.key_id == key.id
    assert base64.b64decode(stored.wrapped) != data_key
    assert key.unwrap(stored) == data_key
    with pytest.raises(EncryptionError, match="CONVOGRAPH_ENCRYPTION_KEY"):
        master().unwrap(stored)


def test_a_wrapped_key_cannot_be_moved_to_another_ref() -> None:
    key = master()
    stored = key.wrap("cone", os.urandom(32))
    moved = type(stored)("ctwo", stored.key_id, stored.wrapped)
    with pytest.raises(EncryptionError):
        key.unwrap(moved)


def test_the_master_key_id_names_the_key_not_the_wrapping() -> None:
    raw = os.urandom(32)
    assert master(raw).id == master(raw).id
    assert master(raw).id != master().id


def test_blind_words_fold_case_and_accents_and_split_on_punctuation() -> None:
    assert blind_words("Zoë's CAFÉ, naïve-ly: 42x") == ["zoe", "s", "cafe", "naive", "ly", "42x"]
    assert blind_words("  ...  ") == []
    assert blind_words("日本語 テキスト") == ["日本語", "テキスト"]
    # Folded fully, as the digests already stored were made.
    assert blind_words("Straße ﬁne") == ["strasse", "fine"]


def test_the_blind_index_holds_each_word_once_as_a_letter_digest() -> None:
    index = BlindIndex(os.urandom(32))
    stored = index.index_text("the Zebra saw the zebra")
    assert stored is not None
    digests = stored.split()
    assert len(digests) == 3 and digests == sorted(digests)
    assert all(d.isalpha() and d.isascii() and len(d) == 20 for d in digests)
    assert "zebra" not in stored
    assert index.word("zebra") in digests
    assert index.index_text(None) is None
    assert index.index_text("!!!") is None


def test_a_query_digests_its_words_as_the_index_does() -> None:
    index = BlindIndex(os.urandom(32))
    stored = set((index.index_text("Find the ZEBRA, quickly") or "").split())
    assert set(index.query(["zebra"])) <= stored
    assert set(index.query(["Zébra", "find"])) <= stored
    # A word without letters or digits matches nothing (as FTS5 and tsquery do).
    assert not set(index.query(["?!"])) <= stored
    # Another key, other digests: the index says nothing without the key.
    assert not set(BlindIndex(os.urandom(32)).query(["zebra"])) <= stored


def test_content_digests_are_keyed() -> None:
    a, b = BlindIndex(os.urandom(32)), BlindIndex(os.urandom(32))
    assert a.content_digest("d1") == a.content_digest("d1")
    assert a.content_digest("d1") != b.content_digest("d1")
    assert a.content_digest("d1") != a.content_digest("d2")


def test_generated_keys_are_accepted_and_sealed_values_are_marked() -> None:
    key = generate_key()
    assert len(base64.b64decode(key)) == 32
    assert Settings(encryption_key=key).encryption_on
    assert not Settings().encryption_on
    assert PREFIX.endswith(":")


@pytest.mark.parametrize(
    "value", ["", "not base64 !!", base64.b64encode(b"short").decode(), "A" * 100]
)
def test_an_invalid_master_key_is_refused_naming_the_variable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY", value or " ")
    with pytest.raises(SettingsError, match="CONVOGRAPH_ENCRYPTION_KEY") as info:
        Settings.from_env()
    assert value not in str(info.value) or not value


def test_an_invalid_previous_key_is_refused_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY", generate_key())
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY", "abc")
    with pytest.raises(SettingsError, match="CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY"):
        Settings.from_env()


@pytest.mark.parametrize("binary", [True, False], ids=["sqlite-bytes", "postgresql-text"])
async def test_a_transcript_opens_the_same_from_the_cache_and_from_its_ciphertext(
    binary: bool, tmp_path: Path
) -> None:
    encryption = await ready_encryption(tmp_path, binary=binary)
    cid, other = str(uuid.uuid4()), str(uuid.uuid4())
    plain = [f'{{"content": "{i}"}}' for i in range(3)]
    rows = [{"data": text, "digest": "d", "search_text": "w"} for text in plain]

    def column(values: list[Any]) -> list[tuple[Any, ...]]:
        return [(value,) for value in values]

    async def opened(values: list[Any]) -> list[Any]:
        found = await encryption.open_rows(("data",), column(values), lost=Lost.DROP)
        return [text for (text,) in found]

    try:
        sealed = [r["data"] for r in await encryption.sealed_messages(cid, rows)]
        assert all(is_sealed(value) for value in sealed)
        assert await opened(sealed) == plain  # remembered when sealed
        # Sealed elsewhere (another replica), then mixed with remembered ones and with a
        # value stored before encryption was on: opened from their ciphertext.
        elsewhere = await encryption.seal(f"c{cid}", '{"content": "elsewhere"}')
        before = '{"content": "stored in clear"}'
        mixed = [*sealed, elsewhere, before]
        expected = [*plain, '{"content": "elsewhere"}', before]
        assert await opened(mixed) == expected
        assert await opened(mixed) == expected  # and again, all remembered now
        first_other = (await encryption.sealed_messages(other, rows[:1]))[0]["data"]
        assert await opened([*sealed, first_other]) == [*plain, plain[0]]

        # A destroyed key takes its remembered texts with it: its rows read as deleted.
        await encryption.forget([f"c{cid}"])
        assert await opened([*sealed, first_other]) == [plain[0]]
    finally:
        await encryption.close()


# Texts a user may write without encryption that begin as a sealed value does: each reads
# as it is once encryption is on (the row is not taken for a crypto-shredded one).
LOOKALIKES = [
    PREFIX,
    f"{PREFIX} notes",
    f"{PREFIX}x:y",
    f"{PREFIX}c{uuid.uuid4()}:" + "A" * 32,  # a ref, but no room for a nonce and a tag
    f"{PREFIX}c{uuid.uuid4()}:" + "*" * 60,  # not base64
    f"{PREFIX}s{'0' * 32}:" + "A" * 40 + "\nmore",
]


@pytest.mark.parametrize("binary", [True, False], ids=["sqlite-bytes", "postgresql-text"])
async def test_only_values_in_the_sealed_form_are_taken_for_sealed(
    binary: bool, tmp_path: Path
) -> None:
    encryption = await ready_encryption(tmp_path, binary=binary)
    cid = str(uuid.uuid4())
    try:
        sealed = [await encryption.seal(f"c{cid}", text) for text in ["", "title", *LOOKALIKES]]
        assert all(is_sealed(value) for value in sealed)
        assert not any(is_sealed(text) for text in LOOKALIKES)
        # Written with encryption on, a lookalike is sealed like any other text.
        values: dict[str, Any] = {"title": LOOKALIKES[2], "metadata": None}
        await encryption.seal_values(f"c{cid}", values, ("title", "metadata"))
        assert is_sealed(values["title"]) and values["metadata"] is None
        # Read back beside sealed values: each as written, no row dropped or refused.
        rows = [(LOOKALIKES[i], sealed[1]) for i in range(len(LOOKALIKES))]
        for lost in Lost:
            found = await encryption.open_rows(("title", "metadata"), rows, lost=lost)
            assert found == [(text, "title") for text in LOOKALIKES]
        opened = await encryption.open_rows(
            ("title", "metadata"), [(values["title"], None)], lost=Lost.DROP
        )
        assert opened == [(LOOKALIKES[2], None)]
    finally:
        await encryption.close()
