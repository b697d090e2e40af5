"""What a subscription delivers: one committed change."""

from __future__ import annotations

from datetime import datetime

import strawberry

from graph.api.types.conversation import Message
from graph.api.types.delegation import Delegation
from graph.api.types.enums import EventKind
from graph.domain import cursors
from graph.store import events


@strawberry.type
class ConversationEvent:
    kind: EventKind
    conversation_id: strawberry.ID = strawberry.field(
        description="The conversation the event happened in (a descendant's id when it came "
        "from a child transcript)."
    )
    version: int
    at: datetime
    messages: list[Message] | None = strawberry.field(
        description="The messages an append wrote; of a replace, only those it wrote past the "
        "prefix of the stored transcript it kept (none when it only cut the transcript or "
        "changed nothing in it)."
    )
    message_count: int | None = strawberry.field(
        description="Of MESSAGES_APPENDED and TRANSCRIPT_REPLACED: the conversation's message "
        "count after the event. A cached transcript keeps its first `messageCount` minus the "
        "length of `messages` messages, then takes `messages`."
    )
    delegation: Delegation | None
    cursor: str = strawberry.field(
        description="Opaque position of this event in the stream; pass it as `after` to "
        "resume after it."
    )

    @classmethod
    def of(cls, e: events.Event) -> ConversationEvent:
        return cls(
            kind=e.kind,
            conversation_id=strawberry.ID(e.conversation_id),
            version=e.version,
            at=e.at,
            messages=None if e.messages is None else [Message.of(m) for m in e.messages],
            message_count=e.message_count,
            delegation=None if e.delegation is None else Delegation.of(e.delegation),
            cursor=cursors.encode_event(e.root_id, e.position),
        )
