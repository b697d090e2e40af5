"""The words PostgreSQL's index is given (graph/domain/words.py): FTS5's unicode61 tokenizer
with remove_diacritics 2, as SQLite splits a text."""

from __future__ import annotations

import sqlite3

import pytest

from graph.domain.words import indexed_text, words


def test_words_fold_case_and_accents_and_split_on_punctuation() -> None:
    assert words("Zoë's CAFÉ, naïve-ly: 42x") == ["zoe", "s", "cafe", "naive", "ly", "42x"]
    # As FTS5 keeps them: a sharp s, a ligature, full-width letters (lower-cased).
    assert words("Straße \ufb01ne \uff26\uff35") == ["straße", "\ufb01ne", "\uff46\uff55"]
    assert words("  ...  ") == []
    assert words("日本語 テキスト") == ["日本語", "テキスト"]


def test_the_indexed_text_is_the_words_in_order_or_nothing() -> None:
    assert indexed_text("alice@example.org wrote: Brown-Fox!") == (
        "alice example org wrote brown fox"
    )
    assert indexed_text("!!! 🎉") is None
    assert indexed_text(None) is None


TEXTS = [
    "the quick brown fox",
    "title: my document",
    "alice@example.org",
    "café crème brûlée",
    "price$5 ok_then",
    "emoji 🎉 party",
    "ÜBERPRÜFUNG über Ærø Straße",
    "\ufb01ne \uff26\uff35\uff2c\uff2cwidth \uff76\uff80\uff76\uff85 x\u00b2",
    "हिन्दी भाषा a\u0301b e\u0305f \ue000private",
    "Ελληνικά ΣΎΝΟΨΗ Кириллица",
    "日本語 テキスト",
    "tab\tnew\nline",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_words_are_those_sqlites_tokenizer_finds(text: str) -> None:
    """Each word is found by SQLite's own index, and no other word of it is: the two
    backends and the encrypted index split a text alike."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    db.execute("INSERT INTO t(x) VALUES (?)", (text,))
    found = {term for (term,) in db.execute("SELECT term FROM v")}
    assert set(words(text)) == found


def test_the_words_agree_with_sqlites_on_almost_every_character() -> None:
    """Every character of the Basic Multilingual Plane inside a word and alone: the few
    that differ are newer than SQLite's Unicode tables or Latin letters with two accents."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    codes = [c for c in range(0x20, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    db.executemany(
        "INSERT INTO t(rowid, x) VALUES (?, ?)", ((c, f"a{chr(c)}b {chr(c)}") for c in codes)
    )
    sqlite: dict[int, list[str]] = {}
    for term, doc in db.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        sqlite.setdefault(doc, []).append(term)
    differ = [c for c in codes if words(f"a{chr(c)}b {chr(c)}") != sqlite.get(c, [])]
    assert len(differ) <= 700, len(differ)
    assert not [c for c in differ if c < 0x1E0]  # Latin-1 and Latin Extended-A: all alike
