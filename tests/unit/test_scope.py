"""Who may read and who may write each table (graph/store/scope.py), one rule at a time:
for every table and every kind of principal (the owner, a read-only token, ADMIN, SERVICE
in its own name and acting for an owner, another workspace's tokens, the process), the
Reach it gets, and which rows the rendered clause selects. No database: the clauses are
evaluated here against rows as the store writes them."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import BindParameter, Column, ColumnElement, False_, Table, True_
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import BinaryExpression, BooleanClauseList

from graph.domain.errors import ErrorCode
from graph.domain.principal import SYSTEM, OwnerType, Principal, Scope, expand_scopes
from graph.store import scope, tables
from graph.store.scope import RULES, Access, Reach
from tests.unit.helpers import raises_domain


def token(
    *scopes: Scope,
    workspace: str = "1",
    owner_type: OwnerType = OwnerType.USER,
    key: str = "alice",
) -> Principal:
    return Principal(
        token_id=f"t-{key}",
        workspace_type="site",
        workspace_id=workspace,
        owner_type=owner_type,
        owner_key=key,
        owner_digest=f"d-{key}",
        scopes=expand_scopes(scopes),
    )


OWNER = token(Scope.WRITE)
READER = token(Scope.READ)  # the same owner, with a read-only token
ADMIN = token(Scope.ADMIN, key="root")
SERVICE = token(Scope.SERVICE, owner_type=OwnerType.RUNTIME, key="backend")
ACTING = SERVICE.acting_for(OwnerType.USER, "bob", "d-bob")
# Another workspace's tokens; OTHER_OWNER has the same owner key (and digest) as OWNER.
OTHER_OWNER = token(Scope.WRITE, workspace="2")
OTHER_ADMIN = token(Scope.ADMIN, workspace="2", key="root")
OTHER_SERVICE = token(Scope.SERVICE, workspace="2", owner_type=OwnerType.RUNTIME, key="backend")

PRINCIPALS = {
    "owner": OWNER,
    "read-only owner": READER,
    "admin": ADMIN,
    "service in its own name": SERVICE,
    "service acting for an owner": ACTING,
    "another workspace's owner": OTHER_OWNER,
    "another workspace's admin": OTHER_ADMIN,
    "another workspace's service": OTHER_SERVICE,
}

# Own rows, the whole workspace, nothing.
MINE, WIDE, NONE = Reach.OWNER, Reach.WORKSPACE, Reach.NOTHING
# (read, write, own) for each table and principal: the rules as the module docstring and
# the README state them, written out rather than derived from RULES.
CONVERSATIONS_AND_DELEGATIONS = {
    "owner": (MINE, MINE, MINE),
    "read-only owner": (MINE, NONE, MINE),
    "admin": (WIDE, MINE, MINE),  # ADMIN reads its workspace, writes only its own rows
    "service in its own name": (WIDE, WIDE, MINE),
    "service acting for an owner": (MINE, MINE, MINE),  # exactly that owner's WRITE token
    "another workspace's owner": (MINE, MINE, MINE),
    "another workspace's admin": (WIDE, MINE, MINE),
    "another workspace's service": (WIDE, WIDE, MINE),
}
SESSIONS = {  # a session id means nothing across owners: nobody reaches wider
    "owner": (MINE, MINE, MINE),
    "read-only owner": (MINE, NONE, MINE),
    "admin": (MINE, MINE, MINE),
    "service in its own name": (MINE, MINE, MINE),
    "service acting for an owner": (MINE, MINE, MINE),
    "another workspace's owner": (MINE, MINE, MINE),
    "another workspace's admin": (MINE, MINE, MINE),
    "another workspace's service": (MINE, MINE, MINE),
}
PROCESS_ONLY = dict.fromkeys(PRINCIPALS, (NONE, NONE, NONE))
EXPECTED = {
    "conversation": CONVERSATIONS_AND_DELEGATIONS,
    "delegation": CONVERSATIONS_AND_DELEGATIONS,
    "session_state": SESSIONS,
    "api_token": PROCESS_ONLY,
    "event_outbox": PROCESS_ONLY,
}
TABLES: dict[str, Table] = {
    "conversation": tables.conversation,
    "delegation": tables.delegation,
    "session_state": tables.session_state,
    "api_token": tables.api_token,
    "event_outbox": tables.event_outbox,
}
CASES = [
    pytest.param(t, who, access, EXPECTED[t][who][i], id=f"{t}-{who}-{access.value}")
    for t in EXPECTED
    for who in PRINCIPALS
    for i, access in enumerate((Access.READ, Access.WRITE, Access.OWN))
]


@pytest.mark.parametrize(("table", "who", "access", "expected"), CASES)
def test_the_reach_of_each_principal_in_each_table(
    table: str, who: str, access: Access, expected: Reach
) -> None:
    assert scope.reach(TABLES[table], PRINCIPALS[who], access) is expected


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("access", Access)
def test_the_process_reaches_everything(table: str, access: Access) -> None:
    assert scope.reach(TABLES[table], SYSTEM, access) is Reach.EVERYTHING


@pytest.mark.parametrize("table", TABLES)
def test_a_look_alike_of_the_process_reaches_only_its_own_nothing(table: str) -> None:
    # Only the SYSTEM object is the process: equal fields (a token could never carry them
    # anyway) do not make a principal the process.
    twin = Principal(
        token_id=SYSTEM.token_id,
        workspace_type=SYSTEM.workspace_type,
        workspace_id=SYSTEM.workspace_id,
        owner_type=SYSTEM.owner_type,
        owner_key=SYSTEM.owner_key,
        owner_digest=SYSTEM.owner_digest,
        scopes=SYSTEM.scopes,
    )
    for access in Access:
        assert scope.reach(TABLES[table], twin, access) is not Reach.EVERYTHING
    assert scope.reach(TABLES[table], twin, Access.WRITE) is Reach.NOTHING


def test_every_table_with_owner_columns_has_a_rule() -> None:
    owned = {t.name for t in tables.metadata.sorted_tables if "owner_digest" in t.c}
    assert owned <= set(RULES)
    assert set(RULES) <= {t.name for t in tables.metadata.sorted_tables}


def test_child_rows_have_no_owner_of_their_own() -> None:
    # Messages and snapshots are reached only through a conversation read under the rules.
    for child in (tables.message, tables.snapshot):
        assert child.name not in RULES
        assert not {"workspace_id", "owner_digest"} & set(child.c.keys())
        assert "conversation_id" in child.c


# --- which rows the rendered clauses select -------------------------------------------


DIALECT = sqlite.dialect()


def stored(column: Any, value: Any) -> Any:
    """A value as the store binds it for `column` (an enum as its text, say)."""
    process = column.type.bind_processor(DIALECT)
    return process(value) if process is not None else value


def selects(expression: ColumnElement[bool], row: dict[str, Any], values: dict[str, Any]) -> bool:
    """Evaluate a scope clause (AND of `column = :param`, or a constant) on a row."""
    if isinstance(expression, True_):
        return True
    if isinstance(expression, False_):
        return False
    if isinstance(expression, BooleanClauseList) and expression.operator is operators.and_:
        return all(selects(c, row, values) for c in expression.clauses)
    if isinstance(expression, BinaryExpression) and expression.operator is operators.eq:
        column, param = expression.left, expression.right
        assert isinstance(column, Column), column
        if isinstance(param, BindParameter) and param.key in values:
            wanted = values[param.key]
        else:
            assert isinstance(param, BindParameter), param
            wanted = param.value
        return bool(stored(column, row[column.name]) == stored(column, wanted))
    raise AssertionError(f"a scope clause this test cannot read: {expression!r}")


def row_of(principal: Principal) -> dict[str, Any]:
    """A row created by `principal` on its own, owner columns stamped as the store does."""
    return scope.owner_values(principal)


ALICE = row_of(OWNER)
BOB = row_of(ACTING)  # bob's row, written by the service acting for him
ROOT = row_of(ADMIN)
BACKEND = row_of(SERVICE)
ALICE_ELSEWHERE = row_of(OTHER_OWNER)  # same owner key and digest, workspace 2
# Same workspace and digest as alice's, another owner type: somebody else.
ALICE_AS_TOKEN = {**ALICE, "owner_type": OwnerType.TOKEN}
ROWS = {
    "alice": ALICE,
    "bob": BOB,
    "root": ROOT,
    "backend": BACKEND,
    "alice elsewhere": ALICE_ELSEWHERE,
    "alice as a token": ALICE_AS_TOKEN,
}
WORKSPACE_1 = {"alice", "bob", "root", "backend", "alice as a token"}


def selected(table: Table, principal: Principal, access: Access) -> set[str]:
    expression = scope.where(table, principal, access)
    values = scope.params(principal)
    return {name for name, row in ROWS.items() if selects(expression, row, values)}


@pytest.mark.parametrize(
    ("who", "access", "rows"),
    [
        ("owner", Access.READ, {"alice"}),
        ("owner", Access.WRITE, {"alice"}),
        ("read-only owner", Access.READ, {"alice"}),
        ("read-only owner", Access.WRITE, set()),
        ("admin", Access.READ, WORKSPACE_1),
        ("admin", Access.WRITE, {"root"}),
        ("admin", Access.OWN, {"root"}),
        ("service in its own name", Access.READ, WORKSPACE_1),
        ("service in its own name", Access.WRITE, WORKSPACE_1),
        ("service in its own name", Access.OWN, {"backend"}),
        ("service acting for an owner", Access.READ, {"bob"}),
        ("service acting for an owner", Access.WRITE, {"bob"}),
        ("another workspace's owner", Access.READ, {"alice elsewhere"}),
        ("another workspace's owner", Access.WRITE, {"alice elsewhere"}),
        ("another workspace's admin", Access.READ, {"alice elsewhere"}),
        ("another workspace's service", Access.WRITE, {"alice elsewhere"}),
    ],
)
@pytest.mark.parametrize("table", ["conversation", "delegation"])
def test_the_rows_a_principal_reaches_in_conversations_and_delegations(
    table: str, who: str, access: Access, rows: set[str]
) -> None:
    assert selected(TABLES[table], PRINCIPALS[who], access) == rows


@pytest.mark.parametrize("who", PRINCIPALS)
@pytest.mark.parametrize("access", Access)
@pytest.mark.parametrize("table", [tables.session_state, tables.session_version_floor])
def test_sessions_are_the_owners_alone(table: Table, who: str, access: Access) -> None:
    principal = PRINCIPALS[who]
    found = selected(table, principal, access)
    if access is Access.WRITE and not principal.can_write:
        assert found == set()
    else:
        assert found == {name for name, row in ROWS.items() if row == row_of(principal)}


@pytest.mark.parametrize("who", PRINCIPALS)
@pytest.mark.parametrize("access", Access)
@pytest.mark.parametrize("table", ["api_token", "event_outbox"])
def test_tokens_and_the_outbox_are_the_processes_alone(
    table: str, who: str, access: Access
) -> None:
    assert selected(TABLES[table], PRINCIPALS[who], access) == set()
    assert selected(TABLES[table], SYSTEM, access) == set(ROWS)


@pytest.mark.parametrize("who", PRINCIPALS)
@pytest.mark.parametrize("table", ["conversation", "delegation", "session_state"])
def test_no_principal_reaches_another_workspace(table: str, who: str) -> None:
    principal = PRINCIPALS[who]
    for access in Access:
        for name in selected(TABLES[table], principal, access):
            assert ROWS[name]["workspace_id"] == principal.workspace_id, (name, access)


def test_one_compiled_clause_serves_every_principal() -> None:
    # The clause depends on the reach only; the principal comes in as parameters.
    assert scope.where(tables.conversation, OWNER, Access.READ) is scope.where(
        tables.conversation, OTHER_OWNER, Access.WRITE
    )
    assert scope.where(tables.conversation, ADMIN, Access.READ) is scope.where(
        tables.conversation, SERVICE, Access.WRITE
    )


def test_an_admin_narrows_its_workspace_read_to_one_owner() -> None:
    expression = scope.where(tables.conversation, ADMIN, Access.READ) & scope.one_owner(
        tables.conversation, OwnerType.USER, "d-bob"
    )
    values = scope.params(ADMIN)
    assert {n for n, row in ROWS.items() if selects(expression, row, values)} == {"bob"}


# --- the owner columns of new rows ----------------------------------------------------


def test_a_new_row_belongs_to_its_creator() -> None:
    assert scope.owner_values(OWNER) == {
        "workspace_type": "site",
        "workspace_id": "1",
        "owner_type": OwnerType.USER,
        "owner_digest": "d-alice",
    }


def test_a_row_a_service_creates_for_an_owner_is_that_owners() -> None:
    assert scope.owner_values(ACTING)["owner_digest"] == "d-bob"
    assert scope.owner_values(ACTING)["owner_type"] is OwnerType.USER
    assert scope.owner_values(SERVICE)["owner_digest"] == "d-backend"


def test_the_process_owns_no_rows() -> None:
    with pytest.raises(ValueError):
        scope.owner_values(SYSTEM)


def test_a_row_below_another_takes_the_parents_owner() -> None:
    parent = tables.Conversation(**scope.owner_values(OWNER), id="c-1", agent_slug="a")
    # A SERVICE in its own name writing into alice's tree adds to alice's tree.
    assert scope.inherited_owner(parent) == scope.owner_values(OWNER)
    assert scope.inherited_owner(parent) != scope.owner_values(SERVICE)


def test_a_unit_of_work_that_may_write_needs_a_principal_that_may_write() -> None:
    with raises_domain(ErrorCode.FORBIDDEN):
        scope.check_write(READER)
    for principal in (OWNER, ADMIN, SERVICE, ACTING, SYSTEM):
        scope.check_write(principal)
