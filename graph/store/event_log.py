"""The durable event log: every committed event, numbered within its tree, for resuming.

A tree is a root conversation and every child transcript below it. Its events are numbered
1, 2, 3… by the counter on the root row (`conversation.event_position`), which a write
transaction bumps while it holds the root's row lock, and the log rows go in just before it
commits (one insert): an event is in the log if and only if its change committed. The root
row stays locked from the bump until the commit, so the transactions of one tree take their
positions in the order they commit, and the positions have no gap (a rolled-back bump is
undone with the rest): a reader that has seen position p has seen every position below it,
on any replica.

The version bump of a root (versions.py) takes one position in the same UPDATE (`Reserved`):
a write with one event to a root, the common append, then needs no statement of its own for
its position. `record` settles the difference when the tree has more or fewer events.

On PostgreSQL a write locks its tree's root before any other row of the tree (`lock_tree`,
called first by every write that has events), so that taking the position last cannot
deadlock with a writer that holds the root and waits for a row below it (a delete, an
expiry change). SQLite has one writer at a time: nothing to lock.

A row is small: the event's columns, its delegation as JSON, and its messages by reference
(`seq_low`..`seq_high` of its conversation's message rows, which an append has just written:
a copy would double what every append writes). The replayed event must be the one the
subscribers were sent, so what takes messages away while their tree's log lives (a
transcript replace, a child transcript's delete or expiry) first copies them into the rows
that reference them (`keep_messages`), in the same transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import (
    Integer,
    Text,
    bindparam,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from graph.domain.conversations import root_of
from graph.domain.events import EventKind
from graph.store import scope
from graph.store.encryption import seal_payloads
from graph.store.events import Event, EventBroker
from graph.store.rows import Builder, dump
from graph.store.sql import IDS_PER_STATEMENT, Prepared, Sql
from graph.store.tables import Delegation, Message
from graph.store.tables import conversation as C
from graph.store.tables import event_log as L
from graph.store.tables import message as M

_MESSAGES = Builder(Message)
_DELEGATIONS = Builder(Delegation)
_MESSAGE_KEYS = ("seq", "role", "data", "created_at")
_COLUMNS = ("root_id", "position", "conversation_id", "ancestry", "kind", "version", "at")
_STORED = (*_COLUMNS, "payload", "seq_low", "seq_high")

_BUMP = Prepared(
    update(C)
    .where(C.c.id == bindparam("root"))
    .values(event_position=C.c.event_position + bindparam("count"))
    .returning(C.c.event_position)
)
_INSERT = Prepared(L.insert(), column_keys=list(_STORED))
# PostgreSQL: a notification sent by the statement that logs its event (see `record`).
_NOTIFY = func.pg_notify(bindparam("channel"), bindparam("notice"))
_INSERT_NOTIFY = Prepared(L.insert().returning(_NOTIFY), column_keys=list(_STORED))
_NOTIFY_ALONE = Prepared(select(_NOTIFY))


def _notify_each() -> Prepared:
    """Several notifications in one statement, in the order given (`channels`, `notices`)."""
    given = (
        func.unnest(
            bindparam("channels", type_=ARRAY(Text)), bindparam("notices", type_=ARRAY(Text))
        )
        .table_valued("channel", "notice", with_ordinality="n")
        .render_derived()
    )
    return Prepared(
        select(func.pg_notify(given.c.channel, given.c.notice))
        .select_from(given)
        .order_by(given.c.n)
    )


_NOTIFY_EACH = _notify_each()
_ANCESTRY = Prepared(select(C.c.ancestry).where(C.c.id == bindparam("id")))
_LOCK = Prepared(select(C.c.id).where(C.c.id == bindparam("id")).with_for_update())
_LOCK_MANY = Prepared(
    select(C.c.id)
    .where(C.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(C.c.id)
    .with_for_update()
)
_AFTER = Prepared(
    select(*(L.c[k] for k in _STORED))
    .where(L.c.root_id == bindparam("root"), L.c.position > bindparam("after"))
    .order_by(L.c.position)
    .limit(bindparam("limit"))
)
# One conversation's messages of a range of seqs, as an event carries them.
_MESSAGES_OF = Prepared(
    select(M.c.conversation_id, *(M.c[k] for k in _MESSAGE_KEYS))
    .where(
        M.c.conversation_id == bindparam("id"),
        M.c.seq.between(bindparam("low"), bindparam("high")),
    )
    .order_by(M.c.seq)
)
_BOUNDS = Prepared(
    select(
        C.c.event_position,
        select(func.min(L.c.position)).where(L.c.root_id == C.c.id).scalar_subquery(),
    ).where(C.c.id == bindparam("root"))
)


class Reserved:
    """The positions the root version bumps of one transaction took: root id -> (how many,
    the last one)."""

    def __init__(self) -> None:
        self.roots: dict[str, tuple[int, int]] = {}

    def took(self, root_id: str, position: int) -> None:
        count, _ = self.roots.get(root_id, (0, 0))
        self.roots[root_id] = (count + 1, position)


class Unreplayable(LookupError):
    """A logged event names messages that are no longer stored (a replica of a release before
    migration 0013 deleted them without copying them into the log first): the event cannot
    be replayed as it was sent."""


# The root of each conversation this process has written to: ancestry never changes.
_ROOTS: dict[str, str] = {}
_ROOTS_KEPT = 100_000


async def lock_tree(
    sql: Sql,
    conversation_id: str,
    *,
    ancestry: str | None = None,
    within: tuple[scope.Reach, Mapping[str, Any]] | None = None,
) -> None:
    """Lock the root of `conversation_id`'s tree, first (PostgreSQL; see the module doc).

    A caller that has read the conversation's `ancestry` passes it: nothing is read again.
    A principal's write passes `within`, its write reach and the scope's parameters: only a
    root it may write is locked (a tree's rows share its owner), so that naming another
    tenant's conversation neither waits behind that tree's writers nor holds them up.
    """
    if sql.is_sqlite:
        return
    root = _ROOTS.get(conversation_id)
    if root is None and ancestry is not None:
        root = root_of(conversation_id, ancestry)
    if root is None:
        found = await sql.rows(_ANCESTRY, {"id": conversation_id})
        if not found.values:
            return  # the write itself finds it missing and says so
        root = root_of(conversation_id, found.values[0][0])
        if len(_ROOTS) >= _ROOTS_KEPT:
            _ROOTS.clear()
        _ROOTS[conversation_id] = root
    if root == conversation_id:  # a write to the root locks it by itself
        return
    if within is None:
        await sql.rows(_LOCK, {"id": root})
    else:
        reach, params = within
        await sql.rows(row_lock(reach), {**params, "id": root})


@functools.cache
def row_lock(reach: scope.Reach) -> Prepared:
    """A conversation's row (`id`), locked if it is within `reach` (the scope's parameters
    bound): a principal locks only what it may write."""
    return Prepared(
        select(C.c.id).where(C.c.id == bindparam("id"), scope.clause(C, reach)).with_for_update()
    )


async def lock_trees(sql: Sql, conversations: Iterable[tuple[str, str]]) -> None:
    """Lock the roots of the trees of several (id, ancestry) conversations, in id order (the
    sweep): a writer holds one root at most, so taking them in one order cannot deadlock.
    IDS_PER_STATEMENT at a time, each batch after the one before in that order: a sweep of
    more expired roots than a statement binds failed at every interval, and nothing expired."""
    if sql.is_sqlite:
        return
    roots = sorted({root_of(cid, ancestry) for cid, ancestry in conversations})
    for start in range(0, len(roots), IDS_PER_STATEMENT):
        await sql.rows(_LOCK_MANY, {"ids": roots[start : start + IDS_PER_STATEMENT]})


async def record(
    sql: Sql,
    events: Sequence[Event],
    reserved: Reserved | None = None,
    *,
    broker: EventBroker | None = None,
) -> list[Event]:
    """Number `events` in their trees' logs and write them (inside the write transaction),
    with the notifications `broker` sends for them.

    `reserved` holds the positions the transaction's root bumps already took; the counter
    is moved by the difference, if any. The events of a tree whose root this transaction
    deleted get the positions that follow its last one and no row: the whole log of that
    tree is gone with it.

    The common write, one event with its row, logs it and sends its notification in one
    statement (`INSERT … RETURNING pg_notify(…)`): the tree's root stays locked from the
    bump to the commit, and this is one round trip fewer inside that lock.
    """
    taken = reserved.roots if reserved is not None else {}
    trees: dict[str, list[Event]] = {root: [] for root in taken}
    for event in events:
        trees.setdefault(event.root_id, []).append(event)
    numbered: list[Event] = []
    rows: list[dict[str, Any]] = []
    for root, mine in trees.items():
        count, last = taken.get(root, (0, 0))
        deleted = any(
            e.kind is EventKind.CONVERSATION_DELETED and e.conversation_id == root for e in mine
        )
        logged = True
        if count != len(mine) or deleted:
            bumped = await sql.rows(_BUMP, {"root": root, "count": len(mine) - count})
            if bumped.values:
                last = int(bumped.values[0][0])
            else:
                logged = False
                last = max((e.head or 0 for e in mine), default=0) - count + len(mine)
        for offset, event in enumerate(mine):
            event = event.numbered(last - len(mine) + 1 + offset)
            numbered.append(event)
            if logged:
                rows.append(_row(event))
    if rows and sql.encryption is not None:
        await seal_payloads(sql.encryption, rows)
    notices = await broker.notices(sql, numbered) if broker is not None else []
    if len(rows) == 1 and len(notices) == 1:
        channel, notice = notices[0]
        await sql.rows(_INSERT_NOTIFY, {**rows[0], "channel": channel, "notice": notice})
        return numbered
    if rows:
        await sql.execute_many(_INSERT, rows)
    if len(notices) == 1:
        channel, notice = notices[0]
        await sql.rows(_NOTIFY_ALONE, {"channel": channel, "notice": notice})
    elif notices:
        # One statement, not one each: a root's expiry has an event for every child
        # transcript below it, and each was a round trip while the tree's root is locked.
        channels, texts = zip(*notices, strict=True)
        await sql.rows(_NOTIFY_EACH, {"channels": list(channels), "notices": list(texts)})
    return numbered


def _row(event: Event) -> dict[str, Any]:
    carried: dict[str, Any] = {}
    low = high = None
    if (messages := event.messages) is not None:
        if messages and messages[-1].seq - messages[0].seq == len(messages) - 1:
            low, high = messages[0].seq, messages[-1].seq  # just written: referenced
        else:
            carried["m"] = [_copy(m) for m in messages]
    if event.delegation is not None:
        carried["d"] = dump(event.delegation)
    if event.count_without_messages is not None:
        carried["n"] = event.count_without_messages
    return {
        "root_id": event.root_id,
        "position": event.position,
        "conversation_id": event.conversation_id,
        "ancestry": " ".join(event.ancestry),
        "kind": event.kind,
        "version": event.version,
        "at": event.at,
        "payload": orjson.dumps(carried).decode() if carried else None,
        "seq_low": low,
        "seq_high": high,
    }


def _copy(message: Message) -> list[Any]:
    return [getattr(message, k) for k in _MESSAGE_KEYS]


def _event(
    row: Sequence[Any], *, workspace: tuple[str, str], referenced: dict[str, dict[int, Message]]
) -> Event:
    _root, position, conversation_id, ancestry, kind, version, at, payload, low, high = row
    carried = orjson.loads(payload) if payload else {}
    messages = None
    if low is not None:
        named = _between(referenced.get(conversation_id, {}), low, high)
        if named is None:
            raise Unreplayable(f"event {position} of tree {_root}: messages {low}-{high} gone")
        messages = tuple(named)
    elif "m" in carried:
        messages = tuple(
            _MESSAGES.load(
                {"conversation_id": conversation_id, **dict(zip(_MESSAGE_KEYS, m, strict=True))}
            )
            for m in carried["m"]
        )
    delegation = _DELEGATIONS.load(carried["d"]) if "d" in carried else None
    return Event(
        kind=kind if isinstance(kind, EventKind) else EventKind(kind),
        conversation_id=conversation_id,
        ancestry=tuple(ancestry.split()),
        workspace_type=workspace[0],
        workspace_id=workspace[1],
        version=version,
        at=at,  # UTCDateTime's result processor made it an aware datetime
        messages=messages,
        delegation=delegation,
        position=position,
        count_without_messages=carried.get("n"),
    )


async def after(
    sql: Sql, root_id: str, position: int, *, limit: int, workspace: tuple[str, str]
) -> list[Event]:
    """Up to `limit` logged events of the tree of `root_id` after `position`, in order;
    Unreplayable if one of them names messages that are gone."""
    found = await sql.rows(_AFTER, {"root": root_id, "after": position, "limit": limit})
    referenced = await _referenced(sql, ((row[2], row[8], row[9]) for row in found.values))
    return [_event(row, workspace=workspace, referenced=referenced) for row in found.values]


async def _referenced(
    sql: Sql, ranges: Iterable[tuple[str, int | None, int | None]]
) -> dict[str, dict[int, Message]]:
    """The messages of (conversation, lowest seq, highest seq) ranges, by conversation and
    seq: one read per conversation, of the span of its ranges."""
    spans: dict[str, tuple[int, int]] = {}
    for cid, low, high in ranges:
        if low is not None and high is not None:
            was = spans.get(cid, (low, high))
            spans[cid] = (min(was[0], low), max(was[1], high))
    referenced: dict[str, dict[int, Message]] = {}
    for cid, (low, high) in spans.items():
        found = await sql.rows(_MESSAGES_OF, {"id": cid, "low": low, "high": high})
        referenced[cid] = {m.seq: m for m in _MESSAGES.many(found.keys, found.values)}
    return referenced


def _between(messages: dict[int, Message], low: int, high: int) -> list[Message] | None:
    """The messages of seqs `low`..`high`; None if any of them is no longer stored."""
    if any(seq not in messages for seq in range(low, high + 1)):
        return None
    return [messages[seq] for seq in range(low, high + 1)]


_SUBTREE = or_(
    L.c.conversation_id == bindparam("id"),
    (literal(" ") + L.c.ancestry + " ").like(bindparam("below")),
)


@functools.cache
def _referencing(subtree: bool) -> Prepared:
    """The log rows of a tree that reference messages of one conversation (and, with
    `subtree`, of every conversation below it) above a seq."""
    return Prepared(
        select(L.c.position, L.c.conversation_id, L.c.payload, L.c.seq_low, L.c.seq_high)
        .where(
            L.c.root_id == bindparam("root"),
            _SUBTREE if subtree else L.c.conversation_id == bindparam("id"),
            L.c.seq_high > bindparam("above"),
        )
        .order_by(L.c.position)
    )


# Its parameters cannot take the columns' names (SQLAlchemy keeps those for the SET values
# it binds itself): `keep_messages` renames its rows' keys for it.
_COPIED = Prepared(
    update(L)
    .where(L.c.root_id == bindparam("root"), L.c.position == bindparam("at_position"))
    .values(payload=bindparam("copy"), seq_low=None, seq_high=None)
)


async def keep_messages(
    sql: Sql, root_id: str, conversation_id: str, *, above: int = 0, subtree: bool = False
) -> int:
    """Copy into the log rows of the tree of `root_id` the messages they reference, of
    `conversation_id` (and of every conversation below it, with `subtree`) and with a seq
    above `above`: call it before those messages are deleted (a replace keeps the first
    `above`; a delete keeps none). Returns how many rows it copied into.

    Not needed when the root itself goes: its whole log goes with it.
    """
    found = await sql.rows(
        _referencing(subtree),
        {"root": root_id, "id": conversation_id, "below": f"% {conversation_id} %", "above": above},
    )
    if not found.values:
        return 0
    referenced = await _referenced(sql, ((row[1], row[3], row[4]) for row in found.values))
    rows: list[dict[str, Any]] = []
    for position, cid, payload, low, high in found.values:
        named = _between(referenced.get(cid, {}), low, high)
        if named is None:
            continue  # already gone: the reference stays, and its replay says so (Unreplayable)
        carried = orjson.loads(payload) if payload else {}
        carried["m"] = [_copy(m) for m in named]
        rows.append(
            {"root_id": root_id, "position": position, "payload": orjson.dumps(carried).decode()}
        )
    if not rows:
        return 0
    if sql.encryption is not None:
        await seal_payloads(sql.encryption, rows)
    await sql.execute_many(
        _COPIED,
        [{"root": root_id, "at_position": r["position"], "copy": r["payload"]} for r in rows],
    )
    return len(rows)


async def bounds(sql: Sql, root_id: str) -> tuple[int, int] | None:
    """(the oldest retained position, the last position) of a tree; None without its root.

    With nothing retained the oldest is the one after the last.
    """
    found = await sql.rows(_BOUNDS, {"root": root_id})
    if not found.values:
        return None
    head, oldest = found.values[0]
    return (head + 1 if oldest is None else int(oldest)), int(head)


# SQLite: the oldest rows of the log, by rowid (see `prune`).
_OLDEST = (
    select(literal_column("rowid", Integer).label("r"), L.c.at)
    .order_by(literal_column("rowid"))
    .limit(bindparam("batch"))
    .subquery()
)
_LAST_OLD = select(func.max(_OLDEST.c.r)).where(_OLDEST.c.at < bindparam("before"))
_PRUNE_OLDEST = delete(L).where(literal_column("rowid", Integer) <= _LAST_OLD.scalar_subquery())


# Events SQLite's prune deletes per statement, each in its own transaction (the sweep's).
PRUNE_BATCH = 10_000


async def prune(sql: Sql, before: datetime) -> int:
    """Delete the events older than `before`, and every earlier one of their trees; how many.
    On SQLite at most PRUNE_BATCH of them: the caller commits, and comes back while a
    prune deleted that many (one transaction for a long backlog of old events held the
    writer, and on the inline driver the process, for all of it).

    Clocks differ between replicas, so `at` need not grow with the position: what is kept of
    a tree is always a run of positions up to its last one, never a log with holes.

    SQLite has one writer: a row's rowid orders the log as its transactions committed, so
    every row up to the last old one among the oldest is a prefix of each tree's positions,
    found without an index on `at` (which would cost every commit one page more).
    PostgreSQL's writers commit concurrently: it finds the old events by that index, all of
    them in one statement (its writers do not wait for it: they add rows, it removes old ones).
    """
    if sql.is_sqlite:
        return await sql.execute(_PRUNE_OLDEST, {"batch": PRUNE_BATCH, "before": before})
    older = L.alias("older")
    upto = (
        select(func.max(older.c.position))
        .where(older.c.root_id == L.c.root_id, older.c.at < bindparam("before"))
        .scalar_subquery()
    )
    trees = select(older.c.root_id).where(older.c.at < bindparam("before"))
    return await sql.execute(
        delete(L).where(L.c.root_id.in_(trees), L.c.position <= upto), {"before": before}
    )
