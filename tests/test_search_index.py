"""The message search index (graph/search_index.py): on SQLite appends leave their messages
waiting and the index catches up in batches; a search must still find exactly what the live
transcripts hold, whatever was waiting when it asked, was edited away or survived a kill -9.
PostgreSQL keeps its GIN index itself: the same behaviour is asserted there."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from graph.settings import Settings
from graph.store.compression import Compression
from tests.conftest import GraphQLClient
from tests.operations import DELETE, REPLACE, append

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

CREATE = "mutation { createConversation(input: {}) { conversation { id } } }"
SEARCH = """query($q: String) {
  conversations(filter: {search: $q}) { nodes { id } } }"""
BOTH = """query($id: ID!, $q: String) {
  conversation(id: $id) { transcript }
  conversations(filter: {search: $q}) { nodes { id } } }"""


def said(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


async def new(gql: GraphQLClient) -> str:
    return str((await gql(CREATE))["createConversation"]["conversation"]["id"])


async def found(gql: GraphQLClient, word: str) -> set[str]:
    return {n["id"] for n in (await gql(SEARCH, {"q": word}))["conversations"]["nodes"]}


def assert_index_consistent(settings: Settings) -> None:
    """SQLite: FTS5's own check of its index, and every word of every indexed message (the
    messages up to the index's mark) where it would be in an index built afresh from the
    messages' JSON (the view migration 0012 made), and nothing else."""
    if settings.sqlite_path is None:
        return
    with sqlite3.connect(settings.sqlite_path) as db:
        Compression(settings.sqlite_path, enabled=False).register(db)  # the view reads frames
        db.execute("INSERT INTO message_fts(message_fts) VALUES ('integrity-check')")
        # The fresh index made as the real one was (its tokenizer above all).
        (made,) = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'message_fts'").fetchone()
        db.execute(made.replace("message_fts", "temp.fresh", 1))
        db.executescript(
            "INSERT INTO temp.fresh(rowid, search_text) SELECT id, search_text "
            "FROM message_search WHERE id <= (SELECT upto FROM message_fts_mark) "
            "AND search_text IS NOT NULL;"
            "CREATE VIRTUAL TABLE temp.held USING fts5vocab(main, message_fts, instance);"
            "CREATE VIRTUAL TABLE temp.expected USING fts5vocab(temp, fresh, instance);"
        )
        held = db.execute("SELECT * FROM temp.held ORDER BY 1, 2, 3, 4").fetchall()
        expected = db.execute("SELECT * FROM temp.expected ORDER BY 1, 2, 3, 4").fetchall()
    assert held == expected


async def test_a_search_finds_every_message_appended_before_it(gql: GraphQLClient) -> None:
    # Faster than the index's batching delay: each search comes while the append waits.
    cid = await new(gql)
    for i in range(25):
        await append(gql, cid, f"marker{i} alpha")
        assert await found(gql, f"marker{i}") == {cid}
    assert await found(gql, "alpha") == {cid}


async def test_the_index_holds_exactly_the_live_messages(server: Any, gql: GraphQLClient) -> None:
    # Messages removed while waiting to be indexed and after being indexed, by
    # replaceTranscript and by deleting their conversation.
    a, b, c = await new(gql), await new(gql), await new(gql)
    await append(gql, a, "apple one", "banana two")
    assert await found(gql, "banana") == {a}  # indexed now
    await append(gql, a, "cherry three")  # waiting
    await gql(REPLACE, {"id": a, "m": [said("apple one"), said("damson four")]})
    await append(gql, b, "banana five", "elder six")  # waiting, then deleted
    await gql(DELETE, {"id": b})
    await append(gql, c, "fig seven")
    assert await found(gql, "fig") == {c}  # indexed, then deleted
    await gql(DELETE, {"id": c})
    expected = {"apple": {a}, "banana": set(), "cherry": set(), "damson": {a}, "elder": set()}
    for word, ids in {**expected, "fig": set()}.items():
        assert await found(gql, word) == ids, word
    assert_index_consistent(server.settings)
    # The batch in the background leaves the same index.
    await append(gql, a, "grape eight")
    await asyncio.sleep(0.5)
    assert_index_consistent(server.settings)
    assert await found(gql, "grape") == {a}


async def test_a_search_beside_a_transcript_agrees_with_it_during_appends(
    gql: GraphQLClient,
) -> None:
    # One answer reads one state: if the transcript shows a message, the search finds it.
    cid = await new(gql)
    seen = 0

    async def write() -> None:
        for i in range(40):
            await append(gql, cid, f"step{i}")

    async def read() -> None:
        nonlocal seen
        for i in range(40):
            data = await gql(BOTH, {"id": cid, "q": f"step{i}"})
            shown = any(m["content"] == f"step{i}" for m in data["conversation"]["transcript"])
            hits = {n["id"] for n in data["conversations"]["nodes"]}
            assert hits == ({cid} if shown else set()), (i, shown, hits)
            seen += shown

    await asyncio.gather(write(), read())
    assert await found(gql, "step39") == {cid}


async def test_a_failure_to_update_the_index_is_masked(server: Any, gql: GraphQLClient) -> None:
    path = server.settings.sqlite_path
    if path is None:
        pytest.skip("PostgreSQL keeps its index itself")
    cid = await new(gql)
    await append(gql, cid, "waiting")
    with sqlite3.connect(path) as db:  # the mark can no longer be read
        db.execute("ALTER TABLE message_fts_mark RENAME TO message_fts_gone")
    response = await gql.post(SEARCH, {"q": "waiting"})
    assert response.status_code == 200
    errors = response.json()["errors"]
    assert [e["extensions"]["code"] for e in errors] == ["INTERNAL"], errors
    assert "fts" not in response.text.lower() and "sqlite" not in response.text.lower()


async def test_waiting_messages_are_found_after_a_kill_9(
    live_server: LiveServer, live_servers: LiveServers
) -> None:
    token = await live_server.token()
    async with live_server.client(token) as gql:
        cid = await new(gql)
        await append(gql, cid, "survivor kumquat")
    await live_server.kill()
    restarted = await live_servers.restart(live_server)
    async with restarted.client(token) as gql:
        assert await found(gql, "kumquat") == {cid}


async def test_a_write_after_shutdown_schedules_no_batch(settings: Settings) -> None:
    # Regression: a write that began while the services stopped (a sweep's, say) scheduled a
    # batch for after the stop, whose task then ran on a disposed database or never ran
    # ("coroutine 'SearchIndex._background' was never awaited").
    from graph.services import build_services
    from graph.store.search_index import DELAY

    if settings.sqlite_path is None:
        pytest.skip("PostgreSQL keeps its index itself: no batches")
    services = build_services(settings)
    await services.start()
    await services.stop()
    loop = asyncio.get_running_loop()
    started: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        started.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        services.search_index.written()
        await asyncio.sleep(DELAY * 2)
    finally:
        loop.set_task_factory(None)
    assert "SearchIndex._background" not in started


@contextlib.asynccontextmanager
async def indexing_a_backlog(server: Any, gql: GraphQLClient) -> AsyncIterator[asyncio.Task[None]]:
    """2,000 messages of a new conversation waiting to be indexed, 10 to a transaction, by a
    task that has begun; once the block ends, so has the task, and a search finds them."""
    if server.settings.sqlite_path is None:
        pytest.skip("PostgreSQL keeps its index itself: no batches")
    index = server.services.search_index
    index.chunk = 10
    waiting = await new(gql)
    for part in range(2):  # 2,000 messages waiting (an append takes 1,000 at most)
        await append(gql, waiting, *(f"backlog{part}x{i}" for i in range(1000)))
    indexing = asyncio.create_task(index.ready())
    try:
        await asyncio.sleep(0)  # it begins
        yield indexing
    finally:
        await indexing
    for word in ("backlog0x0", "backlog1x999"):
        assert await found(gql, word) == {waiting}


async def test_a_write_while_a_backlog_is_indexed_is_answered_before_the_index_catches_up(
    server: Any, gql: GraphQLClient
) -> None:
    """A backlog of messages to index (a bulk load, another process's writes, a stop before
    the batch) was indexed in one transaction: on SQLite every write, and with the inline
    driver every request of the process, waited for all of it (seconds for a million
    messages). Now each transaction indexes a chunk, and requests go in between; a search
    still finds every message."""
    live = await new(gql)
    async with indexing_a_backlog(server, gql) as indexing:
        await append(gql, live, "meanwhile")
        assert not indexing.done()
    assert await found(gql, "meanwhile") == {live}
    assert_index_consistent(server.settings)


async def test_a_transcript_save_while_a_backlog_waits_leaves_the_backlog_to_the_batches(
    server: Any, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transcript save indexes in its own transaction: it indexed every message waiting,
    so a save right after a bulk load held the writer (and the process) for the whole
    backlog. Now it indexes a chunk, or as many as it wrote, and the batches the rest."""
    from graph.store import search_index

    monkeypatch.setattr(search_index, "CHUNK", 10)
    saved = await new(gql)
    async with indexing_a_backlog(server, gql):
        replaced = await gql(REPLACE, {"id": saved, "m": [said("saved words")]})
        assert replaced["replaceTranscript"]["userErrors"] == []
        with sqlite3.connect(server.settings.sqlite_path) as db:
            (left,) = db.execute(
                "SELECT count(*) FROM message WHERE id > (SELECT upto FROM message_fts_mark)"
            ).fetchone()
        assert left > 1000  # the save indexed no more than a chunk of the backlog
    assert await found(gql, "saved") == {saved}
    assert_index_consistent(server.settings)
