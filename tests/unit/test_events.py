"""An event numbered in its tree's log is the same event at that position; a listener's
queue gives its events in order, says when it has been idle, drops what does not fit for
the log, and ends as it must."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from graph.domain.events import EventKind
from graph.store.events import LOST, Event, Listener, Lost


def an_event(version: int = 4, kind: EventKind = EventKind.MESSAGES_APPENDED) -> Event:
    return Event(
        kind=kind,
        conversation_id="c",
        ancestry=("r", "p"),
        workspace_type="site",
        workspace_id="1",
        version=version,
        at=datetime(2026, 12, 1, tzinfo=UTC),
        messages=(),
        delegation=None,
        position=0,
        head=9,
        count_without_messages=3,
    )


def test_numbered_keeps_every_field_but_the_position() -> None:
    event = an_event()
    # A field added to Event and forgotten in `numbered` fails here.
    assert event.numbered(7) == dataclasses.replace(event, position=7)
    fields = [f.name for f in dataclasses.fields(Event)]
    assert fields[-3:] == ["position", "head", "count_without_messages"]


async def version_of(stream: AsyncIterator[Event | Lost | None]) -> int:
    """The version of the stream's next event (which must not be an idle mark)."""
    event = await anext(stream)
    assert isinstance(event, Event)
    return event.version


async def test_a_listener_gives_what_was_offered_in_order_and_what_comes_later() -> None:
    listener = Listener("c", include_descendants=False)
    listener.offer(an_event(1))
    listener.offer(an_event(2))
    stream = listener.events()
    assert [await version_of(stream) for _ in range(2)] == [1, 2]
    later = asyncio.create_task(version_of(stream))
    await asyncio.sleep(0)
    assert not later.done()
    listener.offer(an_event(3))
    assert await later == 3


async def test_an_idle_listener_says_so_and_still_gets_what_comes_after() -> None:
    listener = Listener("c", include_descendants=False)
    stream = listener.events(idle_seconds=0.01)
    assert await anext(stream) is None
    listener.offer(an_event(5))
    assert await version_of(stream) == 5


async def test_a_listener_ends_when_the_broker_stops_or_its_conversation_goes() -> None:
    stopped = Listener("c", include_descendants=False)
    stopped.offer(None)
    assert [e async for e in stopped.events()] == []
    deleted = Listener("c", include_descendants=False)
    deleted.offer(an_event(6, EventKind.CONVERSATION_DELETED))
    deleted.offer(an_event(7))
    assert [e.version async for e in deleted.events() if isinstance(e, Event)] == [6]


def at(position: int) -> Event:
    """An event of the listener's own conversation ("c", below "r" and "p") at `position`."""
    return dataclasses.replace(an_event(position), position=position)


async def test_a_listener_whose_queue_overflows_drops_it_and_says_lost() -> None:
    """One write may publish more than a queue holds: the listener drops what it queued,
    queues nothing more until its reader is told (LOST, which sends it to the log from
    what it handled), then queues again."""
    listener = Listener("c", include_descendants=False, queue_size=2)
    listener.learn_ancestry(("r", "p"))
    for position in (3, 4, 5, 6):
        listener.hear(at(position), "r")
    assert listener.behind
    assert listener.queued_positions() == (3,)  # nothing queued: the first owed, dropped
    stream = listener.events()
    assert await anext(stream) is LOST
    assert listener.missing == 3  # the catch-up must find it in the log
    # Not past what was heard: what was dropped was heard, never handled.
    assert listener.heard == 6 and listener.catch_up_from(2) == 2
    listener.hear(at(7), "r")  # the catch-up reads the log: what comes meanwhile is queued
    assert not listener.behind and listener.queued_positions() == (7,)
    assert await version_of(stream) == 7


async def test_a_listener_behind_keeps_what_ends_it() -> None:
    """A deleted root's log goes with it: its delete (the first one that ends the stream)
    and the broker's stop are kept through a drop, after the LOST that precedes them."""
    listener = Listener("c", include_descendants=False, queue_size=1)
    listener.learn_ancestry(("r", "p"))
    listener.offer(at(3))
    listener.offer(at(4))  # overflows
    listener.offer(dataclasses.replace(a_delete("r"), position=5))
    # The stream ends before it: dropped.
    listener.offer(dataclasses.replace(a_delete("p", ("r",)), position=6))
    listener.offer(at(7))
    listener.offer(None)
    got = [e async for e in listener.events()]
    assert got[0] is LOST and listener.missing == 3
    assert [(e.kind, e.conversation_id) for e in got[1:] if isinstance(e, Event)] == [
        (EventKind.CONVERSATION_DELETED, "r")
    ]
    assert len(got) == 2


async def test_a_cancelled_reader_leaves_the_listener_usable() -> None:
    listener = Listener("c", include_descendants=False)
    reading = asyncio.create_task(version_of(listener.events(idle_seconds=30)))
    await asyncio.sleep(0)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    listener.offer(an_event(8))
    assert await version_of(listener.events()) == 8


def a_delete(conversation_id: str, ancestry: tuple[str, ...] = ()) -> Event:
    return dataclasses.replace(
        an_event(kind=EventKind.CONVERSATION_DELETED),
        conversation_id=conversation_id,
        ancestry=ancestry,
    )


def test_before_its_ancestry_is_known_a_listener_takes_every_delete_then_decides() -> None:
    listener = Listener("c", include_descendants=False)
    root_deleted, other_deleted = a_delete("r"), a_delete("x")
    # Read but not yet known: an ancestor's delete published meanwhile must not be dropped.
    assert listener.wants(root_deleted) and listener.wants(other_deleted)
    assert not listener.ends_with(root_deleted)
    listener.ancestry = ("r", "p")
    assert listener.wants(root_deleted) and listener.ends_with(root_deleted)
    assert not listener.wants(other_deleted)


async def test_once_its_ancestry_is_known_the_deletes_of_others_queued_meanwhile_go() -> None:
    listener = Listener("c", include_descendants=False, queue_size=2)
    root_deleted, other_deleted = a_delete("r"), a_delete("x")
    listener.offer(other_deleted)
    listener.offer(root_deleted)
    listener.learn_ancestry(("r",))
    stream = listener.events()
    assert (await anext(stream)).conversation_id == "r"  # type: ignore[union-attr]


async def test_until_its_ancestry_is_known_a_listener_drops_nothing_then_says_what_it_owes() -> (
    None
):
    listener = Listener("c", include_descendants=False, queue_size=1)
    listener.offer(a_delete("x"))  # perhaps an ancestor's: kept beyond the queue's size
    listener.offer(at(3))
    listener.offer(at(4))
    assert not listener.behind
    listener.learn_ancestry(("r",))  # x goes; two of its own are left for a queue of one
    assert listener.behind and not listener.dropped_unplaced
    assert listener.queued_positions() == (3,)  # where the stream's start reads from
    assert await asyncio.wait_for(anext(listener.events(idle_seconds=60)), 1) is LOST
    assert listener.missing == 3


async def test_a_listener_that_lost_track_says_so_before_anything_queued() -> None:
    listener = Listener("c", include_descendants=False)
    stream = listener.events(idle_seconds=60)

    async def next_of() -> Event | Lost | None:
        return await anext(stream)

    waiting = asyncio.create_task(next_of())
    await asyncio.sleep(0)
    listener.lose_track()  # wakes the reader at once, not after 60 s
    assert await asyncio.wait_for(waiting, 1) is LOST
    listener.offer(an_event(5))
    listener.lose_track()
    assert await anext(stream) is LOST  # the log first: it holds what came before 5
    assert await version_of(stream) == 5


def of_tree(position: int, conversation_id: str = "x", ancestry: tuple[str, ...] = ("r",)) -> Event:
    return dataclasses.replace(
        an_event(), conversation_id=conversation_id, ancestry=ancestry, position=position
    )


async def test_a_catch_up_starts_past_what_was_passed_over_as_things_stood_when_lost() -> None:
    listener = Listener("c", include_descendants=False)
    stream = listener.events()
    listener.hear(of_tree(5), "r")  # its ancestry is not known yet: nothing is known
    listener.lose_track()
    assert await anext(stream) is LOST
    assert listener.catch_up_from(2) == 2
    listener.ancestry = ("r",)
    listener.hear(of_tree(7), "r")  # a sibling's event, not wanted
    listener.hear(of_tree(9, "y", ("q",)), "q")  # another tree's
    listener.lose_track()
    listener.hear(of_tree(12), "r")  # after a loss of track: perhaps past a missed event
    assert listener.heard == 7
    assert await anext(stream) is LOST
    listener.hear(of_tree(13), "r")  # heard after LOST, before the reader asks: not counted
    assert listener.catch_up_from(2) == 7
    listener.offer(of_tree(14, "c"))
    listener.lose_track()
    assert await anext(stream) is LOST
    assert listener.catch_up_from(2) == 2  # what is queued comes first


def test_before_its_ancestry_is_known_a_listener_holds_ten_times_its_queue_at_most() -> None:
    listener = Listener("c", include_descendants=False, queue_size=3)
    for _ in range(30):
        listener.offer(a_delete("x"))
    assert not listener.behind
    listener.offer(a_delete("x"))
    assert listener.behind and listener.queued_positions() == ()
    # Deletes of trees it cannot place yet: the stream checks that its conversation is there.
    assert listener.dropped_unplaced and not listener.dropped_from
    listener.offer(at(8))  # its own: of its tree, wherever that is
    listener.offer(a_delete("c"))  # its own end is kept
    assert listener.dropped_from == 8 and listener.ending_queued()
