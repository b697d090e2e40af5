"""Owner scoping in one place: every repository query filters through these clauses."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Table, and_, bindparam, or_

from ..principal import OwnerType, Principal


def owner_clause(
    table: Table,
    principal: Principal,
    *,
    own: bool = False,
    owner: tuple[OwnerType, str] | None = None,
) -> ColumnElement[bool]:
    """Rows the principal may read (ADMIN: its whole workspace) or, with `own`, write.

    `owner` narrows an ADMIN read to one owner, given as (type, digest).
    """
    c = table.c
    clause = and_(
        c.workspace_type == principal.workspace_type, c.workspace_id == principal.workspace_id
    )
    if own or not principal.is_admin:
        return and_(
            clause,
            c.owner_type == principal.owner_type.value,
            c.owner_digest == principal.owner_digest,
        )
    if owner is not None:
        return and_(clause, c.owner_type == owner[0].value, c.owner_digest == owner[1])
    return clause


def alive(table: Table, now: datetime) -> ColumnElement[bool]:
    """Not past its retention: an expired conversation reads as missing."""
    return or_(table.c.expires_at.is_(None), table.c.expires_at > now)


# The same scope as bound parameters, for statements built once and reused on hot paths
# (their SQL and cache key are computed once, not per call).


def own_clause_bound(table: Table) -> ColumnElement[bool]:
    """`owner_clause(table, principal, own=True)`, filled in by `own_params(principal)`."""
    c = table.c
    return and_(
        workspace_clause_bound(table),
        c.owner_type == bindparam("scope_owner_type"),
        c.owner_digest == bindparam("scope_owner_digest"),
    )


def workspace_clause_bound(table: Table) -> ColumnElement[bool]:
    """An ADMIN's `owner_clause` (its whole workspace), filled in by `own_params(principal)`."""
    c = table.c
    return and_(
        c.workspace_type == bindparam("scope_workspace_type"),
        c.workspace_id == bindparam("scope_workspace_id"),
    )


def own_params(principal: Principal) -> dict[str, str]:
    return {
        "scope_workspace_type": principal.workspace_type,
        "scope_workspace_id": principal.workspace_id,
        "scope_owner_type": principal.owner_type.value,
        "scope_owner_digest": principal.owner_digest,
    }


def alive_bound(table: Table) -> ColumnElement[bool]:
    """`alive(table, now)` with `now` as a bound parameter."""
    return or_(table.c.expires_at.is_(None), table.c.expires_at > bindparam("now"))
