"""What every repository shares: the unit of work's connection, principal and clock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Table, bindparam, or_
from sqlalchemy.dialects import postgresql, sqlite

from graph.domain.principal import Principal
from graph.store import event_log, scope
from graph.store.sql import Sql
from graph.store.tables import conversation as C

if TYPE_CHECKING:
    from graph.store.repository import Repository


class Part:
    """One aggregate's repository inside a Repository (see its docstring)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.sql: Sql = repo.sql
        self.principal: Principal = repo.principal

    def reach(self, table: Table, access: scope.Access) -> scope.Reach:
        return scope.reach(table, self.principal, access)

    def where(self, table: Table, access: scope.Access) -> ColumnElement[bool]:
        return scope.where(table, self.principal, access)

    def params(self, **values: Any) -> dict[str, Any]:
        """`values` with the scope's parameters (and `now`, which `alive` binds)."""
        return {**self.repo.scope_params, "now": self.repo.now(), **values}

    async def lock_tree(self, conversation_id: str, *, ancestry: str | None = None) -> None:
        """Lock the root of a conversation's tree before writing it (PostgreSQL), if the
        principal may write it (event_log.lock_tree)."""
        within = (self.reach(C, scope.Access.WRITE), self.repo.scope_params)
        await event_log.lock_tree(self.sql, conversation_id, ancestry=ancestry, within=within)

    def insert(self, table: Table) -> sqlite.Insert | postgresql.Insert:
        """A dialect insert, so that `on_conflict_do_nothing` works on both backends."""
        return sqlite.insert(table) if self.sql.is_sqlite else postgresql.insert(table)


def alive(table: Table) -> ColumnElement[bool]:
    """Not past its retention (`now` bound by Part.params): an expired row reads as missing."""
    return or_(table.c.expires_at.is_(None), table.c.expires_at > bindparam("now"))


def expired(table: Table) -> ColumnElement[bool]:
    """Past its retention, awaiting the sweep: exactly the rows `alive` leaves out."""
    return table.c.expires_at <= bindparam("now")
