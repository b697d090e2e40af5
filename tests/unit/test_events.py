"""An event numbered in its tree's log is the same event at that position."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from graph.domain.events import EventKind
from graph.store.events import Event


def test_numbered_keeps_every_field_but_the_position() -> None:
    event = Event(
        kind=EventKind.MESSAGES_APPENDED,
        conversation_id="c",
        ancestry=("r", "p"),
        workspace_type="site",
        workspace_id="1",
        version=4,
        at=datetime(2026, 12, 1, tzinfo=UTC),
        messages=(),
        delegation=None,
        position=0,
        head=9,
    )
    # A field added to Event and forgotten in `numbered` fails here.
    assert event.numbered(7) == dataclasses.replace(event, position=7)
    assert [f.name for f in dataclasses.fields(Event)][-2:] == ["position", "head"]
