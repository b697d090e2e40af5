"""Revision 0012 (SQLite): the full-text index reads a message's words from its JSON, and a
message row no longer holds them a second time. Searches find the same messages before and
after it, after its downgrade (which writes the copies back) and after it again; the view
the index reads yields the same words as the code that fills PostgreSQL's column."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from alembic import command

from graph.domain import jsoncodec
from graph.domain.messages import search_text
from graph.settings import Settings
from graph.store.compression import Compression
from tests.conftest import GraphQLClient, Server
from tests.migrations import columns_after
from tests.operations import APPEND, DELETE, append
from tests.test_search_index import assert_index_consistent, found, new

# Every shape a message's content takes, and the characters a tokenizer could trip on.
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "plain words here"},
    {"role": "assistant", "content": [{"type": "text", "text": "nested papaya"}]},
    {"role": "tool", "content": {"result": {"rows": ["deep quince", 3, None, True]}, "n": 1.5}},
    {"role": "user", "content": 'escapes "quoted" back\\slash tab\tnew\nline'},
    {"role": "user", "content": "unicode café naïve 東京 😀 Ünïcödé"},
    {"role": "user", "content": ["", " ", "spaced  out "]},
    {"role": "user", "content": "nul\u0000inside"},
    {"role": "user", "content": None},
    {"role": "user", "content": 42},
    {"role": "user", "content": []},
    {"role": "user"},
    {"role": "user", "content": "keys", "other": "not content: not indexed"},
]


def rows(path: Path) -> list[tuple[str, str | None, str | None]]:
    """(data, stored search_text, the view's text) of every message."""
    with sqlite3.connect(path) as db:
        Compression(path, enabled=False).register(db)  # the view of 0017 reads frames
        return list(
            db.execute(
                "SELECT m.data, m.search_text, s.search_text FROM message m "
                "JOIN message_search s ON s.id = m.id ORDER BY m.id"
            )
        )


def words(text: str | None) -> list[str]:
    return (text or "").replace("\x00", " ").split()


def sqlite_only(settings: Settings) -> Path:
    if settings.sqlite_path is None:
        pytest.skip("PostgreSQL keeps its column and GIN index: the revision does nothing there")
    if settings.encryption_key is not None:
        pytest.skip("with encryption on the rows keep their word digests: nothing moves")
    return settings.sqlite_path


async def test_the_view_yields_the_words_the_code_computes(
    gql: GraphQLClient, settings: Settings
) -> None:
    path = sqlite_only(settings)
    cid = await new(gql)
    result = await gql(APPEND, {"id": cid, "m": MESSAGES})
    assert result["appendMessages"]["userErrors"] == []
    stored = rows(path)
    assert len(stored) == len(MESSAGES)
    for data, kept, viewed in stored:
        if "\\u0000" in data:  # SQLite's JSON functions end a string there: the row keeps it
            assert kept == search_text(jsoncodec.loads(data))
        else:
            assert kept is None  # no second copy of the text
        assert words(viewed) == words(search_text(jsoncodec.loads(data))), data
    for word in (
        "plain",
        "papaya",
        "quince",
        "quoted",
        "slash",
        "café",
        "東京",
        "spaced",
        "inside",
    ):
        assert await found(gql, word) == {cid}, word
    assert await found(gql, "content") == set()  # a key, not a value
    assert_index_consistent(settings)


async def test_indexed_and_waiting_messages_are_found_across_the_revision(
    server: Server, gql: GraphQLClient, settings: Settings
) -> None:
    path = sqlite_only(settings)
    index = server.services.search_index
    cid, other = await new(gql), await new(gql)
    await append(gql, cid, "kiwi indexed")
    await append(gql, other, "kiwi elsewhere")
    assert await found(gql, "kiwi") == {cid, other}
    # No batch runs from here (a search does not index either): the next message stays
    # above the mark.
    index.enabled = False
    await append(gql, cid, "lime waiting")
    assert await found(gql, "lime") == set()

    await columns_after(settings, "message", lambda config: command.downgrade(config, "0011"))
    with sqlite3.connect(path) as db:
        for data, kept in db.execute("SELECT data, search_text FROM message"):
            assert kept == search_text(jsoncodec.loads(data))  # the copies are back
        db.execute("INSERT INTO message_fts(message_fts) VALUES ('integrity-check')")

    await columns_after(settings, "message", lambda config: command.upgrade(config, "head"))
    assert all(kept is None for _, kept, _ in rows(path))  # (no NUL in these)
    assert_index_consistent(settings)
    assert await found(gql, "kiwi") == {cid, other}
    index.enabled = True
    await append(gql, cid, "mango after")
    assert await found(gql, "lime") == {cid}  # read from the JSON by the next batch
    assert await found(gql, "mango") == {cid}
    # A delete takes the words out of the index by the same reading of the JSON.
    await gql(DELETE, {"id": other})
    assert await found(gql, "kiwi") == {cid}
    assert await found(gql, "elsewhere") == set()
    assert_index_consistent(settings)
