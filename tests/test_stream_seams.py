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
from typing import Any

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


async def test_an_event_at_or_before_the_head_heard_only_after_the_read_opens_no_gap(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream without `after` starts at the head it reads, or before the first event it
    has queued by then. A write before the head whose event is heard only after that read
    (PostgreSQL's notification on its way; on SQLite, a COMMIT the reader sees before the
    writer publishes) came through as the stream's first event, and the next one, which
    the broker missed, did not: its catch-up started at the head. The stream must send a
    run of the log with no hole in it."""
    root = await create(gql)
    late: set[int] = set()
    missed: set[int] = set()
    held: list[tuple[Listener, Event, str]] = []
    both = asyncio.Event()
    hear = Listener.hear

    def hearing(self: Listener, event: Event, root_id: str) -> None:
        if event.root_id == root and event.position in late:
            held.append((self, event, root_id))  # heard, but only once the stream listens
        elif event.root_id == root and event.position in missed:
            both.set()  # never heard
        else:
            hear(self, event, root_id)

    original = Replay.position
    written: list[int] = []

    async def position(self: Replay, conversation: Conversation) -> int:
        if not written:
            head = await _head(server, root)
            late.add(head + 1)
            written.append(await touch(gql, root))
            missed.add(head + 2)
            written.append(await touch(gql, root))
            await asyncio.wait_for(both.wait(), 5)  # (PostgreSQL: through LISTEN)
        return await original(self, conversation)

    page = Replay.page

    async def paging(
        self: Replay, tree: Tree, after: int, *, limit: int, whole: bool = True
    ) -> list[Event]:
        found = await page(self, tree, after, limit=limit, whole=whole)
        if not whole and len(written) == 2:  # the catch-up: a write after its read
            written.append(await touch(gql, root))
        return found

    monkeypatch.setattr(Listener, "hear", hearing)
    # Once the stream took its first event, the broker tells it it lost track.
    _heard_once_listening(monkeypatch, held, hear, after_first=server.services.broker.lost_track)
    monkeypatch.setattr(Replay, "position", position)
    monkeypatch.setattr(Replay, "page", paging)
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(CONVERSATION_EVENTS, {"id": root})
        got: list[int] = []
        with contextlib.suppress(TimeoutError):
            while True:
                got.append((await socket.event(within=2))["version"])
    assert len(written) == 3 and got, (written, got)
    assert got == written[len(written) - len(got) :], (written, got)


async def test_a_delete_before_the_head_heard_only_after_the_read_still_ends_the_stream(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, a stream without `after` passes over what it hears after its read of the
    head from before it; but not the delete of its conversation, committed between the read
    of the conversation and that of the head: the stream sends it and ends, not silently."""
    root = await create(gql)
    child = (await delegate(gql, root))["childConversation"]["id"]
    held: list[tuple[Listener, Event, str]] = []
    heard = asyncio.Event()
    hear = Listener.hear

    def hearing(self: Listener, event: Event, root_id: str) -> None:
        if event.conversation_id == child:
            held.append((self, event, root_id))  # heard, but only once the stream listens
            heard.set()
        else:
            hear(self, event, root_id)

    original = Replay.position

    async def position(self: Replay, conversation: Conversation) -> int:
        if not heard.is_set():
            assert (await gql(DELETE, {"id": child}))["deleteConversation"]["deleted"]
            await asyncio.wait_for(heard.wait(), 5)  # (PostgreSQL: through LISTEN)
        return await original(self, conversation)

    monkeypatch.setattr(Listener, "hear", hearing)
    _heard_once_listening(monkeypatch, held, hear)
    monkeypatch.setattr(Replay, "position", position)
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        await socket.subscribe(CONVERSATION_EVENTS, {"id": child})
        message = await socket.receive(within=5)
        assert message["type"] == "next", message
        event = message["payload"]["data"]["conversationEvents"]
        assert (event["kind"], event["conversationId"]) == ("CONVERSATION_DELETED", child)
        assert (await socket.receive(within=5))["type"] == "complete"


def _heard_once_listening(
    monkeypatch: pytest.MonkeyPatch,
    held: list[tuple[Listener, Event, str]],
    hear: Callable[[Listener, Event, str], None],
    *,
    after_first: Callable[[], None] | None = None,
) -> None:
    """The events in `held` are heard (through `hear`, the listener's own) only once the
    stream listens, after it read the head; `after_first` runs once the stream has taken
    its first item."""
    events = Listener.events
    done: list[bool] = []

    async def listening(self: Listener, *, idle_seconds: float | None = None) -> Any:
        while held:
            hear(*held.pop(0))
        async for item in events(self, idle_seconds=idle_seconds):
            yield item
            if after_first is not None and not done:
                done.append(True)
                after_first()

    monkeypatch.setattr(Listener, "events", listening)
