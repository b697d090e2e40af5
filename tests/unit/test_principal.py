"""Principals: the scopes a token's scope grants, the workspace and owner a token names, and
what a SERVICE token becomes when it acts for an owner."""

from __future__ import annotations

import pytest

from graph.domain.principal import (
    SYSTEM,
    OwnerType,
    Principal,
    Scope,
    expand_scopes,
    owner_key_problem,
    parse_owner,
    parse_workspace,
)


@pytest.mark.parametrize(
    ("scopes", "granted"),
    [
        ((Scope.READ,), (Scope.READ,)),
        ((Scope.WRITE,), (Scope.READ, Scope.WRITE)),
        ((Scope.ADMIN,), (Scope.READ, Scope.WRITE, Scope.ADMIN)),
        ((Scope.SERVICE,), (Scope.READ, Scope.WRITE, Scope.SERVICE)),
        ((Scope.SERVICE, Scope.READ, Scope.SERVICE), (Scope.READ, Scope.WRITE, Scope.SERVICE)),
        ((), ()),
    ],
)
def test_a_scope_grants_the_ones_below_it(
    scopes: tuple[Scope, ...], granted: tuple[Scope, ...]
) -> None:
    assert expand_scopes(scopes) == granted


def test_admin_and_service_do_not_grant_each_other() -> None:
    assert Scope.SERVICE not in expand_scopes([Scope.ADMIN])
    assert Scope.ADMIN not in expand_scopes([Scope.SERVICE])


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("site:1", ("site", "1")),
        (" Site : 42 ", ("site", "42")),
        ("my_site-2:a:b", ("my_site-2", "a:b")),
    ],
)
def test_a_workspace_is_type_and_id(value: str, parsed: tuple[str, str]) -> None:
    assert parse_workspace(value) == parsed


@pytest.mark.parametrize("value", ["site", "site:", ":1", "1site:1", "si te:1", "", "site:  "])
def test_a_malformed_workspace_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="workspace"):
        parse_workspace(value)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("user:alice", (OwnerType.USER, "alice")),
        ("USER:alice", (OwnerType.USER, "alice")),
        ("runtime:a:b: c", (OwnerType.RUNTIME, "a:b: c")),
        ("audience:x", (OwnerType.AUDIENCE, "x")),
    ],
)
def test_an_owner_is_type_and_key(value: str, parsed: tuple[OwnerType, str]) -> None:
    assert parse_owner(value) == parsed


@pytest.mark.parametrize("value", ["alice", "user:", "robot:x", ":x", ""])
def test_a_malformed_owner_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="owner"):
        parse_owner(value)


@pytest.mark.parametrize(
    "key",
    [
        "alice",
        "a b",  # a space inside
        "Ada\u00a0Lovelace",  # a no-break space
        "co\u00adop",  # a soft hyphen
        "\U0001f469\u200d\U0001f4bb",  # an emoji made with a zero-width joiner
        "\u3042\u3000\u3044",  # an ideographic space inside
        "end\u3000",  # and at the end: HTTP keeps it, as it keeps any non-ASCII byte
        "\ue000",  # private use
        "\u2028",  # a line separator is not a control character
    ],
)
def test_an_owner_key_is_opaque(key: str) -> None:
    assert owner_key_problem(key) is None


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("a\tb", "control"),
        ("a\nb", "control"),
        ("\x00", "control"),
        ("a\x7f", "control"),  # DEL
        ("a\x85", "control"),  # C1: NEXT LINE
        ("a\ud800", "control"),  # a lone surrogate: not text
        (" alice", "space"),
        ("alice ", "space"),
    ],
)
def test_an_owner_key_refuses_what_a_header_cannot_carry(key: str, problem: str) -> None:
    found = owner_key_problem(key)
    assert found is not None and problem in found


def principal(*scopes: Scope) -> Principal:
    return Principal(
        token_id="t-1",
        workspace_type="site",
        workspace_id="1",
        owner_type=OwnerType.RUNTIME,
        owner_key="backend",
        owner_digest="d-backend",
        scopes=expand_scopes(scopes),
    )


def test_a_principal_names_its_workspace_and_owner() -> None:
    p = principal(Scope.READ)
    assert p.workspace_key == "site:1"
    assert p.owner == "runtime:backend"
    assert not p.can_write
    assert not p.is_admin
    assert not p.is_service
    assert principal(Scope.WRITE).can_write
    assert principal(Scope.ADMIN).is_admin
    assert principal(Scope.SERVICE).is_service


def test_a_service_acting_for_an_owner_is_that_owners_write_principal() -> None:
    service = principal(Scope.SERVICE)
    acting = service.acting_for(OwnerType.USER, "bob", "d-bob")
    assert (acting.workspace_type, acting.workspace_id) == ("site", "1")
    assert (acting.owner_type, acting.owner_key, acting.owner_digest) == (
        OwnerType.USER,
        "bob",
        "d-bob",
    )
    assert acting.scopes == (Scope.READ, Scope.WRITE)
    assert not acting.is_service
    assert acting.acting_service == "runtime:backend"
    assert acting.token_id == "t-1"


@pytest.mark.parametrize("scope", [Scope.READ, Scope.WRITE, Scope.ADMIN])
def test_only_a_service_may_act_for_an_owner(scope: Scope) -> None:
    with pytest.raises(ValueError):
        principal(scope).acting_for(OwnerType.USER, "bob", "d-bob")


def test_the_system_principal_has_no_scope_a_token_could_grant() -> None:
    assert SYSTEM.scopes == ()
    assert SYSTEM.owner_type is OwnerType.SYSTEM
    # A look-alike is not the process: only the one object is.
    twin = Principal(
        token_id="system",
        workspace_type="",
        workspace_id="",
        owner_type=OwnerType.SYSTEM,
        owner_key="",
        owner_digest="",
        scopes=(),
    )
    assert twin == SYSTEM
    assert twin is not SYSTEM
