"""Workspace figures: how many conversations, messages, delegations and tokens a reader sees.

Three aggregate statements, each under the scope rules like every read (the owner's records;
ADMIN's and SERVICE's whole workspace), none reading a message row:

- a conversation keeps its message count, the sum of its messages' token counts and its
  stored bytes, so one statement adds up one row per readable conversation;
- delegations are counted by status from the index that starts with the owner columns and
  holds the status (ix_delegation_owner_tier), without a look at the table;
- less those below a conversation past its expiry that the sweep has not deleted yet (a
  delegation lives as long as its parent conversation): found from the expiry index, so
  this costs nothing while there are none. Asking each delegation for a live parent instead
  looks up every parent: at 10,000 delegations, 76 ms instead of 9 on SQLite.

All three run in the query's one read transaction, so they count the same state.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import func, select

from graph.domain.delegations import DelegationStatus
from graph.store import scope
from graph.store.repository.base import Part, alive, expired
from graph.store.sql import Prepared
from graph.store.tables import conversation as C
from graph.store.tables import delegation as D


@dataclass(frozen=True, slots=True)
class Figures:
    conversations: int
    messages: int
    token_count: int
    stored_bytes: int
    # Every status, in the enum's order; a status with no delegation counts 0.
    delegations: tuple[tuple[DelegationStatus, int], ...]


class WorkspaceFigures(Part):
    async def read(self) -> Figures:
        params = self.params()
        totals_of = _conversation_totals(self.reach(C, scope.Access.READ))
        delegations_reach = self.reach(D, scope.Access.READ)
        totals = (await self.sql.rows(totals_of, params)).values[0]
        by_status = dict((await self.sql.rows(_delegations(delegations_reach), params)).values)
        for status, gone in (await self.sql.rows(_expired(delegations_reach), params)).values:
            by_status[status] -= gone
        conversations, messages, tokens, stored = totals
        return Figures(
            conversations=int(conversations),
            messages=int(messages),
            token_count=int(tokens),
            stored_bytes=int(stored),
            delegations=tuple(
                (status, int(by_status.get(status, 0))) for status in DelegationStatus
            ),
        )


@functools.cache
def _conversation_totals(reach: scope.Reach) -> Prepared:
    return Prepared(
        select(
            func.count(),
            func.coalesce(func.sum(C.c.message_count), 0),
            func.coalesce(func.sum(C.c.token_count), 0),
            func.coalesce(func.sum(C.c.message_bytes + C.c.snapshot_bytes), 0),
        ).where(scope.clause(C, reach), alive(C))
    )


@functools.cache
def _delegations(reach: scope.Reach) -> Prepared:
    """Every delegation within `reach` by status, live or below an expired conversation."""
    return Prepared(
        select(D.c.status, func.count()).where(scope.clause(D, reach)).group_by(D.c.status)
    )


@functools.cache
def _expired(reach: scope.Reach) -> Prepared:
    """The delegations within `reach` whose parent conversation is past its expiry."""
    expired_parents = select(C.c.id).where(expired(C))
    return Prepared(
        select(D.c.status, func.count())
        .where(scope.clause(D, reach), D.c.parent_conversation_id.in_(expired_parents))
        .group_by(D.c.status)
    )
