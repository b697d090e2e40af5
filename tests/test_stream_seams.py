"""The seams of a resumable event stream (api/subscriptions.py), each window held open on
purpose: a repository or listener method patched to commit writes, or to let the broker
miss one, exactly where the stream is between two steps. The promise: every wanted event
exactly once, in log order, across catch-ups, overflow and deletes.

A write "the broker misses" is one `Listener.hear` never gets, as one committed while
PostgreSQL's LISTEN connection was down, or by another process on the SQLite file: the
broker says so later (`lost_track`), and the stream reads it from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pytest
from sqlalchemy import text

from graph.store.events import Event, Listener
from graph.store.repository.replay import Replay, Tree
from graph.store.tables import Conversation
from tests.conftest import GraphQLClient, Server
from tests.operations import CONVERSATION_EVENTS, DELETE, create, delegate, touch
from tests.ws import Session, connect_app, until_live


async def _head(server: Server, root: str) -> int:
    """The last position of the tree of `root`."""
    async with server.services.db.read() as conn:
        found = await conn.execute(
            text("SELECT event_position FROM conversation WHERE id = :r"), {"r": root}
        )
        return int(found.scalar_one())


def _missing(monkeypatch: pytest.MonkeyPatch, missed: Callable[[Event], bool]) -> asyncio.Event:
    """Listeners never hear the events `missed` accepts; the result is set once a listener
    has queued one of the others."""
    original = Listener.hear
    queued = asyncio.Event()

    def hear(self: Listener, event: Event, root_id: str) -> None:
        if missed(event):
            return
        original(self, event, root_id)
        if self.queued_positions():
            queued.set()

    monkeypatch.setattr(Listener, "hear", hear)
    return queued


async def _nothing_more(socket: Session) -> None:
    with pytest.raises(TimeoutError):
        message = await socket.receive(within=1)
        pytest.fail(f"more came: {message}")


async def test_a_write_missed_after_the_first_queued_event_comes_from_the_catch_up(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream without `after`: one write commits after it listens and is queued, a second
    one the broker misses, and then the stream reads the head (the second). It sends the
    first; only then does the broker find it lost track. The stream counted every event up
    to the head as heard, so its catch-up started at the head, past the missed one, which
    never came."""
    root = await create(gql)
    missed: set[int] = set()
    queued = _missing(monkeypatch, lambda e: e.root_id == root and e.position in missed)
    original = Replay.position
    written: list[int] = []

    async def position(self: Replay, conversation: Conversation) -> int:
        if not written:
            written.append(await touch(gql, root))  # queued: the stream's first event
            await asyncio.wait_for(queued.wait(), 5)  # (PostgreSQL: through LISTEN)
            missed.add(await _head(server, root) + 1)
            written.append(await touch(gql, root))  # the broker misses it
        return await original(self, conversation)

    monkeypatch.setattr(Replay, "position", position)
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(CONVERSATION_EVENTS, {"id": root})
        got = [(await socket.event(within=5))["version"]]
        server.services.broker.lost_track()  # the broker finds out
        with contextlib.suppress(TimeoutError):
            while True:
                got.append((await socket.event(within=2))["version"])
    assert got == written


async def test_a_child_deleted_between_a_catch_up_s_read_and_its_check_is_a_delete_event(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child's stream catches up and reads nothing new; then the child is deleted (the
    broker misses it: another process's sweep, say), before the catch-up asks whether the
    child still exists. Its delete is in the tree's log (the root lives), yet the stream
    ended with NOT_FOUND instead of sending it."""
    root = await create(gql)
    child = (await delegate(gql, root))["childConversation"]["id"]
    broker = server.services.broker
    _missing(monkeypatch, lambda e: e.conversation_id == child and e.kind.name.endswith("DELETED"))
    original = Replay.page
    deleted: list[bool] = []

    async def page(
        self: Replay, tree: Tree, after: int, *, limit: int, whole: bool = True
    ) -> list[Event]:
        found = await original(self, tree, after, limit=limit, whole=whole)
        if not whole and not deleted:  # a catch-up's read
            deleted.append(True)
            assert (await gql(DELETE, {"id": child}))["deleteConversation"]["deleted"]
            broker.lost_track()
        return found

    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(CONVERSATION_EVENTS, {"id": child})
        await until_live(socket, gql, child)
        monkeypatch.setattr(Replay, "page", page)
        broker.lost_track()
        message = await socket.receive(within=5)
        assert message["type"] == "next" and "errors" not in message["payload"], message
        event = message["payload"]["data"]["conversationEvents"]
        assert (event["kind"], event["conversationId"]) == ("CONVERSATION_DELETED", child)
        assert (await socket.receive(within=5))["type"] == "complete"
    assert deleted
