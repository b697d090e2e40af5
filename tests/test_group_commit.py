"""SQLite group commit: concurrent writes share one COMMIT (one fsync), and nothing else moves.

What must hold: every acknowledged write is stored (it returned only after the COMMIT that
included it); a write that fails inside a shared transaction rolls back only its own part;
a failure that ends the whole transaction fails every write of it, none acknowledged; a
write cancelled while it waits never leaves the others waiting for a COMMIT; events reach
subscribers in the order their writes committed. The crash and concurrency suites
(test_crash.py, test_concurrency.py) run the same writes against a real server process.
"""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path

import pytest
from sqlalchemy import text

from graph.settings import Settings
from graph.store.db import Database
from tests import ws
from tests.conftest import GraphQLClient, Server
from tests.operations import WATCH, create
from tests.test_http import serving

APPEND = """mutation($id: ID!, $messages: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $messages}) {
    messages { seq } userErrors { code message } } }"""
TRANSCRIPT = "query($id: ID!) { conversation(id: $id) { messageCount transcript } }"


@pytest.fixture(autouse=True)
def _sqlite_only(settings: Settings) -> None:
    if not settings.is_sqlite:
        pytest.skip("group commit is SQLite's: PostgreSQL commits each transaction itself")


async def _commit_counts(gql: GraphQLClient) -> tuple[float, float]:
    metrics = (await gql.http.get("/metrics")).text

    def value(name: str) -> float:
        found = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
        assert found, f"{name} not in /metrics"
        return float(found.group(1))

    return value("convograph_sqlite_writes_total"), value("convograph_sqlite_commits_total")


async def test_concurrent_appends_share_commits_and_every_one_is_stored(
    gql: GraphQLClient,
) -> None:
    cid = await create(gql)
    writes_before, commits_before = await _commit_counts(gql)
    n = 48

    async def append(i: int) -> int:
        response = await gql.post(APPEND, {"id": cid, "messages": [{"role": "user", "i": i}]})
        payload = response.json()["data"]["appendMessages"]
        assert payload["userErrors"] == []
        return int(payload["messages"][0]["seq"])

    seqs = await asyncio.gather(*(append(i) for i in range(n)))
    assert sorted(seqs) == list(range(1, n + 1))
    read = (await gql(TRANSCRIPT, {"id": cid}))["conversation"]
    assert read["messageCount"] == n
    stored = {m["i"]: seq for seq, m in enumerate(read["transcript"], start=1)}
    assert stored == {i: seqs[i] for i in range(n)}  # each at the seq it was acknowledged with

    writes, commits = await _commit_counts(gql)
    assert writes - writes_before >= n  # and the search index's batches
    assert commits - commits_before < n  # shared: fewer COMMITs than appends


async def test_events_reach_a_subscriber_in_the_order_their_writes_committed(
    server: Server, gql: GraphQLClient
) -> None:
    # The writes of a group resume in any order once their COMMIT returns; their events are
    # published by the writer, in the order the writes ran (their versions' order).
    cid = await create(gql)
    assert gql.token is not None
    async with ws.connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(WATCH, {"id": cid})
        await ws.until_live(socket, gql, cid)
        n = 40
        message = {"role": "user", "content": "x"}
        await asyncio.gather(*(gql(APPEND, {"id": cid, "messages": [message]}) for _ in range(n)))
        versions = [(await socket.event())["version"] for _ in range(n)]
    assert versions == sorted(versions)
    assert len(set(versions)) == n


@pytest.fixture
def quota_settings(settings: Settings) -> Settings:
    return settings.replace(workspace_max_messages=20)


async def test_a_write_refused_inside_a_shared_commit_leaves_the_others_stored(
    quota_settings: Settings,
) -> None:
    # The quota is checked after the write's own statements: a refused append rolls back to
    # its savepoint, inside a transaction that other appends share.
    async with serving(quota_settings) as (server, http):
        gql = GraphQLClient(http, await server.token())
        cid = await create(gql)
        _, commits_before = await _commit_counts(gql)

        async def append(i: int) -> bool:
            message = {"role": "user", "i": i}
            response = await gql.post(APPEND, {"id": cid, "messages": [message]})
            errors = response.json()["data"]["appendMessages"]["userErrors"]
            assert [e["code"] for e in errors] in ([], ["STORAGE_FULL"]), errors
            return not errors

        accepted = await asyncio.gather(*(append(i) for i in range(40)))
        assert sum(accepted) == 20
        read = (await gql(TRANSCRIPT, {"id": cid}))["conversation"]
        assert read["messageCount"] == 20
        assert sorted(m["i"] for m in read["transcript"]) == [
            i for i, ok in enumerate(accepted) if ok
        ]
        _, commits = await _commit_counts(gql)
        assert commits - commits_before < 20  # the refused ones shared transactions


async def _writer_db(settings: Settings, tmp_path: Path, *, requests: int = 2) -> Database:
    """A database with a table `t`, as a server sees it with `requests` HTTP requests under
    way (a write waits for others to join its COMMIT only while there are others)."""
    db = Database(settings.replace(database_url=f"sqlite+aiosqlite:///{tmp_path / 'w.sqlite'}"))
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER PRIMARY KEY)"))
    db.in_flight.requests = requests
    return db


@pytest.mark.parametrize(("requests", "commits"), [(1, 2), (2, 1)], ids=["alone", "with-others"])
async def test_a_write_waits_for_others_to_join_only_while_others_are_under_way(
    settings: Settings, tmp_path: Path, requests: int, commits: int
) -> None:
    db = await _writer_db(settings, tmp_path, requests=requests)
    try:
        before = db.group_commits()
        assert before is not None
        written = asyncio.Event()

        async def first() -> None:
            async with db.write() as conn:
                await conn.execute(text("INSERT INTO t VALUES (1)"))
                written.set()  # the second write starts in the next turn of the loop

        async def second() -> None:
            await written.wait()
            async with db.write() as conn:
                await conn.execute(text("INSERT INTO t VALUES (2)"))

        await asyncio.wait_for(asyncio.gather(first(), second()), timeout=10)
        after = db.group_commits()
        assert after is not None
        assert (after[0] - before[0], after[1] - before[1]) == (2, commits)
        assert await _stored(db) == {1, 2}
    finally:
        await db.dispose()


async def _stored(db: Database) -> set[int]:
    async with db.read() as conn:
        return {x for (x,) in (await conn.execute(text("SELECT x FROM t"))).all()}


async def test_a_failure_that_ends_the_transaction_fails_every_write_of_it(
    settings: Settings, tmp_path: Path
) -> None:
    db = await _writer_db(settings, tmp_path)
    try:
        started = asyncio.Event()

        async def first() -> None:
            async with db.write() as conn:
                await conn.execute(text("INSERT INTO t VALUES (1)"))
                started.set()

        async def ends_it() -> None:
            await started.wait()  # queued while `first` holds the writer: they share one
            async with db.write() as conn:
                await conn.execute(text("INSERT INTO t VALUES (2)"))
                # What SQLite does itself on a full disk or an I/O error: the whole
                # transaction is rolled back, not just this write's part.
                await conn.exec_driver_sql("ROLLBACK")
                raise OSError("the transaction is gone")

        both = asyncio.gather(first(), ends_it(), return_exceptions=True)
        results = await asyncio.wait_for(both, timeout=10)
        assert all(isinstance(r, OSError) for r in results), results
        assert await _stored(db) == set()  # nothing acknowledged, nothing stored

        async with db.write() as conn:  # the writer goes on
            await conn.execute(text("INSERT INTO t VALUES (3)"))
        assert await _stored(db) == {3}
    finally:
        await db.dispose()


async def test_writes_cancelled_while_they_wait_never_hold_up_the_others(
    settings: Settings, tmp_path: Path
) -> None:
    # A write that was to join the open transaction, cancelled (its client went away) just
    # as the writer was handed to it, must not leave the writes before it waiting for a
    # COMMIT. Cancellations fall on every turn of the loop across the rounds.
    db = await _writer_db(settings, tmp_path)
    rng = random.Random(7)
    try:
        acknowledged: set[int] = set()

        async def write(x: int) -> None:
            async with db.write() as conn:
                await conn.execute(text("INSERT INTO t VALUES (:x)"), {"x": x})
            acknowledged.add(x)

        for round_ in range(300):
            tasks = [asyncio.create_task(write(round_ * 10 + i)) for i in range(4)]
            for _ in range(round_ % 9):
                await asyncio.sleep(0)
            for task in tasks[1:]:
                if rng.random() < 0.5:
                    task.cancel()
            _, pending = await asyncio.wait(tasks, timeout=10)
            assert not pending, f"round {round_}: a write waited for a COMMIT that never came"
        # Acknowledged means committed; a cancelled write may or may not have been.
        assert acknowledged <= await _stored(db)
        assert len(acknowledged) >= 300
    finally:
        await db.dispose()


@pytest.mark.parametrize("busy_ms", [0, 150])
async def test_writes_queued_behind_this_process_s_own_share_commits_whatever_the_busy_timeout(
    settings: Settings, busy_ms: int
) -> None:
    """The busy timeout is how long a write waits for another process's lock on the file;
    applied to the wait behind this process's own writes, it refused most of 50 concurrent
    writes with DATABASE_UNAVAILABLE (all but one at 0 ms), and no commit was shared."""
    async with serving(settings.replace(sqlite_busy_timeout_ms=busy_ms)) as (server, http):
        gql = GraphQLClient(http, await server.token())
        cid = await create(gql)
        writes_before, commits_before = await _commit_counts(gql)
        answers = await asyncio.gather(
            *(gql.post(APPEND, {"id": cid, "messages": [{"role": "user"}]}) for _ in range(50))
        )
        assert all("errors" not in a.json() for a in answers), [a.text for a in answers]
        writes, commits = await _commit_counts(gql)
    assert writes - writes_before >= 50
    assert commits - commits_before < 50
