"""Who is asking: the caller a token names, the owner a SERVICE token acts for, and the
process itself (SYSTEM)."""

from __future__ import annotations

import enum
import re
import unicodedata
from dataclasses import dataclass

WORKSPACE_TYPE = re.compile(r"^[a-z][a-z0-9_-]*$")


class OwnerType(enum.Enum):
    USER = "USER"
    AUDIENCE = "AUDIENCE"
    RUNTIME = "RUNTIME"
    TOKEN = "TOKEN"
    SYSTEM = "SYSTEM"


class Scope(enum.Enum):
    READ = "READ"
    WRITE = "WRITE"
    ADMIN = "ADMIN"
    # A trusted backend (a multi-user site, a runtime host): reads and writes every record
    # of its workspace, and acts as one of its owners when a request names one.
    SERVICE = "SERVICE"


# A scope grants the ones below it too: ADMIN ⊃ WRITE ⊃ READ, SERVICE ⊃ WRITE ⊃ READ.
IMPLIED_SCOPES = {
    Scope.READ: (Scope.READ,),
    Scope.WRITE: (Scope.READ, Scope.WRITE),
    Scope.ADMIN: (Scope.READ, Scope.WRITE, Scope.ADMIN),
    Scope.SERVICE: (Scope.READ, Scope.WRITE, Scope.SERVICE),
}


def expand_scopes(scopes: list[Scope] | tuple[Scope, ...]) -> tuple[Scope, ...]:
    granted = {implied for scope in scopes for implied in IMPLIED_SCOPES[scope]}
    return tuple(scope for scope in Scope if scope in granted)


def parse_workspace(value: str) -> tuple[str, str]:
    """`type:id` -> (type, id), normalised as the WordPress store does; ValueError if invalid."""
    type_, sep, id_ = value.partition(":")
    type_, id_ = type_.strip().lower(), id_.strip()
    if not sep or not WORKSPACE_TYPE.match(type_) or not id_:
        raise ValueError(
            f"workspace must be TYPE:ID with TYPE matching {WORKSPACE_TYPE.pattern} "
            "and ID non-empty"
        )
    return type_, id_


def parse_owner(value: str) -> tuple[OwnerType, str]:
    """`type:key` -> (OwnerType, key); the key is everything after the first colon."""
    type_, sep, key = value.partition(":")
    try:
        owner_type = OwnerType(type_.strip().upper())
    except ValueError:
        owner_type = None
    if not sep or owner_type is None or not key:
        names = ", ".join(t.value.lower() for t in OwnerType)
        raise ValueError(f"owner must be TYPE:KEY with TYPE one of {names} and KEY non-empty")
    return owner_type, key


# Unicode categories a key named in a request may not hold: control characters (Cc: C0,
# DEL and C1; a header cannot carry most of them, and a listing or a log line must not) and
# lone surrogates (Cs: not text, they have no UTF-8). Everything else is a key: owner keys
# are opaque to the stores convograph serves (a name with a no-break space, an emoji with
# a zero-width joiner).
_NOT_IN_A_KEY = frozenset({"Cc", "Cs"})


def owner_key_problem(key: str) -> str | None:
    """Why `key` cannot name the owner a SERVICE token acts for (in `Convograph-Owner`, or
    a connection_init payload), or None. Nor may a space or a tab start or end it: a header
    loses them, and the key would name another owner than in a payload."""
    if any(unicodedata.category(c) in _NOT_IN_A_KEY for c in key):
        return "KEY must hold no control character"
    if key != key.strip(" \t"):
        return "KEY must not start or end with a space"
    return None


@dataclass(frozen=True, slots=True)
class Principal:
    token_id: str
    workspace_type: str
    workspace_id: str
    owner_type: OwnerType
    owner_key: str
    owner_digest: str
    scopes: tuple[Scope, ...]
    # When a SERVICE token acts for this owner: the token's own owner, as `type:key`.
    acting_service: str | None = None

    @property
    def workspace_key(self) -> str:
        return f"{self.workspace_type}:{self.workspace_id}"

    @property
    def owner(self) -> str:
        return f"{self.owner_type.value.lower()}:{self.owner_key}"

    @property
    def can_write(self) -> bool:
        return Scope.WRITE in self.scopes

    @property
    def is_admin(self) -> bool:
        return Scope.ADMIN in self.scopes

    @property
    def is_service(self) -> bool:
        """A SERVICE token in its own name: it reads and writes its whole workspace."""
        return Scope.SERVICE in self.scopes

    def acting_for(self, owner_type: OwnerType, owner_key: str, owner_digest: str) -> Principal:
        """The principal of a SERVICE token acting for an owner of its workspace: exactly
        what that owner's WRITE token is (the workspace stays the token's)."""
        if not self.is_service:
            raise ValueError("only a SERVICE token may act for an owner")
        return Principal(
            token_id=self.token_id,
            workspace_type=self.workspace_type,
            workspace_id=self.workspace_id,
            owner_type=owner_type,
            owner_key=owner_key,
            owner_digest=owner_digest,
            scopes=expand_scopes((Scope.WRITE,)),
            acting_service=self.owner,
        )


# The process itself: the retention sweep, the CLI's token commands, and authentication,
# which must read tokens before any caller is known. No token can name it: the store's
# scope rules recognise this one object (by identity), never a value a request could carry.
SYSTEM = Principal(
    token_id="system",
    workspace_type="",
    workspace_id="",
    owner_type=OwnerType.SYSTEM,
    owner_key="",
    owner_digest="",
    scopes=(),
)
