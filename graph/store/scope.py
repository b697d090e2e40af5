"""Who may read and who may write each table: decided here, and only here.

Every repository statement that touches an owned table (conversation, delegation,
session_state, session_version_floor) filters by `clause(table, reach)` with the values of
`params(principal)`, and every insert into one takes its owner columns from
`owner_values(principal)`. The reach of a principal is given by `RULES`, one row per table:

- the owner reads and writes its own rows;
- an ADMIN token also reads every row of its workspace (never another workspace's);
- a SERVICE token in its own name reads and writes every row of its workspace (a
  backend that authenticates its own users); acting for an owner (the Convograph-Owner
  header) it is exactly that owner's WRITE principal, and these rules see only that;
- sessions (checkpoints) are the owner's alone: a session id means nothing across owners;
- OWN access is the caller's own rows whatever its scopes (the pending-session lookup of a
  retried request, and what a resume may build on);
- api_token and event_outbox belong to the process (SYSTEM: the sweep, the CLI,
  authentication).

Child rows (messages, snapshots, a tree's event log) have no owner columns: they are read
and written only through a conversation read under these rules (the repositories take that
record, never a bare id). The clauses are bound parameters, so a statement built from them
is compiled once and serves every principal.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Table, and_, bindparam, false, true

from graph.domain.errors import forbidden
from graph.domain.principal import SYSTEM, OwnerType, Principal
from graph.store.tables import Owned


class Access(enum.Enum):
    READ = "read"
    WRITE = "write"
    OWN = "own"  # the caller's own rows, whatever else it may read


class Reach(enum.Enum):
    OWNER = "owner"  # the principal's own rows
    WORKSPACE = "workspace"  # every row of the principal's workspace
    EVERYTHING = "everything"  # the process itself
    NOTHING = "nothing"

    # Members are singletons: hashing by identity is correct, and much cheaper than
    # Enum's (statements are cached by reach on every request's path).
    __hash__ = object.__hash__


ReachRule = Callable[[Principal], Reach]


def _owner(principal: Principal) -> Reach:
    return Reach.OWNER


def _workspace_for_admin_or_service(principal: Principal) -> Reach:
    return Reach.WORKSPACE if principal.is_admin or principal.is_service else Reach.OWNER


def _workspace_for_service(principal: Principal) -> Reach:
    return Reach.WORKSPACE if principal.is_service else Reach.OWNER


def _nobody(principal: Principal) -> Reach:
    return Reach.NOTHING


@dataclass(frozen=True, slots=True)
class Rule:
    read: ReachRule
    write: ReachRule
    own: ReachRule = _owner


RULES: dict[str, Rule] = {
    "conversation": Rule(read=_workspace_for_admin_or_service, write=_workspace_for_service),
    "delegation": Rule(read=_workspace_for_admin_or_service, write=_workspace_for_service),
    "session_state": Rule(read=_owner, write=_owner),
    "session_version_floor": Rule(read=_owner, write=_owner),
    "api_token": Rule(read=_nobody, write=_nobody, own=_nobody),
    "event_outbox": Rule(read=_nobody, write=_nobody, own=_nobody),
}


def reach(table: Table, principal: Principal, access: Access) -> Reach:
    """How far `principal` reaches into `table` for `access`."""
    if principal is SYSTEM:
        return Reach.EVERYTHING
    rule = RULES[table.name]
    if access is Access.WRITE and not principal.can_write:
        return Reach.NOTHING
    decide: ReachRule = getattr(rule, access.value)  # Access values name Rule's fields
    return decide(principal)


def check_write(principal: Principal) -> None:
    """A unit of work that may write needs a principal that may write something."""
    if principal is not SYSTEM and not principal.can_write:
        raise forbidden()


@cache
def clause(table: Table, reach: Reach) -> ColumnElement[bool]:
    """The rows of `table` within `reach`, filled in by `params(principal)`."""
    c = table.c
    if reach is Reach.EVERYTHING:
        return true()
    if reach is Reach.NOTHING:
        return false()
    workspace = and_(
        c.workspace_type == bindparam("scope_workspace_type"),
        c.workspace_id == bindparam("scope_workspace_id"),
    )
    if reach is Reach.WORKSPACE:
        return workspace
    return and_(
        workspace,
        c.owner_type == bindparam("scope_owner_type"),
        c.owner_digest == bindparam("scope_owner_digest"),
    )


def where(table: Table, principal: Principal, access: Access) -> ColumnElement[bool]:
    return clause(table, reach(table, principal, access))


def params(principal: Principal) -> dict[str, Any]:
    """The values of every clause's parameters for `principal`."""
    return {
        "scope_workspace_type": principal.workspace_type,
        "scope_workspace_id": principal.workspace_id,
        "scope_owner_type": principal.owner_type.value,
        "scope_owner_digest": principal.owner_digest,
    }


def owner_values(principal: Principal) -> dict[str, Any]:
    """The owner columns of a row `principal` creates on its own: always its own."""
    if principal is SYSTEM:
        raise ValueError("the process owns no rows: insert with an owner's principal")
    return {
        "workspace_type": principal.workspace_type,
        "workspace_id": principal.workspace_id,
        "owner_type": principal.owner_type,
        "owner_digest": principal.owner_digest,
    }


def inherited_owner(parent: Owned) -> dict[str, Any]:
    """The owner columns of a row created below `parent` (a delegation and its child
    transcript): a tree has one owner, whoever may write to it (a SERVICE token writing
    into a user's conversation) adds to that owner's tree."""
    return {
        "workspace_type": parent.workspace_type,
        "workspace_id": parent.workspace_id,
        "owner_type": parent.owner_type,
        "owner_digest": parent.owner_digest,
    }


def one_owner(table: Table, owner_type: OwnerType, owner_digest: str) -> ColumnElement[bool]:
    """Narrow a workspace-wide read to one owner (an ADMIN's `owner` filter)."""
    return and_(table.c.owner_type == owner_type, table.c.owner_digest == owner_digest)


def owner_type_is(table: Table, owner_type: OwnerType) -> ColumnElement[bool]:
    """Narrow a read to the rows of one owner type (the `ownerType` filter). It is added to
    the principal's clause, never in its place: a reader limited to its own rows keeps them
    (or none, for another type), a workspace-wide reader sees that type's rows."""
    return table.c.owner_type == owner_type
