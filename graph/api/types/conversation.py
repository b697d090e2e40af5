"""Conversations, their messages and their compaction snapshots."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import strawberry

from graph.api.scalars import JSON
from graph.api.types.base import Info, Wraps
from graph.api.types.enums import DelegationStatus, OwnerType
from graph.api.types.principal import Workspace
from graph.api.types.relay import Connection, Node
from graph.domain import cursors
from graph.domain.errors import not_found
from graph.domain.jsoncodec import RawJSON, RawJSONArray, loads
from graph.domain.paging import Page, keyset_slice, page_size, seq_window
from graph.store import tables

if TYPE_CHECKING:
    from graph.api.types.delegation import Delegation

LazyDelegation = Annotated["Delegation", strawberry.lazy("graph.api.types.delegation")]

SNAPSHOTS_PAGE = 20
DELEGATIONS_PAGE = 50


@strawberry.type(
    description="One transcript entry. `data` is the message object exactly as it was sent."
)
class Message(Wraps[tables.Message]):
    seq: int = strawberry.field(
        description="1-based position in the conversation's live transcript."
    )
    role: str
    created_at: datetime

    @strawberry.field
    def data(self) -> JSON:
        return JSON(RawJSON(self._row.data))

    @strawberry.field
    def content(self) -> JSON | None:
        return JSON(loads(self._row.data).get("content"))


@strawberry.type(
    description="A compaction snapshot: the full history as it stood before compaction."
)
class Snapshot(Node, Wraps[tables.Snapshot]):
    id: strawberry.ID
    message_count: int
    created_at: datetime

    @strawberry.field
    async def messages(self, info: Info) -> JSON:
        # A snapshot of a list is read without them (Snapshots.of_conversations).
        text: str | None = vars(self._row).get("messages")
        if text is None:
            text = await info.context.loaders.snapshot_messages.load(self._row)
        if text is None:  # deleted since its list was read, outside one read transaction
            raise not_found("snapshot", "id")
        return JSON(RawJSON(text))

    @strawberry.field
    async def conversation(self, info: Info) -> Conversation:
        return await conversation_of(info, self._row.conversation_id, "conversation")


@strawberry.type
class Conversation(Node, Wraps[tables.Conversation]):
    # Set on one read after the delegation or snapshot that named it (conversation_of): its
    # eventCursor may be past them. Not annotated: no field of the schema.
    _read_after = False

    id: strawberry.ID
    title: str | None
    agent_slug: str = strawberry.field(
        description="Registered agent slug; empty string for agent-less sessions."
    )
    context: str = strawberry.field(
        description="Execution mode, an opaque consumer string; "
        "`chat`, `interactive` and `rest` are interactive."
    )
    provider: str | None
    model: str | None
    provider_response_id: str | None
    owner_type: OwnerType
    version: int = strawberry.field(
        description="Bumped by every write to the transcript or the conversation's fields."
    )
    message_count: int
    created_at: datetime
    updated_at: datetime
    last_read_at: datetime | None
    expires_at: datetime | None

    @strawberry.field
    def interactive(self) -> bool:
        return self._row.interactive

    @strawberry.field
    def metadata(self) -> JSON:
        return JSON(RawJSON(self._row.meta))

    @strawberry.field
    def workspace(self) -> Workspace:
        return Workspace(type=self._row.workspace_type, id=self._row.workspace_id)

    @strawberry.field(
        description="True while the transcript is empty or an unexpired lock is held."
    )
    def pending(self) -> bool:
        return self._row.pending(datetime.now(UTC))

    @strawberry.field
    def locked_until(self) -> datetime | None:
        until = self._row.locked_until
        return until if until is not None and until > datetime.now(UTC) else None

    @strawberry.field
    async def messages(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[Message]:
        limit = info.context.settings.max_page_size
        size_first = page_size(first, default=limit, maximum=limit, field="first")
        size_last = (
            None if last is None else page_size(last, default=limit, maximum=limit, field="last")
        )
        # message_count is the number of stored messages (kept with every write), and
        # their seq runs 1…message_count: the page is a range of seq (paging.seq_window).
        window = seq_window(
            self._row.message_count,
            first=None if first is None else size_first,
            after=None if after is None else cursors.position(after, "after"),
            last=size_last,
            before=None if before is None else cursors.position(before, "before"),
            cap=size_first,
        )
        items = await info.context.loaders.message_pages.load((self._row, window))
        page = Page(
            items=items,
            cursors=[cursors.encode_position(m.seq) for m in items],
            has_next_page=window.has_next_page,
            has_previous_page=window.has_previous_page,
        )
        return Connection.of(page, Message.of, total=self._row.message_count)

    @strawberry.field(
        description="The live transcript as one JSON array of message objects, in "
        "order, from `fromSeq` on."
    )
    async def transcript(self, info: Info, from_seq: int | None = 1) -> JSON:
        texts = await info.context.loaders.transcript.load((self._row, max(1, from_seq or 1)))
        return JSON(RawJSONArray(texts))

    @strawberry.field
    async def snapshots(
        self, info: Info, first: int | None = SNAPSHOTS_PAGE, after: str | None = None
    ) -> Connection[Snapshot]:
        size = page_size(
            first,
            default=SNAPSHOTS_PAGE,
            maximum=info.context.settings.max_page_size,
            field="first",
        )
        items = await info.context.loaders.snapshots.load(self._row)
        page = keyset_slice(items, _keyset, size=size, after=after)
        return Connection.of(page, Snapshot.of, total=len(items))

    @strawberry.field(description="Delegations made from this conversation, oldest first.")
    async def delegations(
        self,
        info: Info,
        status: DelegationStatus | None = None,
        first: int | None = DELEGATIONS_PAGE,
        after: str | None = None,
    ) -> Connection[LazyDelegation]:
        from graph.api.types.delegation import Delegation

        size = page_size(
            first,
            default=DELEGATIONS_PAGE,
            maximum=info.context.settings.max_page_size,
            field="first",
        )
        items = await info.context.loaders.delegations_by_parent.load((self._row.id, status))
        page = keyset_slice(items, _keyset, size=size, after=after)
        return Connection.of(page, Delegation.of, total=len(items))

    @strawberry.field(
        description="The cursor of the last event of this conversation's tree as the read that "
        "returned this conversation saw it: a `conversationEvents` subscription with it as "
        "`after` gets every event committed since, so a client that reads and then subscribes "
        "misses nothing between the two. In a mutation's answer it may name a position before "
        "the write's own events, which the stream then replays. Outside a query (a mutation's "
        "answer, an event) it is null for a child transcript, whose tree's position is its "
        "root's, read apart from it there, and for a conversation reached from a delegation or "
        "a snapshot, read after them: either could be past the rest of the answer."
    )
    async def event_cursor(self, info: Info) -> str | None:
        # A root's row holds its tree's counter, read with the rest of it. A child transcript's
        # is its root's, loaded in the query's read transaction (one statement for a list);
        # read in another transaction it may be ahead of this row, and a stream from it
        # would skip what came between.
        # Outside one read transaction, neither is given where the position may be past what
        # the answer holds: a child's root, or a conversation read after the object it was
        # reached from (a replayed event's delegation is as it was, its parent as it is now).
        root = self._row
        if not info.context.one_state and (root.id != root.root_id or self._read_after):
            return None
        if root.id != root.root_id:
            found = await info.context.loaders.conversation.load(root.root_id)
            if found is None:  # deleted since this row was read
                raise not_found("conversation", "id")
            root = found
        return cursors.encode_event(root.id, root.event_position)

    @strawberry.field(
        description="The delegation whose child transcript this is; null for a root conversation."
    )
    async def parent_delegation(self, info: Info) -> LazyDelegation | None:
        from graph.api.types.delegation import Delegation

        if self._row.parent_delegation_id is None:
            return None
        found = await info.context.loaders.delegation.load(self._row.parent_delegation_id)
        return Delegation.of(found) if found else None


def _keyset(row: tables.Snapshot | tables.Delegation) -> tuple[datetime, str]:
    return row.created_at, row.id


async def conversation_of(info: Info, conversation_id: str, field: str) -> Conversation:
    """A conversation that must exist (the parent or child of a delegation just read): if it
    has gone since (deleted between two reads of one request, or since the event that
    carries the delegation), NOT_FOUND for the field `field` that names it."""
    found = await info.context.loaders.conversation.load(conversation_id)
    if found is None:
        raise not_found("conversation", field)
    reached = Conversation.of(found)
    reached._read_after = True
    return reached
