"""Queries sent over graphql-transport-ws read one committed state, as over HTTP.

A query's top-level fields and loader batches each read apart would let a write commit
between two of them, and the answer would hold two states (a conversation's count from
before an append, the list's from after). Over a WebSocket as over HTTP, a query reads in one
read transaction: its answer is one state, and `eventCursor` is given wherever it is over
HTTP. A socket's operations run side by side: each has its own transaction and loaders.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import pytest

from graph.store.repository.conversations import Conversations
from tests.conftest import GraphQLClient, Server
from tests.operations import WATCH, append, create, delegate
from tests.test_kept_connections import checked_out
from tests.ws import Session, connect_app, until_live

# Two top-level fields, each its own statement (the loader's `conversation` and the list), and
# a third statement once the conversation is read (its transcript).
TWO_FIELDS = """query($id: ID!) {
  conversation(id: $id) { messageCount transcript }
  conversations(first: 50) { nodes { id messageCount } }
}"""

CURSORS = """query($r: ID!, $c: ID!, $d: ID!) {
  r: conversation(id: $r) { eventCursor }
  c: conversation(id: $c) {
    eventCursor transcript delegations { nodes { id } }
    parentDelegation { parentConversation { eventCursor } }
  }
  d: delegation(id: $d) {
    parentConversation { eventCursor } childConversation { eventCursor }
  }
  conversations(first: 50) { nodes { id eventCursor } }
}"""


def counts(data: dict[str, Any], cid: str) -> tuple[int, int, int]:
    """The conversation's messageCount as the field read it, its transcript's length, and
    its messageCount as the list read it."""
    (listed,) = [n for n in data["conversations"]["nodes"] if n["id"] == cid]
    read = data["conversation"]
    return read["messageCount"], len(read["transcript"]), listed["messageCount"]


async def answer(socket: Session, op: str) -> dict[str, Any]:
    """The data of query `op`, then its `complete`."""
    data = await socket.next(op)
    assert await socket.receive() == {"id": op, "type": "complete"}
    return data


def append_in_the_first_read(
    monkeypatch: pytest.MonkeyPatch, gql: GraphQLClient, cid: str
) -> tuple[asyncio.Event, asyncio.Event]:
    """The first of the conversation's reads to start (the loader's or the list's) commits an
    append to it once it has read, and any other that starts meanwhile waits for that commit:
    a read apart from the first then sees the append, one in the same transaction cannot.
    `fired` is set once the append has committed; the first read returns (and its query reads
    on) once `resume` is set (already, unless cleared)."""
    fired, resume = asyncio.Event(), asyncio.Event()
    resume.set()
    appending: ContextVar[bool] = ContextVar("appending", default=False)
    started = False

    def patched(read: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def first_appends(self: Conversations, *args: Any, **kwargs: Any) -> Any:
            nonlocal started
            if appending.get():  # the append's own reads
                return await read(self, *args, **kwargs)
            if started:
                await fired.wait()
                return await read(self, *args, **kwargs)
            started = True
            found = await read(self, *args, **kwargs)
            writing = appending.set(True)
            try:
                await append(gql, cid, "committed between two reads of one query")
            finally:
                appending.reset(writing)
            fired.set()
            await resume.wait()
            return found

        return first_appends

    monkeypatch.setattr(Conversations, "get_many", patched(Conversations.get_many))
    monkeypatch.setattr(Conversations, "find", patched(Conversations.find))
    return fired, resume


async def test_a_query_over_a_websocket_reads_one_committed_state(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = await create(gql)
    await append(gql, cid, "before the query")
    fired, _ = append_in_the_first_read(monkeypatch, gql, cid)
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(TWO_FIELDS, {"id": cid})
        data = await answer(socket, "1")
    assert fired.is_set()
    # One state: both before the append (1 message) or both after it (2), never one of each.
    field, transcript, listed = counts(data, cid)
    assert field == transcript == listed, f"a torn answer: {field}, {transcript}, {listed}"
    # The append did commit; the next query sees it.
    after = await gql(TWO_FIELDS, {"id": cid})
    assert counts(after, cid) == (2, 2, 2)


async def test_a_socket_s_queries_running_side_by_side_each_read_one_state(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second query of the same socket starts and ends while the first is between two
    reads: it may neither take over the first one's transaction nor end it (the first one's
    later reads, its transcript's, would be read apart)."""
    cid = await create(gql)
    await append(gql, cid, "before the queries")
    fired, resume = append_in_the_first_read(monkeypatch, gql, cid)
    resume.clear()
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(TWO_FIELDS, {"id": cid}, op="1")
        await asyncio.wait_for(fired.wait(), 10)
        # Query 1 has read once, and the append has committed since: query 2 sees it.
        await socket.subscribe(TWO_FIELDS, {"id": cid}, op="2")
        second = await answer(socket, "2")
        resume.set()
        first = await answer(socket, "1")
    assert counts(second, cid) == (2, 2, 2)
    field, transcript, listed = counts(first, cid)
    assert field == transcript == listed, f"a torn answer: {field}, {transcript}, {listed}"


async def test_event_cursors_over_a_websocket_are_those_of_the_same_query_over_http(
    server: Server, gql: GraphQLClient
) -> None:
    """A child transcript's cursor (its root's, read with it) and a conversation reached
    from a delegation are given in a query over a WebSocket as over HTTP: one state."""
    root = await create(gql)
    delegation = await delegate(gql, root)
    child = delegation["childConversation"]["id"]
    await append(gql, child, "in the child")
    variables = {"r": root, "c": child, "d": delegation["id"]}
    over_http = await gql(CURSORS, variables)
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(CURSORS, variables)
        over_ws = await answer(socket, "1")
    assert over_ws == over_http
    cursor = over_ws["r"]["eventCursor"]
    assert cursor is not None
    # A child's cursor is its tree's, as are those of conversations reached from delegations.
    assert over_ws["c"]["eventCursor"] == cursor
    assert over_ws["c"]["parentDelegation"]["parentConversation"]["eventCursor"] == cursor
    assert over_ws["d"]["parentConversation"]["eventCursor"] == cursor
    assert over_ws["d"]["childConversation"]["eventCursor"] == cursor
    listed = {n["id"]: n["eventCursor"] for n in over_ws["conversations"]["nodes"]}
    assert listed[root] == listed[child] == cursor


async def test_a_socket_holds_no_connection_after_its_query_nor_for_its_subscription(
    server: Server, gql: GraphQLClient
) -> None:
    """A query's transaction ends (its connection given back clean) with the query, while
    the socket and its subscription stay open: an open socket costs no connection."""
    cid = await create(gql)
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(WATCH, {"id": cid}, op="1")
        await until_live(socket, gql, cid, op="1")
        await socket.subscribe(TWO_FIELDS, {"id": cid}, op="2")
        assert counts(await answer(socket, "2"), cid) == (0, 0, 0)
        _, in_use = checked_out(server.services)
        assert in_use == 0
