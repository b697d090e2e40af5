"""kill -9 under a sustained write load, then restart: what was acknowledged is there, and
nothing half-written is visible.

Each loop starts writers against a real server process, kills it (SIGKILL, no shutdown hook
runs) at a random moment, starts a new process on the same database and checks, through the
API, everything acknowledged in every loop so far:
- appends: each acknowledged message once, at its acknowledged seq; a batch is stored whole
  or not at all (also the one in flight when the server died); seqs stay gapless;
- replaceTranscript: the stored transcript is the last acknowledged one or the one in flight,
  never a mix (every message names its writer, round and position, so a mix shows);
- checkpoints: the latest version is the last acknowledged one or the one in flight;
- createConversation with an idempotency key: a retry after the restart returns the
  acknowledged conversation, and an unacknowledged one is created at most once;
and in the database itself: PRAGMA integrity_check (SQLite), and for every conversation
message_count = number of messages = highest seq.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.conftest import GraphQLClient
from tests.operations import CHECKPOINT
from tests.test_concurrency import APPEND, CREATE, READ, REPLACE, tagged_transcript, turn

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

APPENDERS = 4
REPLACERS = 3
SESSION = """query($s: String!) { sessionState(sessionId: $s) { version state }
  sessionStateHistory(sessionId: $s, first: 1) { totalCount } }"""
LIST = """query($after: String) { conversations(first: 100, after: $after) {
  nodes { id title } pageInfo { endCursor hasNextPage } } }"""
PREFIX = [turn("system prompt"), turn("question")]


@dataclass
class Ledger:
    """What the writers were told was stored, and what they had in flight when it died."""

    appends: dict[str, list[list[str]]] = field(default_factory=dict)  # cid -> acked batches
    in_flight_batches: dict[str, list[list[str]]] = field(default_factory=dict)
    acked_seqs: dict[str, dict[str, int]] = field(default_factory=dict)  # cid -> text -> seq
    transcripts: dict[str, list[Any]] = field(default_factory=dict)  # cid -> last acked
    transcript_in_flight: dict[str, list[Any]] = field(default_factory=dict)
    checkpoints: dict[str, int] = field(default_factory=dict)  # session -> last acked version
    checkpoint_in_flight: dict[str, Any] = field(default_factory=dict)
    states: dict[str, Any] = field(default_factory=dict)  # session -> last acked state
    keys: dict[str, str] = field(default_factory=dict)  # idempotency key -> acked id
    unacked_keys: set[str] = field(default_factory=set)
    acknowledged: int = 0


async def call(client: GraphQLClient, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One operation; a transport failure (the server died) propagates, anything else fails."""
    response = await client.post(query, variables)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def appender(client: GraphQLClient, cid: str, name: str, ledger: Ledger) -> None:
    for i in range(100_000):
        batch = [f"{name}-{i}-{k}" for k in range(i % 3 + 1)]
        ledger.in_flight_batches.setdefault(cid, []).append(batch)
        data = await call(client, APPEND, {"id": cid, "m": [turn(t) for t in batch]})
        payload = data["appendMessages"]
        assert payload["userErrors"] == [], payload
        ledger.in_flight_batches[cid].remove(batch)
        ledger.appends.setdefault(cid, []).append(batch)
        for message in payload["messages"]:
            ledger.acked_seqs.setdefault(cid, {})[message["data"]["content"]] = message["seq"]
        ledger.acknowledged += 1


async def replacer(client: GraphQLClient, cid: str, tag: str, ledger: Ledger) -> None:
    for i in range(100_000):
        # Lengths go up and down: the transcript grows, and shrinks as after a compaction.
        wanted = tagged_transcript(PREFIX, f"{tag}.{i}", 1 + (i * 7) % 23)
        ledger.transcript_in_flight[cid] = wanted
        data = await call(client, REPLACE, {"id": cid, "m": wanted, "v": None})
        assert data["replaceTranscript"]["userErrors"] == [], data
        ledger.transcripts[cid] = wanted
        del ledger.transcript_in_flight[cid]
        ledger.acknowledged += 1


def state_of(session: str, n: int) -> dict[str, Any]:
    return {
        "session_id": session,
        "active_envelope": {"id": f"env-{n}", "facts": [f"step({n})"]},
        "logical_facts": [f"step({n})"],
    }


async def checkpointer(client: GraphQLClient, session: str, tag: str, ledger: Ledger) -> None:
    for i in range(100_000):
        state = state_of(session, i) | {"tag": tag}
        ledger.checkpoint_in_flight[session] = state
        data = await call(client, CHECKPOINT, {"s": session, "state": state})
        payload = data["checkpointSession"]
        assert payload["userErrors"] == [], payload
        ledger.checkpoints[session] = payload["sessionState"]["version"]
        ledger.states[session] = state
        del ledger.checkpoint_in_flight[session]
        ledger.acknowledged += 1


async def creator(client: GraphQLClient, tag: str, ledger: Ledger) -> None:
    for i in range(100_000):
        key = f"{tag}-{i}"
        ledger.unacked_keys.add(key)
        data = await call(client, CREATE, {"title": key, "key": key})
        ledger.keys[key] = data["createConversation"]["conversation"]["id"]
        ledger.unacked_keys.discard(key)
        ledger.acknowledged += 1


@contextlib.asynccontextmanager
async def clients(server: LiveServer, token: str, count: int) -> AsyncIterator[list[Any]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(server.client(token)) for _ in range(count)]


async def load_then_kill(
    server: LiveServer, token: str, targets: Targets, ledger: Ledger, loop: int, rng: random.Random
) -> None:
    """Start every writer, kill the server at a random moment under load, wait for them."""
    async with clients(server, token, APPENDERS + REPLACERS + 2) as pool:
        jobs = [
            *(appender(pool[n], targets.shared, f"L{loop}a{n}", ledger) for n in range(APPENDERS)),
            *(
                replacer(pool[APPENDERS + n], cid, f"L{loop}r{n}", ledger)
                for n, cid in enumerate(targets.replaced)
            ),
            checkpointer(pool[-2], targets.session, f"L{loop}", ledger),
            creator(pool[-1], f"L{loop}k", ledger),
        ]
        tasks = [asyncio.create_task(job) for job in jobs]
        before = ledger.acknowledged
        # Kill only once the load is under way, at a moment the test does not choose.
        for _ in range(200):
            if ledger.acknowledged - before >= 20:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(rng.uniform(0.05, 0.8))
        await server.kill()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        # Every writer stops because the server died under it, for no other reason.
        assert isinstance(result, httpx.TransportError), repr(result)
    assert ledger.acknowledged - before >= 20, "the load never got going"


@dataclass(frozen=True)
class Targets:
    shared: str
    replaced: list[str]
    session: str = "crash-session"


async def verify(client: GraphQLClient, targets: Targets, ledger: Ledger) -> None:
    await verify_appends(client, targets.shared, ledger)
    for cid in targets.replaced:
        stored = (await call(client, READ, {"id": cid}))["conversation"]
        candidates = [ledger.transcripts.get(cid), ledger.transcript_in_flight.get(cid)]
        assert stored["transcript"] in [c for c in candidates if c is not None], (
            "a transcript that no writer acknowledged or had in flight (half-written?)",
            stored["transcript"],
        )
        assert stored["messageCount"] == len(stored["transcript"])
        assert stored["messages"]["nodes"][-1]["seq"] == stored["messageCount"]
    await verify_session(client, targets.session, ledger)
    await verify_keys(client, ledger)


async def verify_appends(client: GraphQLClient, cid: str, ledger: Ledger) -> None:
    stored = (await call(client, READ, {"id": cid}))["conversation"]
    transcript = [m["content"] for m in stored["transcript"]]
    # Gapless: n messages, unique seqs, the highest is n.
    assert stored["messageCount"] == len(transcript) == stored["messages"]["totalCount"]
    assert not transcript or stored["messages"]["nodes"] == [{"seq": len(transcript)}]
    assert len(set(transcript)) == len(transcript), "a message stored twice"
    position = {content: seq for seq, content in enumerate(transcript, start=1)}
    for content, seq in ledger.acked_seqs.get(cid, {}).items():
        assert position.get(content) == seq, (
            f"acknowledged {content} at seq {seq}, stored at {position.get(content)}"
        )
    # A batch is all or nothing, in order: acknowledged ones all, the one in flight either.
    sent = [*ledger.appends.get(cid, []), *ledger.in_flight_batches.get(cid, [])]
    seen = 0
    for batch in sent:
        found = [position.get(t) for t in batch]
        if found[0] is None:
            assert found == [None] * len(batch), f"half a batch stored: {batch} -> {found}"
            assert batch in ledger.in_flight_batches.get(cid, []), f"acknowledged, lost: {batch}"
            continue
        assert found == list(range(found[0], found[0] + len(batch))), (batch, found)
        seen += len(batch)
    assert seen == len(transcript), "messages nobody sent"
    # Batches in flight that made it are acknowledged now, for the next loop's checks.
    for batch in ledger.in_flight_batches.get(cid, []):
        if batch[0] in position:
            ledger.appends[cid].append(batch)
            for t in batch:
                ledger.acked_seqs[cid][t] = position[t]
    ledger.in_flight_batches[cid] = []


async def verify_session(client: GraphQLClient, session: str, ledger: Ledger) -> None:
    data = await call(client, SESSION, {"s": session})
    latest = data["sessionState"]
    acked = ledger.checkpoints.get(session, 0)
    if latest is None:
        assert acked == 0
        return
    assert data["sessionStateHistory"]["totalCount"] == latest["version"]  # 1..n, no gap
    in_flight = ledger.checkpoint_in_flight.pop(session, None)
    if latest["version"] == acked:
        assert latest["state"] == ledger.states[session]
    else:
        assert latest["version"] == acked + 1 and latest["state"] == in_flight, latest
    ledger.checkpoints[session] = latest["version"]
    ledger.states[session] = latest["state"]


async def verify_keys(client: GraphQLClient, ledger: Ledger) -> None:
    titles: dict[str, list[str]] = {}
    after = None
    while True:
        page = (await call(client, LIST, {"after": after}))["conversations"]
        for node in page["nodes"]:
            titles.setdefault(node["title"], []).append(node["id"])
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    for key, cid in ledger.keys.items():
        assert titles.get(key) == [cid], (key, titles.get(key))
    for key in sorted(ledger.unacked_keys):
        assert len(titles.get(key, [])) <= 1, key
        # The client retries the create it got no answer to: one conversation, whatever happened.
        retried = await call(client, CREATE, {"title": key, "key": key})
        cid = retried["createConversation"]["conversation"]["id"]
        assert titles.get(key, [cid]) == [cid]
        ledger.keys[key] = cid
    ledger.unacked_keys.clear()


async def assert_database_consistent(database_url: str) -> None:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            if database_url.startswith("sqlite"):
                check = (await conn.execute(text("PRAGMA integrity_check"))).scalars().all()
                assert check == ["ok"], check
                broken = (await conn.execute(text("PRAGMA foreign_key_check"))).all()
                assert broken == [], broken
            rows = (
                await conn.execute(
                    text(
                        "SELECT c.id, c.message_count, COUNT(m.seq), COALESCE(MAX(m.seq), 0) "
                        "FROM conversation c LEFT JOIN message m ON m.conversation_id = c.id "
                        "GROUP BY c.id, c.message_count"
                    )
                )
            ).all()
            bad = [r for r in rows if not r[1] == r[2] == r[3]]
            assert bad == [], bad
    finally:
        await engine.dispose()


async def crash_loops(live_servers: LiveServers, database_url: str, loops: int) -> Ledger:
    server = await live_servers.start(database_url)
    token = await server.token()
    async with server.client(token) as client:
        shared = (await call(client, CREATE, {"title": "shared"}))["createConversation"]
        replaced = [
            (await call(client, CREATE, {"title": f"replaced-{n}"}))["createConversation"]
            for n in range(REPLACERS)
        ]
    targets = Targets(shared["conversation"]["id"], [r["conversation"]["id"] for r in replaced])
    ledger = Ledger()
    rng = random.Random(loops)
    for loop in range(loops):
        await load_then_kill(server, token, targets, ledger, loop, rng)
        server = await live_servers.restart(server)
        async with server.client(token) as client:
            await verify(client, targets, ledger)
        await assert_database_consistent(database_url)
    return ledger


@pytest.mark.parametrize(
    "loops",
    [pytest.param(3, id="3-loops"), pytest.param(20, id="20-loops", marks=pytest.mark.slow)],
)
async def test_kill_9_under_load_loses_nothing_acknowledged(
    live_servers: LiveServers, database_url: str, loops: int
) -> None:
    ledger = await crash_loops(live_servers, database_url, loops)
    assert ledger.acknowledged > 20 * loops
    print(f"crash loops: {loops}, acknowledged writes: {ledger.acknowledged}, lost: 0")
