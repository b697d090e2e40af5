"""Two real server processes over one database: what holds across replicas.

Concurrency is decided by the database (row locks, conditional updates, unique
constraints), never by one process's memory, so it holds between processes too.
Events cross replicas through PostgreSQL LISTEN/NOTIFY (not on SQLite).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.conftest import GraphQLClient
from tests.lock_waits import lock_waiters
from tests.operations import APPEND, REPLACE
from tests.ws import subscribed

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

CREATE = """mutation($key: String) { createConversation(input: {title: "r", idempotencyKey: $key})
  { conversation { id } userErrors { code } } }"""
LOCK = """mutation($id: ID!) { acquireLock(input: {conversationId: $id, ttlSeconds: 60})
  { token userErrors { code } } }"""
READ = """query($id: ID!) { conversation(id: $id) { version messageCount transcript
  messages(last: 1) { nodes { seq } } } }"""


@pytest.fixture
async def replicas(database_url: str, live_servers: LiveServers) -> list[LiveServer]:
    return list(
        await asyncio.gather(live_servers.start(database_url), live_servers.start(database_url))
    )


@contextlib.asynccontextmanager
async def clients(servers: list[LiveServer], token: str):  # type: ignore[no-untyped-def]
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(s.client(token)) for s in servers]


async def new_conversation(gql: GraphQLClient) -> str:
    data = await gql(CREATE)
    return str(data["createConversation"]["conversation"]["id"])


async def writer(gql: GraphQLClient, cid: str, name: str, count: int) -> list[tuple[str, int]]:
    """Append `count` messages one call at a time; the (text, seq) of each acknowledged one."""
    acked = []
    for i in range(count):
        text = f"{name}-{i}"
        data = await gql(APPEND, {"id": cid, "m": [{"role": "user", "content": text}]})
        assert data["appendMessages"]["userErrors"] == []
        acked.append((text, data["appendMessages"]["messages"][0]["seq"]))
    return acked


async def test_concurrent_appends_through_two_replicas_lose_and_reorder_nothing(
    replicas: list[LiveServer],
) -> None:
    token = await replicas[0].token()
    async with clients(replicas, token) as (one, two):
        cid = await new_conversation(one)
        jobs = [writer(c, cid, f"w{n}-{i}", 15) for i in range(6) for n, c in enumerate((one, two))]
        acked = [entry for batch in await asyncio.gather(*jobs) for entry in batch]
        stored = (await two(READ, {"id": cid}))["conversation"]

    transcript = [m["content"] for m in stored["transcript"]]
    assert stored["messageCount"] == len(acked) == len(transcript) == 180
    assert sorted(transcript) == sorted(text for text, _ in acked)  # none lost, none twice
    # Each acknowledged seq is where the message is, and seqs are 1..n without a gap.
    assert sorted(seq for _, seq in acked) == list(range(1, 181))
    assert all(transcript[seq - 1] == text for text, seq in acked)
    # One writer's messages keep the order it sent them in.
    for n in range(2):
        for i in range(6):
            mine = [t for t in transcript if t.startswith(f"w{n}-{i}-")]
            assert mine == [f"w{n}-{i}-{k}" for k in range(15)]


async def test_expected_version_lets_exactly_one_writer_win_across_replicas(
    replicas: list[LiveServer],
) -> None:
    token = await replicas[0].token()
    async with clients(replicas, token) as (one, two):
        cid = await new_conversation(one)
        version = 1

        async def race(gql: GraphQLClient, n: int) -> dict[str, Any]:
            messages = [{"role": "user", "content": f"writer {n}"}]
            data = await gql(REPLACE, {"id": cid, "m": messages, "v": version})
            return dict(data["replaceTranscript"], n=n)

        results = await asyncio.gather(*(race((one, two)[n % 2], n) for n in range(16)))
        stored = (await one(READ, {"id": cid}))["conversation"]

    winners = [r for r in results if r["conversation"] is not None]
    assert len(winners) == 1
    assert all(r["userErrors"] == [{"code": "CONFLICT"}] for r in results if r not in winners)
    assert stored["transcript"] == [{"role": "user", "content": f"writer {winners[0]['n']}"}]


async def test_exactly_one_lock_and_one_idempotent_conversation_across_replicas(
    replicas: list[LiveServer],
) -> None:
    token = await replicas[0].token()
    async with clients(replicas, token) as (one, two):
        cid = await new_conversation(one)
        locks = await asyncio.gather(*((one, two)[n % 2](LOCK, {"id": cid}) for n in range(16)))
        tokens = [r["acquireLock"]["token"] for r in locks if r["acquireLock"]["token"]]
        assert len(tokens) == 1
        assert sum(r["acquireLock"]["userErrors"] == [{"code": "LOCKED"}] for r in locks) == 15

        created = await asyncio.gather(
            *((one, two)[n % 2](CREATE, {"key": "retry-7"}) for n in range(12))
        )
        ids = {r["createConversation"]["conversation"]["id"] for r in created}
        assert len(ids) == 1


async def test_a_subscriber_on_one_replica_sees_writes_through_the_other(
    replicas: list[LiveServer], database_url: str
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("events cross processes through PostgreSQL LISTEN/NOTIFY only")
    token = await replicas[0].token()
    async with clients(replicas, token) as (one, two):
        cid = await new_conversation(one)
        async with subscribed(replicas[0], one, cid) as socket:
            big = "x" * 20_000  # over NOTIFY's 8000-byte limit: travels by reference
            for text in ("through replica two", big):
                await two(APPEND, {"id": cid, "m": [{"role": "user", "content": text}]})
                event = await socket.event()
                assert event["kind"] == "MESSAGES_APPENDED"
                assert event["conversationId"] == cid
                assert [m["data"]["content"] for m in event["messages"]] == [text]


async def settled(gql: GraphQLClient, cid: str) -> dict[str, Any]:
    """The conversation once no write is in flight any more.

    A request whose client was cancelled may still commit on the server a moment later, and
    one query's fields are read by separate statements: wait until two reads agree.
    """
    previous: dict[str, Any] | None = None
    for _ in range(50):
        current = (await gql(READ, {"id": cid}))["conversation"]
        if current == previous and current["messageCount"] == len(current["transcript"]):
            return current
        previous = current
        await asyncio.sleep(0.1)
    raise AssertionError(f"the conversation never settled: {previous}")


async def test_a_replica_killed_mid_load_loses_no_acknowledged_write(
    replicas: list[LiveServer],
) -> None:
    victim = replicas[0]
    token = await victim.token()
    acked: list[str] = []
    async with clients(replicas, token) as (one, two):
        cid = await new_conversation(two)

        async def load(gql: GraphQLClient, name: str) -> None:
            for i in range(10_000):
                text = f"{name}-{i}"
                try:
                    await gql(APPEND, {"id": cid, "m": [{"role": "user", "content": text}]})
                except (httpx.TransportError, AssertionError):
                    return  # the replica died under this request: not acknowledged
                acked.append(text)

        tasks = [asyncio.create_task(load(one, f"v{i}")) for i in range(4)]
        tasks += [asyncio.create_task(load(two, f"s{i}")) for i in range(2)]
        await asyncio.sleep(1.5)
        await victim.kill()
        await asyncio.sleep(0.5)
        for task in tasks[4:]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        stored = await settled(two, cid)

    transcript = [m["content"] for m in stored["transcript"]]
    assert len(acked) > 20, "the load never got going"
    assert set(acked) <= set(transcript), set(acked) - set(transcript)
    assert len(transcript) == len(set(transcript)) == stored["messageCount"]


async def test_a_write_cancelled_while_it_waits_for_another_replica_is_unavailable(
    replicas: list[LiveServer], database_url: str
) -> None:
    """A write waits for its tree's lock while another replica's transaction holds it; past
    the statement timeout, or cancelled by an operator (pg_cancel_backend), PostgreSQL ends
    the statement (SQLSTATE 57014) and the write rolls back. It answered INTERNAL
    ("Unexpected error.", not retried) where a client timeout a moment earlier answered
    DATABASE_UNAVAILABLE: now always the latter, and nothing is written."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: its lock waits are DATABASE_UNAVAILABLE already")
    from sqlalchemy import pool, text
    from sqlalchemy.ext.asyncio import create_async_engine

    token = await replicas[0].token()
    engine = create_async_engine(database_url, poolclass=pool.NullPool)
    try:
        async with clients(replicas, token) as (one, two), engine.connect() as holder:
            cid = await new_conversation(one)
            # Another replica's write to the tree, between its lock and its COMMIT.
            await holder.execute(
                text("SELECT id FROM conversation WHERE id = :id FOR UPDATE"), {"id": cid}
            )
            waiting = asyncio.create_task(
                two.post(APPEND, {"id": cid, "m": [{"role": "user", "content": "late"}]})
            )
            # The write waits for the tree's lock; an operator cancels it.
            async with engine.connect() as operator:
                for pid in await lock_waiters(engine):
                    await operator.execute(text("SELECT pg_cancel_backend(:pid)"), {"pid": pid})
            answer = (await waiting).json()
            await holder.rollback()
            (error,) = answer["errors"]
            assert error["extensions"]["code"] == "DATABASE_UNAVAILABLE", answer
            assert answer["data"] is None
            # Logged as a warning line, not an unexpected error's traceback.
            logged = replicas[1].logs()
            assert "the database is unavailable" in logged and "Traceback" not in logged, logged
            stored = (await one(READ, {"id": cid}))["conversation"]
            assert stored["messageCount"] == 0 and stored["transcript"] == []
    finally:
        await engine.dispose()
