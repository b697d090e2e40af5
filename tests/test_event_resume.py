"""Resumable event streams: `conversationEvents(after: cursor)` replays the durable event log,
then goes on live, with no gap and no duplicate; over real WebSockets to real server processes
(two replicas over one PostgreSQL for the cross-replica cases)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import ColumnElement, and_, or_, select, update

from graph.domain import cursors
from graph.domain.messages import prepare_message
from graph.domain.principal import SYSTEM
from graph.services import build_services
from graph.settings import Settings
from graph.store import event_log
from graph.store.events import Event
from graph.store.retention import sweep
from graph.store.sql import Sql
from graph.store.tables import event_log as L
from tests.conftest import GraphQLClient, Server
from tests.operations import (
    COMPLETE,
    DELETE,
    READ,
    REPLACE,
    UPDATE,
    append,
    create,
    delegate,
    touch,
)
from tests.test_http import serving
from tests.ws import (
    RECEIVE_TIMEOUT,
    SYNC_TIMEOUT,
    Session,
    connect_app,
    graphql_errors,
    session,
)

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

READ_VERSION = "query($id: ID!) { conversation(id: $id) { version } }"

# Only what an event carries itself: nested records would be read afresh at delivery.
FIELDS = (
    "kind conversationId version cursor messageCount messages { seq role data } "
    "delegation { id status }"
)
SUBSCRIBE = f"""
subscription($id: ID!, $after: String) {{
  conversationEvents(conversationId: $id, after: $after) {{ {FIELDS} }}
}}"""


@contextlib.asynccontextmanager
async def stream(
    server: LiveServer, gql: GraphQLClient, cid: str, after: str | None
) -> AsyncIterator[Session]:
    assert gql.token is not None
    # No keep-alive pings from this side: a test's client may stop reading for a while. And
    # it takes in all the server sends: a stream left behind a replay closes at once.
    async with session(server, gql.token, ping_interval=None, max_queue=None) as socket:
        await socket.subscribe(SUBSCRIBE, {"id": cid, "after": after})
        yield socket


async def live_stream(
    stack: contextlib.AsyncExitStack, server: LiveServer, gql: GraphQLClient, cid: str
) -> tuple[Session, str]:
    """A subscription known to be receiving, and the cursor of the event that proved it."""
    socket = await stack.enter_async_context(stream(server, gql, cid, None))
    event = await socket.wait_until_live(
        lambda: touch(gql, cid),
        lambda version, event: event["conversationId"] == cid and event["version"] == version,
    )
    return socket, event["cursor"]


async def witness_and_lost(
    stack: contextlib.AsyncExitStack, server: LiveServer, gql: GraphQLClient, cid: str
) -> tuple[Session, str]:
    """A witness stream that stays connected (what a resumed stream must match), and the
    cursor of a stream that disconnected, which the witness has reached."""
    witness, _ = await live_stream(stack, server, gql, cid)
    async with contextlib.AsyncExitStack() as lost:
        _, cursor = await live_stream(lost, server, gql, cid)
    while (await witness.event())["cursor"] != cursor:
        pass
    return witness, cursor


async def events(socket: Session, count: int) -> list[dict[str, Any]]:
    return [await socket.event() for _ in range(count)]


async def nothing_more(socket: Session) -> None:
    with pytest.raises(TimeoutError):
        await socket.receive(within=SYNC_TIMEOUT)


async def refused(server: LiveServer, gql: GraphQLClient, cid: str, after: str) -> dict[str, Any]:
    """The error of a subscription refused at its start."""
    async with stream(server, gql, cid, after) as socket:
        message = await socket.receive()
        if message["type"] == "error":
            error: dict[str, Any] = message["payload"][0]
            return error
        assert message["type"] == "next" and message["payload"]["data"] is None, message
        (error,) = message["payload"]["errors"]
        # Placed at the subscription's field, as a field's error is over HTTP.
        assert error["path"] == ["conversationEvents"], error
        assert error["locations"] == [{"line": 3, "column": 3}], error
        return dict(error)


@pytest.fixture
async def alice(live_server: LiveServer) -> AsyncIterator[GraphQLClient]:
    async with live_server.client(await live_server.token()) as gql:
        yield gql


async def write_200_across_the_tree(alice: GraphQLClient, root: str, child: str) -> int:
    """Appends to the root and two child transcripts, delegations made and completed (the
    parent's event and the child's), a rename, a replaced transcript and a deleted child
    transcript (its delete and its parent's update): 200 events."""
    delegation = await delegate(alice, root, "second")
    second = delegation["childConversation"]["id"]
    written = 1
    while written < 193:
        await append(alice, (root, child, second)[written % 3], f"m{written}")
        written += 1
    await alice(UPDATE, {"id": child, "title": "renamed"})
    await alice(REPLACE, {"id": second, "m": [{"role": "user", "content": "replaced"}]})
    done = await alice(COMPLETE, {"id": delegation["id"], "summary": "found it"})
    assert done["completeDelegation"]["delegation"]["status"] == "COMPLETED"
    third = (await delegate(alice, root, "third"))["childConversation"]["id"]
    assert (await alice(DELETE, {"id": third}))["deleteConversation"]["deleted"]
    return written + 7


async def test_a_resumed_stream_gets_exactly_the_missed_events_in_order_then_live_ones(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    async with contextlib.AsyncExitStack() as stack:
        witness, cursor = await witness_and_lost(stack, live_server, alice, root)
        count = await write_200_across_the_tree(alice, root, child)
        missed = await events(witness, count)
        assert len({e["cursor"] for e in missed}) == count == 200
        kinds = {e["kind"] for e in missed}
        assert {"MESSAGES_APPENDED", "DELEGATION_CREATED", "DELEGATION_COMPLETED"} <= kinds
        assert {"CONVERSATION_UPDATED", "TRANSCRIPT_REPLACED", "CONVERSATION_DELETED"} <= kinds

        async with stream(live_server, alice, root, cursor) as resumed:
            # The same events as the witness, in the same order, with the same content.
            assert await events(resumed, count) == missed
            await nothing_more(resumed)
            live = await append(alice, child, "after the seam")
            (event,) = await events(resumed, 1)
            assert event["messages"] == live["messages"]
            assert event == (await events(witness, 1))[0]
            await nothing_more(resumed)


async def test_a_read_s_event_cursor_resumes_a_stream_from_that_read(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """A client that reads, then subscribes with the read's `eventCursor`, gets exactly what
    was committed in between: a root's cursor and its child's name the same position."""
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    await append(alice, child, "before the read")
    read = await alice(
        "query($r: ID!, $c: ID!) { r: conversation(id: $r) { messageCount eventCursor }"
        " c: conversation(id: $c) { messageCount eventCursor } }",
        {"r": root, "c": child},
    )
    assert read["r"]["eventCursor"] == read["c"]["eventCursor"]
    listed = await alice("{ conversations(first: 10) { nodes { id eventCursor } } }")
    assert {"id": root, "eventCursor": read["r"]["eventCursor"]} in listed["conversations"]["nodes"]
    between = await append(alice, root, "between the read and the subscription")
    async with stream(live_server, alice, root, read["r"]["eventCursor"]) as resumed:
        (event,) = await events(resumed, 1)
        assert (event["kind"], event["messages"]) == ("MESSAGES_APPENDED", between["messages"])
        await nothing_more(resumed)
        live = await append(alice, child, "live")
        (event,) = await events(resumed, 1)
        assert event["messages"] == live["messages"]
    async with stream(live_server, alice, child, read["c"]["eventCursor"]) as resumed:
        # The child's own stream wants its events only: the root's append is passed over.
        (event,) = await events(resumed, 1)
        assert event["messages"] == live["messages"]
        await nothing_more(resumed)
    # Outside one read, a child's root is read apart from it: no cursor rather than one
    # that may be past the answer. A root's is its own row's.
    written = await alice(
        "mutation($c: ID!, $r: ID!) {"
        ' c: updateConversation(input: {id: $c, title: "c"}) { conversation { eventCursor } }'
        ' r: updateConversation(input: {id: $r, title: "r"}) { conversation { eventCursor } } }',
        {"c": child, "r": root},
    )
    assert written["c"]["conversation"]["eventCursor"] is None
    assert written["r"]["conversation"]["eventCursor"] is not None


async def test_a_cursor_read_after_the_rest_of_an_event_is_not_given_for_it(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """A replayed event's delegation is as it was then, but its parent conversation is read
    now: its cursor named a position past the event's state (past the delegation's
    completion here), and a stream from it never sent the completion of a delegation the
    client held as running. Read apart from the rest of the answer, it has none."""
    root = await create(alice)
    start = (await alice("query($r: ID!) { conversation(id: $r) { eventCursor } }", {"r": root}))[
        "conversation"
    ]["eventCursor"]
    running = await delegate(alice, root)
    done = await alice(COMPLETE, {"id": running["id"], "summary": "s"})
    assert done["completeDelegation"]["userErrors"] == []
    nested = (
        "subscription($id: ID!, $after: String) {"
        " conversationEvents(conversationId: $id, after: $after) {"
        " kind delegation { status parentConversation { eventCursor } } } }"
    )
    async with session(live_server, alice.token or "", ping_interval=None, max_queue=None) as ws:
        await ws.subscribe(nested, {"id": root, "after": start})
        created, completed = await events(ws, 2)
    assert created["kind"] == "DELEGATION_CREATED"
    assert created["delegation"] == {
        "status": "RUNNING",
        "parentConversation": {"eventCursor": None},
    }
    assert completed["delegation"]["parentConversation"] == {"eventCursor": None}


async def test_a_client_reconnecting_every_50_events_gets_every_event_exactly_once(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    children = [(await delegate(alice, root, f"t{i}"))["childConversation"]["id"] for i in range(3)]
    targets = [root, *children]
    async with contextlib.AsyncExitStack() as stack:
        _, cursor = await live_stream(stack, live_server, alice, root)
    per_writer = 250

    async def writer(cid: str) -> None:
        for i in range(per_writer):
            await append(alice, cid, f"{cid[:4]}-{i}")

    writers = asyncio.gather(*(writer(cid) for cid in targets))
    received: list[dict[str, Any]] = []
    reconnects = 0
    while len(received) < per_writer * len(targets):
        async with stream(live_server, alice, root, cursor) as socket:
            for _ in range(50):
                event = await socket.event(within=RECEIVE_TIMEOUT * 3)
                received.append(event)
                cursor = event["cursor"]
                if len(received) == per_writer * len(targets):
                    break
        reconnects += 1
    await writers

    assert reconnects >= 20
    keys = [(e["conversationId"], e["version"]) for e in received]
    assert len(set(keys)) == len(keys) == 1000  # none twice, none lost
    for cid in targets:
        versions = [v for c, v in keys if c == cid]
        texts = [
            e["messages"][0]["data"]["content"] for e in received if e["conversationId"] == cid
        ]
        assert versions == list(range(versions[0], versions[0] + per_writer))
        assert texts == [f"{cid[:4]}-{i}" for i in range(per_writer)]
    async with stream(live_server, alice, root, cursor) as socket:
        await nothing_more(socket)


# -- cursors that cannot resume --------------------------------------------------------


async def test_expired_forged_and_foreign_cursors_are_refused(
    live_servers: LiveServers, database_url: str
) -> None:
    server = await live_servers.start(database_url, env={"CONVOGRAPH_EVENT_RETENTION_SECONDS": "1"})
    async with server.client(await server.token()) as alice:
        cid = await create(alice)
        other = await create(alice, "other")
        async with contextlib.AsyncExitStack() as stack:
            _, old = await live_stream(stack, server, alice, cid)
        await append(alice, cid, "soon pruned")
        await asyncio.sleep(1.5)
        async with contextlib.AsyncExitStack() as stack:
            _, recent = await live_stream(stack, server, alice, cid)
        await server.cli("sweep")

        error = await refused(server, alice, cid, old)
        assert error["extensions"]["code"] == "CURSOR_EXPIRED"
        assert error["extensions"]["field"] == ["after"]
        # The newest cursor still resumes: nothing missed, then live.
        async with stream(server, alice, cid, recent) as socket:
            await nothing_more(socket)
            await append(alice, cid, "live")
            assert (await socket.event())["kind"] == "MESSAGES_APPENDED"

        root_id, position = cursors.event(recent, "after")
        for forged in (
            "not a cursor",
            cursors.encode_event(root_id, position + 1000),  # a position never issued
            cursors.encode_event(root_id, -1),
            cursors.encode_event("elsewhere", position),
            cursors.encode_keyset(datetime.now(UTC), root_id),
            recent,  # a cursor of another conversation's stream
        ):
            target = other if forged == recent else cid
            error = await refused(server, alice, target, forged)
            assert error["extensions"]["code"] == "INVALID_INPUT", forged
            assert error["extensions"]["field"] == ["after"]

        async with server.client(await server.token(owner="user:bob")) as bob:
            error = await refused(server, bob, cid, recent)
            assert error["extensions"]["code"] == "NOT_FOUND"
            assert error["message"] == "conversation not found"
            assert "cursor" not in str(error)


# -- two replicas over one PostgreSQL ------------------------------------------------


@pytest.fixture
async def replicas(database_url: str, live_servers: LiveServers) -> list[LiveServer]:
    if database_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    return list(
        await asyncio.gather(live_servers.start(database_url), live_servers.start(database_url))
    )


async def test_a_stream_resumes_on_another_replica_and_never_passes_a_later_commit(
    replicas: list[LiveServer], database_url: str
) -> None:
    a, b = replicas
    token = await a.token()
    async with a.client(token) as through_a, b.client(token) as through_b:
        root = await create(through_a)
        child = (await delegate(through_a, root))["childConversation"]["id"]
        async with contextlib.AsyncExitStack() as stack:
            _, cursor = await live_stream(stack, a, through_a, root)
        written = [await append(through_a, (root, child)[i % 2], f"a{i}") for i in range(20)]
        async with stream(b, through_b, root, cursor) as resumed:
            replayed = await events(resumed, 20)
            assert [e["messages"] for e in replayed] == [w["messages"] for w in written]
            cursor = replayed[-1]["cursor"]

            # A transaction in this process takes its position and stays open; a write
            # through replica A to the same tree comes after it in the log, however late
            # the first one commits.
            services = build_services(Settings(database_url=database_url, secret=a.secret))
            taken, release = asyncio.Event(), asyncio.Event()

            async def held_open() -> None:
                principal = await services.uow.authenticate(token)
                assert principal is not None
                message = prepare_message(
                    {"role": "user", "content": "held"}, field=[], max_bytes=1 << 20
                )
                async with services.db.write() as conn:
                    sql = Sql(conn, services.db)
                    repo = services.uow.repository(sql, principal)
                    await repo.transcripts.append(child, [message], expected_version=None)
                    await event_log.record(sql, repo.events, broker=services.broker)
                    taken.set()
                    await release.wait()

            try:
                holder = asyncio.create_task(held_open())
                await asyncio.wait_for(taken.wait(), RECEIVE_TIMEOUT)
                later = asyncio.create_task(append(through_a, root, "committed first"))
                await asyncio.sleep(1.0)
                # The later write waits for the tree; nothing passes the open transaction.
                assert not later.done()
                await nothing_more(resumed)
                release.set()
                await holder
                await later
            finally:
                release.set()
                await services.stop()
            first, second = await events(resumed, 2)
            assert first["messages"][0]["data"]["content"] == "held"
            assert second["messages"][0]["data"]["content"] == "committed first"
            await nothing_more(resumed)

        # Resuming on B from before both replays them in the same order.
        async with stream(b, through_b, root, cursor) as again:
            assert await events(again, 2) == [first, second]
            await nothing_more(again)


RESUME = """mutation($id: ID!) { resumeDelegation(input: {delegationId: $id, task: "again"}) {
  delegation { id } userErrors { code } } }"""
EXPIRE = """mutation($id: ID!, $at: DateTime) {
  updateConversation(input: {id: $id, expiresAt: $at}) { userErrors { code } } }"""


def position(event: dict[str, Any]) -> int:
    """The place in its tree's log of the event a stream sent (its cursor's)."""
    return cursors.event(event["cursor"], "after")[1]


async def test_a_burst_larger_than_the_queue_reaches_a_subscriber_that_keeps_reading(
    live_servers: LiveServers, database_url: str
) -> None:
    """Regression: one write that published more events to a stream than its queue holds (a
    root's expiry, which moves every child transcript's: one event each) cut the stream off
    with LIMIT_EXCEEDED, though it read promptly. It reads what did not fit from the log:
    every event once, in order, and then the live ones."""
    server = await live_servers.start(database_url, env={"CONVOGRAPH_SUBSCRIBER_QUEUE_SIZE": "4"})
    async with server.client(await server.token()) as alice:
        root = await create(alice)
        children = [
            (await delegate(alice, root, f"task {i}"))["childConversation"]["id"] for i in range(10)
        ]
        async with contextlib.AsyncExitStack() as stack:
            socket, cursor = await live_stream(stack, server, alice, root)
            at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
            assert (await alice(EXPIRE, {"id": root, "at": at}))["updateConversation"] == {
                "userErrors": []
            }
            burst = await events(socket, 1 + len(children))
            later = await touch(alice, root)
            last = await socket.event()
            await nothing_more(socket)
    assert {e["kind"] for e in burst} == {"CONVERSATION_UPDATED"}
    # The root first, then each child transcript once; one transaction's events, in order.
    assert burst[0]["conversationId"] == root
    assert sorted(e["conversationId"] for e in burst[1:]) == sorted(children)
    first = position(burst[0])
    assert first > cursors.event(cursor, "after")[1]
    assert [position(e) for e in burst] == list(range(first, first + len(burst)))
    # Still subscribed: a later write reaches it live.
    assert (last["conversationId"], last["version"]) == (root, later)
    assert position(last) == first + len(burst)


async def test_a_subscriber_whose_queue_overflows_reads_the_rest_from_the_log(
    live_servers: LiveServers, database_url: str
) -> None:
    # A queue of one event: a transaction with two (a delegation resumed: the delegation,
    # then its seeded child transcript) overflows it before the stream can read the first.
    # It was cut off (LIMIT_EXCEEDED, with a cursor to resume from); it reads them from the
    # log instead, and goes on live.
    server = await live_servers.start(database_url, env={"CONVOGRAPH_SUBSCRIBER_QUEUE_SIZE": "1"})
    async with server.client(await server.token()) as alice:
        cid = await create(alice)
        delegation = await delegate(alice, cid)
        await alice(COMPLETE, {"id": delegation["id"], "summary": "done"})
        async with contextlib.AsyncExitStack() as stack:
            socket, _ = await live_stream(stack, server, alice, cid)
            resumed = (await alice(RESUME, {"id": delegation["id"]}))["resumeDelegation"]
            assert resumed["userErrors"] == []
            created, seeded = await events(socket, 2)
            later = await touch(alice, cid)
            assert (await socket.event())["version"] == later
            await nothing_more(socket)
    # The delegation first: its child is announced before the messages in it.
    assert created["kind"] == "DELEGATION_CREATED"
    assert created["delegation"]["id"] == resumed["delegation"]["id"]
    assert seeded["kind"] == "MESSAGES_APPENDED" and seeded["messages"][-1]["data"]["content"]
    assert position(seeded) == position(created) + 1


async def test_a_subscriber_whose_queue_overflows_before_its_first_event_misses_nothing(
    settings: Settings,
) -> None:
    """Subscribed without `after`, its queue overflowed before anything was sent: it was cut
    off (with a null cursor, once); it sends what it queued from the log."""

    async with serving(settings.replace(subscriber_queue_size=1)) as (server, http):
        token = await server.token()
        app = server.app
        alice = GraphQLClient(http, token)
        cid = await create(alice)
        delegation = await delegate(alice, cid)
        await alice(COMPLETE, {"id": delegation["id"], "summary": "done"})
        async with connect_app(app, token=token) as socket:
            await socket.init()
            await socket.subscribe(SUBSCRIBE, {"id": cid, "after": None})
            for _ in range(1000):  # until it listens: then every event is queued
                if server.services.broker.active:
                    break
                await asyncio.sleep(0.01)
            # Two events in one transaction overflow a queue of one before any is sent.
            resumed = (await alice(RESUME, {"id": delegation["id"]}))["resumeDelegation"]
            created, seeded = [await socket.event() for _ in range(2)]
            later = await touch(alice, cid)
            assert (await socket.event())["version"] == later
    assert created["delegation"]["id"] == resumed["delegation"]["id"]
    assert seeded["kind"] == "MESSAGES_APPENDED"


async def test_a_stream_whose_dropped_events_were_pruned_before_it_read_them_ends_expired(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream that falls further behind than the log retains (its queue dropped, the
    first event it dropped pruned before its catch-up read it) ends with CURSOR_EXPIRED: a
    catch-up skips what was pruned, and that one was the stream's to send."""
    from graph.store.repository.replay import Replay, Tree

    async with serving(settings.replace(subscriber_queue_size=1)) as (server, http):
        token = await server.token()
        alice = GraphQLClient(http, token)
        cid = await create(alice)
        delegation = await delegate(alice, cid)
        await alice(COMPLETE, {"id": delegation["id"], "summary": "done"})
        original = Replay.page
        pruned: list[int] = []

        async def page(
            self: Replay, tree: Tree, after: int, *, limit: int, whole: bool = True
        ) -> list[Event]:
            if not whole and not pruned:  # the catch-up: the sweep got there first
                pruned.append(after + 1)
                now = await aged(server, L.c.root_id == tree.root_id, L.c.position <= after + 1)
                await sweep(server.services.uow, now=now)
            return await original(self, tree, after, limit=limit, whole=whole)

        async with connect_app(server.app, token=token) as socket:
            await socket.init()
            await socket.subscribe(SUBSCRIBE, {"id": cid, "after": None})
            await socket.wait_until_live(
                lambda: touch(alice, cid),
                lambda version, event: (
                    (event["conversationId"], event["version"]) == (cid, version)
                ),
            )
            monkeypatch.setattr(Replay, "page", page)
            # Two events in one transaction overflow a queue of one.
            assert (await alice(RESUME, {"id": delegation["id"]}))["resumeDelegation"][
                "userErrors"
            ] == []
            message = await socket.receive()
    errors = graphql_errors(message)
    assert errors and errors[0]["extensions"]["code"] == "CURSOR_EXPIRED", message
    assert pruned and await logged(server, cid) and min(await logged(server, cid)) > pruned[0]


async def test_other_tenants_deletes_while_a_stream_starts_neither_cut_it_off_nor_reach_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until a stream has read its conversation it takes every delete (one may be an
    ancestor's): deletes of other tenants' conversations filled its queue, and the
    LIMIT_EXCEEDED error's cursor named the first of them, an id and an event count that
    were not its to see. Now they are dropped once it knows its ancestry."""
    from graph.store.repository.conversations import Conversations
    from graph.store.tables import Conversation

    async with serving(settings.replace(subscriber_queue_size=2)) as (server, http):
        token = await server.token()
        other = await server.token("site:2", "user:mallory")
        app = server.app
        alice, theirs = GraphQLClient(http, token), GraphQLClient(http, other)
        root = await create(alice)
        child = (await delegate(alice, root))["childConversation"]["id"]
        doomed = [await create(theirs) for _ in range(3)]
        if not settings.is_sqlite:
            await asyncio.sleep(1.0)  # the notifications of these writes come and go
        original = Conversations.get

        async def get(self: Conversations, conversation_id: str) -> Conversation | None:
            found = await original(self, conversation_id)
            if conversation_id == child and doomed:  # listening, its ancestry not known
                while doomed:
                    cid = doomed.pop()
                    assert (await theirs(DELETE, {"id": cid}))["deleteConversation"]
                if not settings.is_sqlite:
                    await asyncio.sleep(1.0)  # their NOTIFYs come back through LISTEN
                read.set()
            return found

        read = asyncio.Event()
        monkeypatch.setattr(Conversations, "get", get)
        async with connect_app(app, token=token) as socket:
            await socket.init()
            await socket.subscribe(SUBSCRIBE, {"id": child, "after": None})
            await asyncio.wait_for(read.wait(), 10)
            # Its own events, and nothing of the others' (a cut-off is an error here).
            await socket.wait_until_live(
                lambda: touch(alice, child),
                lambda version, event: (
                    (event["conversationId"], event["version"]) == (child, version)
                ),
            )


async def test_a_stream_whose_queue_overflows_before_its_start_sends_what_it_queued(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes committed between the subscribe and the read of the log's head are queued
    (their positions at or before that head) and are the stream's first events: dropped for
    want of room before it read the head, they are read from the log, from before the first
    of them, not from after the head."""
    from graph.store.repository.conversations import Conversations
    from graph.store.tables import Conversation

    async with serving(settings.replace(subscriber_queue_size=1)) as (server, http):
        token = await server.token()
        app = server.app
        alice = GraphQLClient(http, token)
        cid = await create(alice)
        original = Conversations.get
        written: list[int] = []

        async def get(self: Conversations, conversation_id: str) -> Conversation | None:
            found = await original(self, conversation_id)
            if conversation_id == cid and not written:  # listening, not yet read
                written.extend([await touch(alice, cid), await touch(alice, cid)])
                if not settings.is_sqlite:
                    await asyncio.sleep(1.0)  # their NOTIFYs come back through LISTEN
            return found

        monkeypatch.setattr(Conversations, "get", get)
        async with connect_app(app, token=token) as socket:
            await socket.init()
            await socket.subscribe(SUBSCRIBE, {"id": cid, "after": None})
            got = [(await socket.event())["version"] for _ in range(2)]
            got.append(await touch(alice, cid))
            assert (await socket.event())["version"] == got[-1]
            with pytest.raises(TimeoutError):
                await socket.receive(within=SYNC_TIMEOUT)
    assert got[:2] == written


async def test_a_stream_that_dropped_deletes_it_could_not_place_yet_sees_its_ancestor_s(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until a stream has read its conversation it queues every delete of the process (one
    may be an ancestor's), ten times its queue at most. Dropped past that, an ancestor's
    delete committed before the stream read the log's head lies before where it reads the
    log from, and the tree's log goes on after it (here, a write to the root): it checks that
    its conversation is still there, and says NOT_FOUND."""
    from graph.store.repository.conversations import Conversations
    from graph.store.repository.replay import Replay
    from graph.store.tables import Conversation

    async with serving(settings.replace(subscriber_queue_size=1)) as (server, http):
        token = await server.token()
        app = server.app
        alice = GraphQLClient(http, token)
        root = await create(alice)
        middle = (await delegate(alice, root))["childConversation"]["id"]
        child = (await delegate(alice, middle))["childConversation"]["id"]
        others = [await create(alice) for _ in range(10)]  # fill ten times a queue of one
        if not settings.is_sqlite:
            await asyncio.sleep(1.0)  # the notifications of these writes come and go
        original = Conversations.get
        deleted: list[str] = []

        async def get(self: Conversations, conversation_id: str) -> Conversation | None:
            found = await original(self, conversation_id)
            if conversation_id == child and not deleted:  # listening, its ancestry not known
                for cid in [*others, middle]:
                    assert (await alice(DELETE, {"id": cid}))["deleteConversation"]["deleted"]
                    deleted.append(cid)
                if not settings.is_sqlite:
                    await asyncio.sleep(1.0)  # their NOTIFYs come back through LISTEN
            return found

        original_position = Replay.position
        touched: list[int] = []

        async def position(self: Replay, conversation: Conversation) -> int:
            head = await original_position(self, conversation)
            if conversation.id == child and not touched:  # the log goes on past the head
                touched.append(await touch(alice, root))
            return head

        monkeypatch.setattr(Conversations, "get", get)
        monkeypatch.setattr(Replay, "position", position)
        async with connect_app(app, token=token) as socket:
            await socket.init()
            await socket.subscribe(SUBSCRIBE, {"id": child, "after": None})
            message = await socket.receive()
    errors = graphql_errors(message)
    assert errors and errors[0]["extensions"]["code"] == "NOT_FOUND", message


# -- the log itself --------------------------------------------------------------------


async def logged(server: Server, root: str) -> list[int]:
    async with server.services.uow.write(SYSTEM) as repo:
        found = await repo.sql.rows(
            select(L.c.position).where(L.c.root_id == root).order_by(L.c.position)
        )
    return [p for (p,) in found.values]


async def aged(server: Server, *where: ColumnElement[bool]) -> datetime:
    """Make the logged events `where` selects older than the retention; the `now` that sees
    them so (a sweep's)."""
    now = datetime.now(UTC)
    keep = timedelta(seconds=server.settings.event_retention_seconds)
    async with server.services.uow.write(SYSTEM) as repo:
        await repo.sql.execute(update(L).where(*where).values(at=now - 2 * keep))
    return now


async def test_the_sweep_prunes_a_prefix_of_each_tree_and_a_delete_takes_the_whole_log(
    server: Server, gql: GraphQLClient
) -> None:
    root = await create(gql)
    child = (await delegate(gql, root))["childConversation"]["id"]
    for text in ("one", "two", "three"):
        await append(gql, child, text)
    assert await logged(server, root) == [1, 2, 3, 4, 5]
    # Replicas' clocks differ: position 3 looks old, the ones around it do not.
    now = await aged(server, L.c.root_id == root, L.c.position == 3)
    await sweep(server.services.uow, now=now)
    assert await logged(server, root) == [4, 5]  # never a log with a hole
    assert (await gql(DELETE, {"id": child}))["deleteConversation"]["deleted"]
    # A child's delete is in its tree's log, and so is its parent's update.
    assert await logged(server, root) == [4, 5, 6, 7]
    assert (await gql(DELETE, {"id": root}))["deleteConversation"]["deleted"]
    assert await logged(server, root) == []


async def test_the_sweep_prunes_an_old_prefix_longer_than_one_batch_across_trees(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = await create(gql), await create(gql)
    a, b = len(await logged(server, first)), len(await logged(server, second))
    for root in (first, second, first, second, first):
        await append(gql, root, "old")
    old = {first: a + 3, second: b + 2}  # what committed so far: every tree's oldest
    for root in (first, second):
        await append(gql, root, "new")
    oldest = (and_(L.c.root_id == root, L.c.position <= upto) for root, upto in old.items())
    now = await aged(server, or_(*oldest))
    # Two rows per statement (and transaction): the old prefix spans several.
    monkeypatch.setattr(event_log, "PRUNE_BATCH", 2)
    await sweep(server.services.uow, now=now)
    assert await logged(server, first) == [a + 4]
    assert await logged(server, second) == [b + 3]


async def test_a_replayed_delegation_whose_child_is_gone_says_not_found(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    async with contextlib.AsyncExitStack() as lost:
        _, cursor = await live_stream(lost, live_server, alice, root)
    made = await delegate(alice, root)
    child = made["childConversation"]["id"]
    await alice(COMPLETE, {"id": made["id"]})
    await alice(DELETE, {"id": child})
    query = """subscription($id: ID!, $after: String) {
      conversationEvents(conversationId: $id, after: $after) {
        kind delegation { id childConversation { id } parentConversation { id } } } }"""
    assert alice.token is not None
    async with session(live_server, alice.token, ping_interval=None, max_queue=None) as socket:
        await socket.subscribe(query, {"id": root, "after": cursor})
        for kind in ("DELEGATION_CREATED", "DELEGATION_COMPLETED"):
            message = await socket.receive()
            assert message["type"] == "next", message
            event = message["payload"]["data"]["conversationEvents"]
            assert event == {"kind": kind, "delegation": None}, message
            (error,) = message["payload"]["errors"]
            assert error["extensions"]["code"] == "NOT_FOUND", error
            assert error["path"][-1] == "childConversation", error


async def test_a_cached_transcript_follows_appends_and_replaces_from_the_events_alone(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """A replace's event carries only what it wrote past the prefix it kept (nothing when it
    cut the transcript or changed nothing): with `messageCount` a client applies it to its
    cached transcript without a read, live and replayed alike."""
    root = await create(alice)
    saves = [("a", "b"), ("a", "b"), ("a", "X"), (), ("q",), ("q", "r", "s")]
    transcripts = [("a", "b"), ("a", "b", "c", "d"), *saves]

    async def followed(socket: Session) -> list[dict[str, Any]]:
        """The stream's next events, each applied to a cache checked against the transcript
        the write left."""
        cache: list[str] = []
        seen = []
        for expected in transcripts:
            event = await socket.event()
            count, written = event["messageCount"], event["messages"]
            first = count - len(written) + 1
            assert [m["seq"] for m in written] == list(range(first, count + 1)), event
            cache = cache[: first - 1] + [m["data"]["content"] for m in written]
            assert tuple(cache) == expected, (event, cache)
            seen.append(event)
        return seen

    async with contextlib.AsyncExitStack() as stack:
        witness, cursor = await live_stream(stack, live_server, alice, root)
        await append(alice, root, "a", "b")
        await append(alice, root, "c", "d")
        for contents in saves:
            messages = [{"role": "user", "content": c} for c in contents]
            saved = await alice(REPLACE, {"id": root, "m": messages})
            assert saved["replaceTranscript"]["userErrors"] == [], saved
        live = await followed(witness)
        resumed = await stack.enter_async_context(stream(live_server, alice, root, cursor))
        assert await followed(resumed) == live
    kinds = [e["kind"] for e in live]
    assert kinds == ["MESSAGES_APPENDED"] * 2 + ["TRANSCRIPT_REPLACED"] * len(saves)
    # What each replace wrote: nothing for a cut (4 → 2), an identical save and an empty one.
    assert [len(e["messages"]) for e in live[2:]] == [0, 0, 1, 0, 1, 2]
    read_back = await alice(READ, {"id": root})
    assert [m["content"] for m in read_back["conversation"]["transcript"]] == ["q", "r", "s"]


async def test_a_delete_s_event_is_one_version_past_what_a_read_saw(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """A delete's event carried the deleted row's last version: a client that merges what
    it read with the stream by version (README) took the delete for an event its read held,
    and dropped it. Live and replayed from the log alike."""
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    async with contextlib.AsyncExitStack() as stack:
        socket, _ = await live_stream(stack, live_server, alice, root)
        await append(alice, child, "written")
        appended = await socket.event()
        seen = (await alice(READ_VERSION, {"id": child}))["conversation"]
        assert seen["version"] == appended["version"]
        await alice(DELETE, {"id": child})
        live = await socket.event()
    async with stream(live_server, alice, root, appended["cursor"]) as replay:
        replayed = await replay.event()
    for event in (live, replayed):
        assert (event["kind"], event["conversationId"]) == ("CONVERSATION_DELETED", child)
        assert event["version"] == seen["version"] + 1
