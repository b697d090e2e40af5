"""Workspace figures: how many conversations, messages, delegations and tokens a reader sees.

Two aggregate statements, each under the scope rules like every read (the owner's records;
ADMIN's and SERVICE's whole workspace), neither reading a message row: a conversation
keeps its message count and the sum of its messages' token counts, so the first statement
adds up one row per conversation; the second counts delegations by status from the
delegation index that starts with the owner columns.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import func, select

from graph.domain.delegations import DelegationStatus
from graph.store import scope
from graph.store.repository.base import Part, alive
from graph.store.repository.delegations import parent_alive
from graph.store.sql import Prepared
from graph.store.tables import conversation as C
from graph.store.tables import delegation as D


@dataclass(frozen=True, slots=True)
class Figures:
    conversations: int
    messages: int
    token_count: int
    # Every status, in the enum's order; a status with no delegation counts 0.
    delegations: tuple[tuple[DelegationStatus, int], ...]


class WorkspaceFigures(Part):
    async def read(self) -> Figures:
        params = self.params()
        totals_of = _conversation_totals(self.reach(C, scope.Access.READ))
        by_status_of = _delegations_by_status(self.reach(D, scope.Access.READ))
        totals = (await self.sql.rows(totals_of, params)).values[0]
        by_status = dict((await self.sql.rows(by_status_of, params)).values)
        conversations, messages, tokens = totals
        return Figures(
            conversations=int(conversations),
            messages=int(messages),
            token_count=int(tokens),
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
        ).where(scope.clause(C, reach), alive(C))
    )


@functools.cache
def _delegations_by_status(reach: scope.Reach) -> Prepared:
    return Prepared(
        select(D.c.status, func.count())
        .where(scope.clause(D, reach), parent_alive())
        .group_by(D.c.status)
    )
