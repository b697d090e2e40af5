"""Replay: the logged events of a conversation's tree after a cursor, for a resumed stream.

The conversation is one read under the scope rules (the caller's, or one its token may
read): its tree's log is reached only through it, as its transcript is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from graph.domain.cursors import NOT_OURS
from graph.domain.errors import DomainError, ErrorCode, invalid, not_found
from graph.store import event_log
from graph.store.events import Event
from graph.store.repository.base import Part
from graph.store.tables import Conversation

logger = logging.getLogger("convograph.events")

EXPIRED = "the events after this cursor are no longer retained: read the state, subscribe anew"


def expired() -> DomainError:
    return DomainError(ErrorCode.CURSOR_EXPIRED, EXPIRED, ["after"])


@dataclass(frozen=True, slots=True)
class Tree:
    """What reading a conversation's tree's log needs of it: taken from a scoped read of
    the conversation, and small enough for a subscription to hold while it lasts."""

    root_id: str
    workspace_type: str
    workspace_id: str

    @classmethod
    def of(cls, conversation: Conversation) -> Tree:
        return cls(conversation.root_id, conversation.workspace_type, conversation.workspace_id)


class Replay(Part):
    async def head(self, conversation: Conversation, root_id: str, position: int) -> int:
        """The last position of the tree, once the cursor (`root_id`, `position`) is known
        to resume `conversation`'s stream: INVALID_INPUT for a cursor this tree never
        issued, CURSOR_EXPIRED when the events after it are no longer retained."""
        if root_id != conversation.root_id:
            raise invalid(NOT_OURS, "after")
        found = await event_log.bounds(self.sql, root_id)
        if found is None:
            raise not_found("conversation", "conversationId")
        oldest, head = found
        if position > head:
            raise invalid(NOT_OURS, "after")
        if position + 1 < oldest:
            raise expired()
        return head

    async def position(self, conversation: Conversation) -> int:
        """The last position of the tree now: where a stream without a cursor starts."""
        found = await event_log.bounds(self.sql, conversation.root_id)
        if found is None:
            raise not_found("conversation", "conversationId")
        return found[1]

    async def page(self, tree: Tree, after: int, *, limit: int, whole: bool = True) -> list[Event]:
        """Up to `limit` logged events of the tree after position `after`, in order;
        CURSOR_EXPIRED if the sweep pruned the next one meanwhile (positions have no gap),
        unless not `whole`: then from the oldest still retained."""
        try:
            events = await event_log.after(
                self.sql,
                tree.root_id,
                after,
                limit=limit,
                workspace=(tree.workspace_type, tree.workspace_id),
            )
        except event_log.Unreplayable as gone:
            # Better a stream told to read the state anew than an event without its messages.
            logger.warning("a stream cannot resume: %s", gone)
            raise expired() from gone
        if whole and events and events[0].position != after + 1:
            raise expired()
        return events
