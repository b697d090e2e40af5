"""Strawberry output types, built from repository records; nested fields go through loaders."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import strawberry
from sqlalchemy.ext.asyncio import AsyncConnection
from strawberry.types import Info

from . import records
from .context import Context
from .errors import ErrorCode as ErrorCodeEnum
from .jsoncodec import RawJSON, RawJSONArray, loads
from .pagination import Page, decode_cursor, encode_cursor, page_size
from .principal import OwnerType as OwnerTypeEnum
from .principal import Principal as PrincipalRecord
from .principal import Scope as ScopeEnum
from .scalars import JSON

# strawberry.enum registers the domain enums in place; the aliases keep GraphQL names here.
strawberry.enum(OwnerTypeEnum, name="OwnerType")
strawberry.enum(ScopeEnum, name="Scope")
strawberry.enum(records.DelegationStatus, name="DelegationStatus")
strawberry.enum(
    records.ReflectOutcome,
    name="ReflectOutcome",
    description="The decision of the Reflect phase that preceded a checkpoint; "
    "only PROCEED may be stored.",
)
strawberry.enum(records.EventKind, name="ConversationEventKind")
strawberry.enum(ErrorCodeEnum, name="ErrorCode")
OwnerType = OwnerTypeEnum
Scope = ScopeEnum
DelegationStatus = records.DelegationStatus
ReflectOutcome = records.ReflectOutcome
ConversationEventKind = records.EventKind
ErrorCode = ErrorCodeEnum

T = TypeVar("T")
CTX = Info[Context, None]


@strawberry.interface
class Node:
    id: strawberry.ID


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    cursor: str
    node: T


@strawberry.type
class Connection(Generic[T]):
    edges: list[Edge[T]]
    page_info: PageInfo
    _count: strawberry.Private[Callable[[AsyncConnection], Awaitable[int]] | None]
    _known_total: strawberry.Private[int | None] = None

    @strawberry.field
    def nodes(self) -> list[T]:
        return [edge.node for edge in self.edges]

    @strawberry.field
    async def total_count(self, info: CTX) -> int:
        if self._known_total is not None:
            return self._known_total
        assert self._count is not None
        async with info.context.read() as repo:
            return await self._count(repo.conn)

    @classmethod
    def of(cls, page: Page[Any], build: Callable[[Any], T]) -> Connection[T]:
        edges = [
            Edge(cursor=c, node=build(item))
            for c, item in zip(page.cursors, page.items, strict=True)
        ]
        return cls(
            edges=edges,
            page_info=PageInfo(
                has_next_page=page.has_next_page,
                has_previous_page=page.has_previous_page,
                start_cursor=page.cursors[0] if page.cursors else None,
                end_cursor=page.cursors[-1] if page.cursors else None,
            ),
            _count=page.count,
        )


@strawberry.type(
    description="A workspace scope: `type` matches ^[a-z][a-z0-9_-]*$, `id` is "
    "non-empty; key is `type:id`."
)
class Workspace:
    type: str
    id: str

    @strawberry.field
    def key(self) -> str:
        return f"{self.type}:{self.id}"


@strawberry.type(
    description="The authenticated caller, derived from the request's credentials only."
)
class Principal:
    workspace: Workspace
    owner_type: OwnerType
    owner_key: str
    scopes: list[Scope]

    @classmethod
    def of(cls, p: PrincipalRecord) -> Principal:
        return cls(
            workspace=Workspace(type=p.workspace_type, id=p.workspace_id),
            owner_type=p.owner_type,
            owner_key=p.owner_key,
            scopes=list(p.scopes),
        )


@strawberry.type
class UserError:
    code: ErrorCode
    message: str
    field: list[str] | None = strawberry.field(
        default=None,
        description='Path to the offending input field, e.g. ["messages", "3"].',
    )


@strawberry.type(
    description="One transcript entry. `data` is the message object exactly as it was sent."
)
class Message:
    seq: int = strawberry.field(
        description="1-based position in the conversation's live transcript."
    )
    role: str
    created_at: datetime
    _data: strawberry.Private[str]

    @strawberry.field
    def data(self) -> JSON:
        return JSON(RawJSON(self._data))

    @strawberry.field
    def content(self) -> JSON | None:
        return JSON(loads(self._data).get("content"))

    @classmethod
    def of(cls, r: records.MessageRecord) -> Message:
        return cls(seq=r.seq, role=r.role, created_at=r.created_at, _data=r.data_json)


@strawberry.type(
    description="A compaction snapshot: the full history as it stood before compaction."
)
class Snapshot(Node):
    id: strawberry.ID
    message_count: int
    created_at: datetime
    _record: strawberry.Private[records.SnapshotRecord]

    @strawberry.field
    def messages(self) -> JSON:
        return JSON(RawJSON(self._record.messages_json))

    @strawberry.field
    async def conversation(self, info: CTX) -> Conversation:
        found = await info.context.loaders.conversation.load(self._record.conversation_id)
        assert found is not None
        return Conversation.of(found)

    @classmethod
    def of(cls, r: records.SnapshotRecord) -> Snapshot:
        return cls(
            id=strawberry.ID(r.id),
            message_count=r.message_count,
            created_at=r.created_at,
            _record=r,
        )


def _max_page(info: CTX) -> int:
    return info.context.settings.max_page_size


@strawberry.type
class Conversation(Node):
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
    _record: strawberry.Private[records.ConversationRecord]

    @classmethod
    def of(cls, r: records.ConversationRecord) -> Conversation:
        return cls(
            id=strawberry.ID(r.id),
            title=r.title,
            agent_slug=r.agent_slug,
            context=r.context,
            provider=r.provider,
            model=r.model,
            provider_response_id=r.provider_response_id,
            owner_type=r.owner_type,
            version=r.version,
            message_count=r.message_count,
            created_at=r.created_at,
            updated_at=r.updated_at,
            last_read_at=r.last_read_at,
            expires_at=r.expires_at,
            _record=r,
        )

    @strawberry.field
    def interactive(self) -> bool:
        return self.context in records.INTERACTIVE_CONTEXTS

    @strawberry.field
    def metadata(self) -> JSON:
        return JSON(RawJSON(self._record.metadata_json))

    @strawberry.field
    def workspace(self) -> Workspace:
        return Workspace(type=self._record.workspace_type, id=self._record.workspace_id)

    @strawberry.field(
        description="True while the transcript is empty or an unexpired lock is held."
    )
    def pending(self) -> bool:
        return self._record.is_pending(datetime.now(UTC))

    @strawberry.field
    def locked_until(self) -> datetime | None:
        until = self._record.locked_until
        return until if until is not None and until > datetime.now(UTC) else None

    @strawberry.field
    async def messages(
        self,
        info: CTX,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[Message]:
        limit = info.context.settings.max_page_size
        size_first = page_size(first, default=limit, maximum=limit, field_name="first")
        size_last = (
            None
            if last is None
            else page_size(last, default=limit, maximum=limit, field_name="last")
        )
        async with info.context.read() as repo:
            page = await repo.messages.page(
                conversation_id=self._record.id,
                first=None if last is not None and first is None else size_first,
                after=after,
                last=size_last,
                before=before,
            )
        connection = Connection.of(page, Message.of)
        if after is None and before is None:
            connection._known_total = self._record.message_count
        return connection

    @strawberry.field(
        description="The live transcript as one JSON array of message objects, in "
        "order, from `fromSeq` on."
    )
    async def transcript(self, info: CTX, from_seq: int | None = 1) -> JSON:
        texts = await info.context.loaders.transcript.load((self._record.id, max(1, from_seq or 1)))
        return JSON(RawJSONArray(texts))

    @strawberry.field
    async def snapshots(
        self, info: CTX, first: int | None = 20, after: str | None = None
    ) -> Connection[Snapshot]:
        size = page_size(first, default=20, maximum=_max_page(info), field_name="first")
        items = await info.context.loaders.snapshots.load(self._record.id)
        connection = Connection.of(_slice(items, size, after, _snapshot_key), Snapshot.of)
        connection._known_total = len(items)
        return connection

    @strawberry.field(description="Delegations made from this conversation, oldest first.")
    async def delegations(
        self,
        info: CTX,
        status: DelegationStatus | None = None,
        first: int | None = 50,
        after: str | None = None,
    ) -> Connection[Delegation]:
        size = page_size(first, default=50, maximum=_max_page(info), field_name="first")
        items = await info.context.loaders.delegations_by_parent.load((self._record.id, status))
        connection = Connection.of(_slice(items, size, after, _delegation_key), Delegation.of)
        connection._known_total = len(items)
        return connection

    @strawberry.field(
        description="The delegation whose child transcript this is; null for a root conversation."
    )
    async def parent_delegation(self, info: CTX) -> Delegation | None:
        if self._record.parent_delegation_id is None:
            return None
        found = await info.context.loaders.delegation.load(self._record.parent_delegation_id)
        return Delegation.of(found) if found else None


def _snapshot_key(s: records.SnapshotRecord) -> list[Any]:
    return [s.created_at.isoformat(), s.id]


def _delegation_key(d: records.DelegationRecord) -> list[Any]:
    return [d.created_at.isoformat(), d.id]


def _slice(
    items: list[Any], size: int, after: str | None, key: Callable[[Any], list[Any]]
) -> Page[Any]:
    """Keyset paging over a list already loaded in order (snapshots, delegations)."""
    start = 0
    if after is not None:
        mark = decode_cursor(after, "after", 2)
        start = next((i for i, item in enumerate(items) if key(item) > mark), len(items))
    chosen = items[start : start + size]
    page: Page[Any] = Page(
        items=chosen,
        cursors=[encode_cursor(*key(item)) for item in chosen],
        has_next_page=start + size < len(items),
        has_previous_page=start > 0,
    )
    return page


@strawberry.type
class Delegation(Node):
    id: strawberry.ID
    delegating_tier: str
    target_tier: str
    task: str
    max_turns: int | None = strawberry.field(description="Turn limit; null means unlimited.")
    status: DelegationStatus
    summary: str | None
    created_at: datetime
    completed_at: datetime | None
    _record: strawberry.Private[records.DelegationRecord]

    @classmethod
    def of(cls, r: records.DelegationRecord) -> Delegation:
        return cls(
            id=strawberry.ID(r.id),
            delegating_tier=r.delegating_tier,
            target_tier=r.target_tier,
            task=r.task,
            max_turns=r.max_turns,
            status=r.status,
            summary=r.summary,
            created_at=r.created_at,
            completed_at=r.completed_at,
            _record=r,
        )

    @strawberry.field
    async def parent_conversation(self, info: CTX) -> Conversation:
        return await _conversation(info, self._record.parent_conversation_id)

    @strawberry.field
    async def child_conversation(self, info: CTX) -> Conversation:
        return await _conversation(info, self._record.child_conversation_id)

    @strawberry.field(description="The delegation this one resumed, if any.")
    async def resumed_from(self, info: CTX) -> Delegation | None:
        if self._record.resumed_from_id is None:
            return None
        found = await info.context.loaders.delegation.load(self._record.resumed_from_id)
        return Delegation.of(found) if found else None


async def _conversation(info: CTX, conversation_id: str) -> Conversation:
    found = await info.context.loaders.conversation.load(conversation_id)
    if found is None:  # deleted between two reads of one request
        raise LookupError("conversation not found")
    return Conversation.of(found)


@strawberry.type(description="A durable agent-session checkpoint (one version of it).")
class SessionState:
    session_id: str
    version: int
    outcome: ReflectOutcome
    created_at: datetime
    _record: strawberry.Private[records.SessionStateRecord]

    @strawberry.field(description="The SessionState document exactly as it was checkpointed.")
    def state(self) -> JSON:
        return JSON(RawJSON(self._record.state_json))

    def _doc(self) -> dict[str, Any]:
        value = loads(self._record.state_json)
        return value if isinstance(value, dict) else {}

    @strawberry.field
    def logical_facts(self) -> list[str]:
        return [f for f in self._doc().get("logical_facts") or [] if isinstance(f, str)]

    @strawberry.field
    def feedback_history(self) -> list[str]:
        ctx = self._doc().get("execution_context") or {}
        history = ctx.get("feedback_history") if isinstance(ctx, dict) else None
        return [f for f in history or [] if isinstance(f, str)]

    @strawberry.field
    def payload_type(self) -> str | None:
        value = self._doc().get("payload_type")
        return value if isinstance(value, str) else None

    @classmethod
    def of(cls, r: records.SessionStateRecord) -> SessionState:
        return cls(
            session_id=r.session_id,
            version=r.version,
            outcome=r.outcome,
            created_at=r.created_at,
            _record=r,
        )


@strawberry.type
class ConversationEvent:
    kind: ConversationEventKind
    conversation_id: strawberry.ID = strawberry.field(
        description="The conversation the event happened in (a descendant's id when it came "
        "from a child transcript)."
    )
    version: int
    at: datetime
    messages: list[Message] | None
    delegation: Delegation | None

    @classmethod
    def of(cls, e: records.Event) -> ConversationEvent:
        return cls(
            kind=e.kind,
            conversation_id=strawberry.ID(e.conversation_id),
            version=e.version,
            at=e.at,
            messages=None if e.messages is None else [Message.of(m) for m in e.messages],
            delegation=None if e.delegation is None else Delegation.of(e.delegation),
        )
