"""Workspace quotas: how many messages, and how many bytes of JSON, a workspace may store.

Off unless CONVOGRAPH_WORKSPACE_MAX_MESSAGES or CONVOGRAPH_WORKSPACE_MAX_BYTES is set.
Messages are the rows of the live transcripts; bytes are the UTF-8 bytes of their JSON and
of the compaction snapshots' JSON (each conversation keeps both sums, see tables.py).
Checkpoints, titles and metadata are not counted.

The database decides, so that replicas over one PostgreSQL share the quota: a workspace's
usage is one `workspace_usage` row, and the write that grows it adds its change in one
conditional UPDATE, the last statement before COMMIT, that matches no row when the sum
would pass the quota. Concurrent writers of one workspace queue on that row's lock (only
while quotas are on), and each sees the sum its predecessor committed: the quota holds
exactly. A refused write rolls back whole: STORAGE_FULL, naming the quota.

Deletes (a conversation and its tree, the sweep's expired ones) take what their trees held
off the workspace's usage with quotas on, and without them count the workspace again from
its conversations, after taking its usage row's lock (cheap without a usage row): a
process that only deletes (the CLI's sweep) keeps a count an earlier run made right. A
process started with quotas counts every workspace again (`recount_all`), since a process
without them does not count what it writes: every replica must run with the same quota
settings. One that starts while the database is away (or not migrated yet) counts before
its first write (UnitOfWork.count_usage).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    LargeBinary,
    String,
    bindparam,
    cast,
    delete,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from graph.domain.errors import DomainError, ErrorCode
from graph.settings import Settings
from graph.store.sql import Prepared, Sql
from graph.store.tables import Conversation
from graph.store.tables import conversation as C
from graph.store.tables import workspace_usage as U

logger = logging.getLogger("convograph.quotas")

Workspace = tuple[str, str]  # (workspace_type, workspace_id)


@dataclass
class UsageChange:
    """What one unit of work changed in what its workspaces store."""

    grown: dict[Workspace, list[int]] = field(default_factory=dict)  # [messages, bytes]
    recount: set[Workspace] = field(default_factory=set)

    def add(self, conversation: Conversation, *, messages: int = 0, size: int = 0) -> None:
        """`conversation` now holds `messages` more messages and `size` more bytes."""
        key = (conversation.workspace_type, conversation.workspace_id)
        change = self.grown.setdefault(key, [0, 0])
        change[0] += messages
        change[1] += size

    def deleted(self, conversation: Conversation) -> None:
        """`conversation` (and what was below it) is gone: count its workspace again."""
        self.recount.add((conversation.workspace_type, conversation.workspace_id))

    def freed(self, conversation: Conversation, *, messages: int, size: int) -> None:
        """`conversation` and what was below it, which held `messages` messages and `size`
        bytes, are gone: taken off its workspace's usage (a count of the workspace again
        reads every conversation of it, hundreds of milliseconds in a large one)."""
        self.add(conversation, messages=-messages, size=-size)


def _in_workspace() -> Any:
    return (C.c.workspace_type == bindparam("wt")) & (C.c.workspace_id == bindparam("wi"))


def usage_of_row() -> tuple[Any, Any]:
    """What one conversation counts in its workspace's usage: messages, bytes."""
    return C.c.message_count, C.c.message_bytes + C.c.snapshot_bytes


def usage_sums() -> tuple[Any, Any]:
    """What a workspace's usage counts of the conversations summed: messages, bytes."""
    messages, size = usage_of_row()
    return func.coalesce(func.sum(messages), 0), func.coalesce(func.sum(size), 0)


_USAGE_ROW = (U.c.workspace_type == bindparam("wt")) & (U.c.workspace_id == bindparam("wi"))
_LOCK_ROW = Prepared(select(U.c.messages).where(_USAGE_ROW).with_for_update())
_CURRENT = Prepared(select(U.c.messages, U.c.bytes).where(_USAGE_ROW))
_RECOUNT = Prepared(
    update(U)
    .where(_USAGE_ROW)
    .values(
        messages=select(usage_sums()[0]).where(_in_workspace()).scalar_subquery(),
        bytes=select(usage_sums()[1]).where(_in_workspace()).scalar_subquery(),
    )
)


@functools.cache
def _first_count(is_sqlite: bool) -> Prepared:
    """The usage row of a workspace not counted yet, from its conversations (this write's
    included); nothing when a concurrent writer made it first."""
    insert = sqlite.insert(U) if is_sqlite else postgresql.insert(U)
    counted = select(
        bindparam("wt", type_=String), bindparam("wi", type_=String), *usage_sums()
    ).where(_in_workspace())
    return Prepared(
        insert.from_select(["workspace_type", "workspace_id", "messages", "bytes"], counted)
        .on_conflict_do_nothing(index_elements=["workspace_type", "workspace_id"])
        .returning(U.c.messages, U.c.bytes)
    )


@functools.cache
def _grow(check_messages: bool, check_bytes: bool) -> Prepared:
    """Add a change to a usage row, unless a growing count would pass its quota."""
    where: list[ColumnElement[bool]] = [_USAGE_ROW]
    if check_messages:
        where.append(U.c.messages + bindparam("messages") <= bindparam("max_messages"))
    if check_bytes:
        where.append(U.c.bytes + bindparam("bytes") <= bindparam("max_bytes"))
    return Prepared(
        update(U)
        .where(*where)
        .values(messages=U.c.messages + bindparam("messages"), bytes=U.c.bytes + bindparam("bytes"))
        .returning(U.c.messages)
    )


class Quotas:
    """The quotas of this process's settings, and the writes they refused."""

    def __init__(self, settings: Settings) -> None:
        self.max_messages = settings.workspace_max_messages
        self.max_bytes = settings.workspace_max_bytes
        self.on = settings.quotas_on
        self.refused = 0

    async def settle(self, sql: Sql, change: UsageChange) -> None:
        """Apply one unit of work's change (inside its transaction, last); STORAGE_FULL when
        it passes a quota. Workspaces in sorted order, so that two writers cannot deadlock."""
        for workspace in sorted(change.recount):
            await _recount(sql, workspace)
        if not self.on:
            return
        for workspace, (messages, size) in sorted(change.grown.items()):
            if workspace not in change.recount and (messages or size):
                await self._grow(sql, workspace, messages, size)

    async def _grow(self, sql: Sql, workspace: Workspace, messages: int, size: int) -> None:
        check_messages = self.max_messages is not None and messages > 0
        check_bytes = self.max_bytes is not None and size > 0
        params = {
            "wt": workspace[0],
            "wi": workspace[1],
            "messages": messages,
            "bytes": size,
            "max_messages": self.max_messages,
            "max_bytes": self.max_bytes,
        }
        for _ in range(2):  # the second time after a concurrent first count
            if (await sql.rows(_grow(check_messages, check_bytes), params)).values:
                return
            current = (await sql.rows(_CURRENT, params)).values
            if current:
                before = (current[0][0], current[0][1])
            else:
                counted = (await sql.rows(_first_count(sql.is_sqlite), params)).values
                if not counted:
                    continue
                # The first count includes this write: it may be what passes the quota.
                after = (counted[0][0], counted[0][1])
                if not self._over(after, check_messages, check_bytes):
                    return
                before = (after[0] - messages, after[1] - size)
            raise self._refusal(workspace, before, messages, size, check_messages)
        raise DomainError(ErrorCode.CONFLICT, "the workspace's usage changed; retry")

    def _over(self, usage: tuple[int, int], check_messages: bool, check_bytes: bool) -> bool:
        """Whether `usage` is past a quota that this write, growing, must keep."""
        if check_messages and self.max_messages is not None and usage[0] > self.max_messages:
            return True
        return check_bytes and self.max_bytes is not None and usage[1] > self.max_bytes

    def _refusal(
        self,
        workspace: Workspace,
        before: tuple[int, int],
        messages: int,
        size: int,
        check_messages: bool,
    ) -> DomainError:
        self.refused += 1
        name = f"{workspace[0]}:{workspace[1]}"
        if (
            check_messages
            and self.max_messages is not None
            and before[0] + messages > self.max_messages
        ):
            quota, stored, adds = f"{self.max_messages:,} messages", before[0], messages
        else:
            quota, stored, adds = f"{self.max_bytes or 0:,} bytes", before[1], size
        logger.warning(
            "workspace %s refused a write: its quota of %s (%s stored, this write adds %s)",
            *(name, quota, f"{stored:,}", f"{adds:,}"),
        )
        # Not how much is stored: that is every owner's of the workspace, and the caller
        # may be one owner among them (workspaceFigures shows each only its own).
        return DomainError(
            ErrorCode.STORAGE_FULL,
            f"the workspace {name} has reached its quota of {quota} (this write adds "
            f"{adds:,}): nothing was written; delete conversations to make room",
        )


async def _recount(sql: Sql, workspace: Workspace) -> None:
    """Count a workspace's usage again (if it is counted at all), under its row's lock."""
    params = {"wt": workspace[0], "wi": workspace[1]}
    if not sql.is_sqlite:
        # Its own statement: the recount then reads what committed while it waited.
        await sql.rows(_LOCK_ROW, params)
    await sql.execute(_RECOUNT, params)


async def recount_all(sql: Sql) -> int:
    """Count every workspace's usage again (a process starting with quotas); how many."""
    if not sql.is_sqlite:
        # Writers that have added to a usage row commit first; new ones wait for this. A
        # delete's recount too, which locks its row (FOR UPDATE) before it updates it:
        # EXCLUSIVE waits for that lock, where SHARE ROW EXCLUSIVE was granted beside it, and
        # the two deadlocked (the recount waiting for the row, the delete for the table): a
        # replica starting while another served a delete or the sweep failed to start, or
        # the delete failed INTERNAL.
        await sql.execute(text("LOCK TABLE workspace_usage IN EXCLUSIVE MODE"))
    await sql.execute(delete(U))
    counted = select(C.c.workspace_type, C.c.workspace_id, *usage_sums()).group_by(
        C.c.workspace_type, C.c.workspace_id
    )
    total = await sql.execute(
        U.insert().from_select(["workspace_type", "workspace_id", "messages", "bytes"], counted)
    )
    logger.info("workspace quotas on: counted the usage of %d workspaces", total)
    return total


def byte_length(column: Any, *, is_sqlite: bool) -> Any:
    """The UTF-8 length of a text column, as each backend counts it."""
    if is_sqlite:
        return func.length(cast(column, LargeBinary))
    return func.octet_length(column)
