"""Many clients at once against one real server process, over HTTP.

Each client is its own HTTP connection to a uvicorn process, so the requests really
interleave inside the server. What must hold: every acknowledged message is stored exactly
once at the `seq` it was acknowledged with, seqs are gapless, no response is a 5xx or
mentions "database is locked"; of racing conditional writers exactly one wins; of racing
lockers exactly one gets the lock; retried creates with one idempotency key make one
conversation; a query read during appends answers from one state, never half of each.
test_replicas shows the same races across two server processes.

The `slow` variants run more rounds and more messages per client (.ci/run runs them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import GraphQLClient

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

CLIENTS = 64
RACERS = 16

CREATE = """mutation($title: String, $key: String) {
  createConversation(input: {title: $title, idempotencyKey: $key}) {
    conversation { id version } userErrors { code field message } } }"""
APPEND = """mutation($id: ID!, $m: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $m}) {
    messages { seq data } userErrors { code field message } } }"""
REPLACE = """mutation($id: ID!, $m: [JSON!]!, $v: Int) {
  replaceTranscript(input: {conversationId: $id, messages: $m, expectedVersion: $v}) {
    conversation { version messageCount } userErrors { code field message } } }"""
LOCK = """mutation($id: ID!) { acquireLock(input: {conversationId: $id, ttlSeconds: 60}) {
  token userErrors { code field message } } }"""
RELEASE = """mutation($id: ID!, $t: String!) { releaseLock(input: {conversationId: $id, token: $t})
  { released userErrors { code } } }"""
READ = """query($id: ID!) { conversation(id: $id) { version messageCount transcript
  messages(last: 1) { totalCount nodes { seq } } } }"""
LIST = "{ conversations(first: 100) { totalCount nodes { id title } } }"

# What a response must never say, whatever its status.
FORBIDDEN_WORDS = ("database is locked", "traceback", "unexpected error")


@dataclass
class Probe:
    """Every response a load test got; what was wrong with any of them."""

    responses: int = 0
    failures: list[str] = field(default_factory=list)

    async def call(
        self, client: GraphQLClient, query: str, variables: dict[str, Any]
    ) -> dict[str, Any]:
        """Run one operation; a 4xx/5xx, a GraphQL error or a forbidden word fails the test."""
        response = await client.post(query, variables)
        self.responses += 1
        text = response.text
        problem = response.status_code >= 400 or any(w in text.lower() for w in FORBIDDEN_WORDS)
        if problem or "errors" in response.json():
            self.failures.append(f"{response.status_code}: {text[:300]}")
            raise AssertionError(self.failures[-1])
        data: dict[str, Any] = response.json()["data"]
        return data

    def assert_clean(self, server: LiveServer) -> None:
        assert self.failures == [], self.failures[:5]
        logs = server.logs().lower()
        for word in ("database is locked", "traceback"):
            assert word not in logs, server.logs()[-3000:]


@contextlib.asynccontextmanager
async def connections(server: LiveServer, token: str, count: int) -> AsyncIterator[list[Any]]:
    """`count` clients, each with an HTTP connection of its own."""
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(server.client(token)) for _ in range(count)]


async def new_conversation(probe: Probe, client: GraphQLClient, title: str = "load") -> str:
    data = await probe.call(client, CREATE, {"title": title})
    assert data["createConversation"]["userErrors"] == []
    return str(data["createConversation"]["conversation"]["id"])


def turn(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def appender(
    probe: Probe, client: GraphQLClient, cid: str, name: str, calls: int
) -> list[tuple[str, int]]:
    """`calls` appends of 1 to 3 messages; the (text, seq) of every acknowledged message."""
    acked: list[tuple[str, int]] = []
    for i in range(calls):
        batch = [turn(f"{name}-{i}-{k}") for k in range(i % 3 + 1)]
        data = await probe.call(client, APPEND, {"id": cid, "m": batch})
        assert data["appendMessages"]["userErrors"] == [], data
        stored = data["appendMessages"]["messages"]
        assert [m["data"] for m in stored] == batch
        acked += [(m["data"]["content"], m["seq"]) for m in stored]
    return acked


async def assert_stored_exactly(
    probe: Probe, client: GraphQLClient, cid: str, acked: list[tuple[str, int]]
) -> None:
    """The transcript is the acknowledged messages, each once, each at its acknowledged seq."""
    stored = (await probe.call(client, READ, {"id": cid}))["conversation"]
    transcript = [m["content"] for m in stored["transcript"]]
    assert sorted(seq for _, seq in acked) == list(range(1, len(acked) + 1))  # gapless
    assert stored["messageCount"] == len(transcript) == len(acked)
    assert stored["messages"]["totalCount"] == len(acked)
    assert stored["messages"]["nodes"] == [{"seq": len(acked)}]
    assert all(transcript[seq - 1] == text for text, seq in acked)
    assert len(set(transcript)) == len(transcript)  # nothing twice


def rounds(default: int, slow: int) -> list[Any]:
    return [
        pytest.param(default, id="quick"),
        pytest.param(slow, id="long", marks=pytest.mark.slow),
    ]


@pytest.mark.parametrize("calls", rounds(4, 40))
async def test_clients_appending_to_one_conversation_lose_and_repeat_nothing(
    live_server: LiveServer, calls: int
) -> None:
    probe = Probe()
    token = await live_server.token()
    async with connections(live_server, token, CLIENTS) as clients:
        cid = await new_conversation(probe, clients[0])
        batches = await asyncio.gather(
            *(appender(probe, c, cid, f"c{n}", calls) for n, c in enumerate(clients))
        )
        acked = [entry for batch in batches for entry in batch]
        assert len(acked) == CLIENTS * sum(i % 3 + 1 for i in range(calls))
        await assert_stored_exactly(probe, clients[0], cid, acked)
        # Each client's messages keep the order it sent them in.
        transcript = sorted(acked, key=lambda entry: entry[1])
        for n in range(CLIENTS):
            mine = [text for text, _ in transcript if text.startswith(f"c{n}-")]
            assert mine == [text for text, _ in batches[n]]
    probe.assert_clean(live_server)


CREATED_AT = """query($id: ID!, $after: String) { conversation(id: $id) { updatedAt
  messages(first: 100, after: $after) {
    nodes { seq createdAt } pageInfo { endCursor hasNextPage } } } }"""


async def test_racing_appends_are_timed_in_the_order_of_their_seqs(
    live_server: LiveServer,
) -> None:
    """A message's createdAt follows its seq, and the conversation's updatedAt is its last
    write's: on PostgreSQL each write took its instant before it waited for the
    conversation's row, so about half of 200 racing appends were timed before the message
    that precedes them (a dashboard sorting by time, or reading what changed since a time,
    saw them out of order or not at all)."""
    probe = Probe()
    token = await live_server.token()
    async with connections(live_server, token, RACERS) as clients:
        cid = await new_conversation(probe, clients[0])

        async def appends(client: GraphQLClient, n: int) -> None:
            for i in range(8):
                data = await probe.call(client, APPEND, {"id": cid, "m": [turn(f"{n}-{i}")]})
                assert data["appendMessages"]["userErrors"] == [], data

        await asyncio.gather(*(appends(c, n) for n, c in enumerate(clients)))
        stamps: list[tuple[int, str]] = []
        after = None
        while True:
            read = await probe.call(clients[0], CREATED_AT, {"id": cid, "after": after})
            page = read["conversation"]["messages"]
            stamps += [(m["seq"], m["createdAt"]) for m in page["nodes"]]
            if not page["pageInfo"]["hasNextPage"]:
                break
            after = page["pageInfo"]["endCursor"]
        times = [datetime.fromisoformat(at) for _, at in stamps]
        assert [seq for seq, _ in stamps] == list(range(1, RACERS * 8 + 1))
        backwards = [stamps[i] for i in range(1, len(times)) if times[i] < times[i - 1]]
        assert backwards == []
        assert datetime.fromisoformat(read["conversation"]["updatedAt"]) == times[-1]
    probe.assert_clean(live_server)


@pytest.mark.parametrize("calls", rounds(4, 40))
async def test_clients_appending_to_their_own_conversations_lose_nothing(
    live_server: LiveServer, calls: int
) -> None:
    probe = Probe()
    token = await live_server.token()
    async with connections(live_server, token, CLIENTS) as clients:

        async def own(n: int, client: GraphQLClient) -> tuple[str, list[tuple[str, int]]]:
            cid = await new_conversation(probe, client, f"own-{n}")
            return cid, await appender(probe, client, cid, f"c{n}", calls)

        results = await asyncio.gather(*(own(n, c) for n, c in enumerate(clients)))
        for (cid, acked), client in zip(results, clients, strict=True):
            await assert_stored_exactly(probe, client, cid, acked)
        listed = (await probe.call(clients[0], LIST, {}))["conversations"]
        assert listed["totalCount"] == CLIENTS
        assert {n["id"] for n in listed["nodes"]} == {cid for cid, _ in results}
    probe.assert_clean(live_server)


@pytest.mark.parametrize("calls", rounds(6, 40))
async def test_a_query_during_appends_reads_one_state(live_server: LiveServer, calls: int) -> None:
    # The count comes from the conversation, the transcript and the last page from two more
    # statements: without one snapshot an append committed between them tears the answer.
    probe = Probe()
    token = await live_server.token()
    async with connections(live_server, token, CLIENTS) as clients:
        cid = await new_conversation(probe, clients[0])
        writers, readers = clients[: CLIENTS // 2], clients[CLIENTS // 2 :]
        appended = asyncio.Event()
        torn: list[dict[str, Any]] = []

        async def write() -> None:
            await asyncio.gather(
                *(appender(probe, c, cid, f"w{n}", calls) for n, c in enumerate(writers))
            )
            appended.set()

        async def read(client: GraphQLClient) -> int:
            reads = 0
            while not appended.is_set():
                stored = (await probe.call(client, READ, {"id": cid}))["conversation"]
                reads += 1
                count = stored["messageCount"]
                last = stored["messages"]["nodes"]
                if len(stored["transcript"]) != count or last != [{"seq": count}][:count]:
                    torn.append(
                        {"count": count, "transcript": len(stored["transcript"]), "last": last}
                    )
            return reads

        _, reads = await asyncio.gather(write(), asyncio.gather(*(read(c) for c in readers)))
        assert sum(reads) >= len(readers)
        assert torn == [], f"{len(torn)} of {sum(reads)} answers were torn: {torn[:3]}"
    probe.assert_clean(live_server)


def tagged_transcript(prefix: list[dict[str, Any]], tag: str, length: int) -> list[dict[str, Any]]:
    """The shared prefix, then `length` messages that each name their writer and position:
    a transcript mixed from two writers, or cut short, cannot pass for either."""
    return [*prefix, *(turn(f"{tag} {i + 1}/{length}") for i in range(length))]


@pytest.mark.parametrize("rounds_", rounds(3, 25))
async def test_replace_transcript_racers_with_one_expected_version_one_wins(
    live_server: LiveServer, rounds_: int
) -> None:
    probe = Probe()
    token = await live_server.token()
    async with connections(live_server, token, RACERS) as clients:
        cid = await new_conversation(probe, clients[0])
        prefix = [turn("system prompt"), turn("first question")]
        version = (await probe.call(clients[0], REPLACE, {"id": cid, "m": prefix, "v": 1}))[
            "replaceTranscript"
        ]["conversation"]["version"]
        for r in range(rounds_):
            wanted = {
                n: tagged_transcript(prefix, f"r{r}w{n}", 1 + (n + r) % 7) for n in range(RACERS)
            }

            async def race(
                n: int, client: GraphQLClient, v: int = version, w: dict[int, Any] = wanted
            ) -> dict[str, Any]:
                data = await probe.call(client, REPLACE, {"id": cid, "m": w[n], "v": v})
                return dict(data["replaceTranscript"], n=n)

            results = await asyncio.gather(*(race(n, c) for n, c in enumerate(clients)))
            winners = [r for r in results if r["conversation"] is not None]
            assert len(winners) == 1, results
            losers = [r for r in results if r is not winners[0]]
            assert all(
                [e["code"] for e in r["userErrors"]] == ["CONFLICT"]
                and r["userErrors"][0]["field"] == ["expectedVersion"]
                for r in losers
            ), losers
            stored = (await probe.call(clients[0], READ, {"id": cid}))["conversation"]
            winner = wanted[winners[0]["n"]]
            assert stored["transcript"] == winner
            assert stored["version"] == winners[0]["conversation"]["version"] == version + 1
            assert stored["messageCount"] == len(winner)
            version += 1
    probe.assert_clean(live_server)


@pytest.mark.parametrize("rounds_", rounds(3, 25))
async def test_racing_lockers_get_exactly_one_token(live_server: LiveServer, rounds_: int) -> None:
    probe = Probe()
    token = await live_server.token()
    async with connections(live_server, token, RACERS) as clients:
        cid = await new_conversation(probe, clients[0])
        for _ in range(rounds_):
            results = await asyncio.gather(*(probe.call(c, LOCK, {"id": cid}) for c in clients))
            payloads = [r["acquireLock"] for r in results]
            tokens = [p["token"] for p in payloads if p["token"]]
            assert len(tokens) == 1, payloads
            refused = [p["userErrors"] for p in payloads if not p["token"]]
            assert all([e["code"] for e in errors] == ["LOCKED"] for errors in refused)
            assert len(refused) == RACERS - 1
            # The one token is the real one: it releases the lock, for the next round.
            released = await probe.call(clients[-1], RELEASE, {"id": cid, "t": tokens[0]})
            assert released["releaseLock"] == {"released": True, "userErrors": []}
    probe.assert_clean(live_server)


@pytest.mark.parametrize("rounds_", rounds(2, 20))
async def test_retried_creates_with_one_idempotency_key_make_one_conversation(
    live_server: LiveServer, rounds_: int
) -> None:
    probe = Probe()
    token = await live_server.token(owner="user:retrier")
    async with connections(live_server, token, RACERS) as clients:
        made: set[str] = set()
        for r in range(rounds_):
            key = f"retry-{r}"
            racing = await asyncio.gather(
                *(
                    probe.call(c, CREATE, {"title": f"t{n}", "key": key})
                    for n, c in enumerate(clients)
                )
            )
            # A client retrying one by one after a timeout gets the same conversation too.
            retries = [await probe.call(clients[0], CREATE, {"key": key}) for _ in range(3)]
            payloads = [d["createConversation"] for d in [*racing, *retries]]
            assert all(p["userErrors"] == [] for p in payloads), payloads
            ids = {p["conversation"]["id"] for p in payloads}
            assert len(ids) == 1, ids
            made |= ids
        listed = (await probe.call(clients[0], LIST, {}))["conversations"]
        assert listed["totalCount"] == rounds_
        assert {n["id"] for n in listed["nodes"]} == made
        # The winner's title is one of the racers' titles, stored once.
        assert all(n["title"] in {f"t{i}" for i in range(RACERS)} for n in listed["nodes"])
    probe.assert_clean(live_server)
