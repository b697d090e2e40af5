"""API tokens: issue, list, revoke, rotate, and resolve a presented token to its Principal.

A token is live until it is revoked or its `expires_at` (NULL: never) has passed; an
expired token is refused exactly like a revoked one. Rotation issues the token's successor
and ends the old one at now + grace by setting its `expires_at` (at once: revoked), so no
job has to run later.

Tokens belong to the process (scope.RULES: api_token): only the SYSTEM principal (the CLI,
authentication, the revocation check of open subscriptions) reaches this table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    FunctionElement,
    bindparam,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from graph.domain import ids
from graph.domain.principal import OwnerType, Principal, Scope, expand_scopes
from graph.store import scope
from graph.store.keyring import new_token
from graph.store.repository.base import Part
from graph.store.rows import Builder
from graph.store.sql import Prepared
from graph.store.tables import ApiToken
from graph.store.tables import api_token as T

TOKENS = Builder(ApiToken)


@dataclass(frozen=True, slots=True)
class Live:
    """A live token's principal and the instant it expires (None: until revoked)."""

    principal: Principal
    expires_at: datetime | None

    def at(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What `token list` shows of a token (never the token itself)."""

    id: str
    workspace_key: str
    owner: str
    scopes: tuple[Scope, ...]
    label: str | None
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None

    def state(self, now: datetime) -> str:
        """ "live", "revoked" or "expired" at `now`."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "live"


@dataclass(frozen=True, slots=True)
class Rotation:
    """What `token rotate` made: the successor (shown only here) and when the old one ends."""

    id: str
    token: str
    expires_at: datetime | None
    old_ends_at: datetime


@dataclass(frozen=True, slots=True)
class RotatedAlready:
    """What `token rotate` of a token rotated before finds: the successor it made then, and
    whether that one is live (not revoked nor expired since)."""

    successor_id: str
    successor_live: bool


class Tokens(Part):
    async def create(
        self,
        *,
        workspace: tuple[str, str],
        owner: tuple[OwnerType, str],
        scope_: Scope,
        label: str | None = None,
        expires_in: timedelta | None = None,
    ) -> tuple[str, str]:
        """Store a new token (as a digest) and return (id, token); the token is shown only here.

        `expires_in`: how long it stays live (None: until revoked)."""
        self._require_system()
        keyring = self.repo.keyring
        now = self.repo.now()
        return await self._insert(
            workspace_type=workspace[0],
            workspace_id=workspace[1],
            owner_type=owner[0],
            owner_digest=keyring.owner_digest(owner[1]),
            owner_key_sealed=keyring.seal(owner[1]),
            scopes=",".join(s.value for s in expand_scopes((scope_,))),
            label=label,
            created_at=now,
            expires_at=None if expires_in is None else now + expires_in,
        )

    async def create_first(
        self,
        *,
        workspace: tuple[str, str],
        owner: tuple[OwnerType, str],
        scope_: Scope,
        label: str | None = None,
    ) -> str | None:
        """`create`, on a database without tokens only (the bootstrap token): the token, or
        None when there are tokens. Servers starting at once on an empty database make one
        between them: on PostgreSQL each waits here until the others' transactions have
        committed, then sees their token (SQLite's write transaction holds the file)."""
        self._require_system()
        if not self.sql.is_sqlite:
            await self.sql.rows(_BOOTSTRAP_LOCK)
        if await self.exist():
            return None
        _, token = await self.create(workspace=workspace, owner=owner, scope_=scope_, label=label)
        return token

    async def _insert(self, **values: object) -> tuple[str, str]:
        self.repo.tokens_changed = True
        token = new_token()
        token_id = ids.new_id()
        await self.sql.execute(
            T.insert().values(
                id=token_id, token_digest=self.repo.keyring.token_digest(token), **values
            )
        )
        return token_id, token

    async def rotate(
        self, token_id: str, *, grace: timedelta, expires_in: timedelta | None = None
    ) -> Rotation | RotatedAlready | None:
        """Issue the successor of the live token `token_id` (same workspace, owner, scopes and
        label) and end the old one after `grace` (zero: revoke it now); None when no live
        token has that id, RotatedAlready when it was rotated before (still in its grace: its
        expiry is the grace's end, not the lifetime it was issued for).

        The successor lives `expires_in`, or as long as the old token was issued for (a token
        that expires is not rotated into one that never does)."""
        self._require_system()
        now = self.repo.now()
        found = await self.sql.rows(
            select(
                T.c.workspace_type,
                T.c.workspace_id,
                T.c.owner_type,
                T.c.owner_digest,
                T.c.owner_key_sealed,
                T.c.scopes,
                T.c.label,
                T.c.created_at,
                T.c.expires_at,
                T.c.successor_id,
            )
            # Locked (PostgreSQL) until commit: a revoke or another rotate of it waits.
            .where(T.c.id == token_id, _live(now))
            .with_for_update()
        )
        if not found.values:
            return None
        old = dict(zip(found.keys, found.values[0], strict=True))
        if (successor := old.pop("successor_id")) is not None:
            live = await self.sql.rows(select(T.c.id).where(T.c.id == successor, _live(now)))
            return RotatedAlready(successor, successor_live=bool(live.values))
        old_created: datetime = old.pop("created_at")
        old_expires: datetime | None = old.pop("expires_at")
        if expires_in is None and old_expires is not None:
            expires_in = old_expires - old_created
        expires_at = None if expires_in is None else now + expires_in
        new_id, token = await self._insert(**old, created_at=now, expires_at=expires_at)
        if grace <= timedelta(0):
            ends_at = now
            ended = {"revoked_at": now}
        else:
            # The grace never lengthens the old token's life.
            ends_at = min(now + grace, old_expires) if old_expires is not None else now + grace
            ended = {"expires_at": ends_at}
        await self.sql.execute(
            update(T).where(T.c.id == token_id).values(**ended, successor_id=new_id)
        )
        return Rotation(id=new_id, token=token, expires_at=expires_at, old_ends_at=ends_at)

    async def all(self) -> list[TokenInfo]:
        self._require_system()
        found = await self.sql.rows(select(T).order_by(T.c.created_at, T.c.id))
        return [
            TokenInfo(
                id=t.id,
                workspace_key=f"{t.workspace_type}:{t.workspace_id}",
                owner=f"{t.owner_type.value.lower()}:{self._owner_key(t.owner_key_sealed)}",
                scopes=_scopes(t.scopes),
                label=t.label,
                created_at=t.created_at,
                revoked_at=t.revoked_at,
                expires_at=t.expires_at,
            )
            for t in TOKENS.many(found.keys, found.values)
        ]

    def _owner_key(self, sealed: str) -> str:
        found = self._unsealed(sealed)
        # Sealed under another server secret: this server could never accept the token.
        return "<sealed under another secret>" if found is None else found

    def _unsealed(self, sealed: str) -> str | None:
        try:
            return self.repo.keyring.unseal(sealed)
        except ValueError:
            return None

    async def revoke(self, token_id: str) -> bool:
        self._require_system()
        self.repo.tokens_changed = True
        revoked = await self.sql.execute(
            update(T)
            .where(T.c.id == token_id, T.c.revoked_at.is_(None))
            .values(revoked_at=self.repo.now())
        )
        return bool(revoked)

    async def live_under_another_secret(self) -> int:
        """How many tokens are live when every one of them was sealed under another server
        secret than this one (this server can accept none of them), else 0. The unsealing
        stops at the first token that unseals: at start, on every start, that is the first."""
        self._require_system()
        found = await self.sql.rows(
            select(T.c.owner_key_sealed).where(_live()), {"now": self.repo.now()}
        )
        sealed = [row[0] for row in found.values]
        return len(sealed) if all(self._unsealed(value) is None for value in sealed) else 0

    async def exist(self) -> bool:
        self._require_system()
        return bool((await self.sql.rows(select(T.c.id).limit(1))).values)

    async def live_token(self, digest: str) -> Live | None:
        """The live token whose keyed digest is `digest` (UnitOfWork.authenticate), or None
        for an unknown, revoked or expired one."""
        self._require_system()
        found = await self.sql.rows(_LIVE_TOKEN, {"digest": digest, "now": self.repo.now()})
        if not found.values:
            return None
        (token_id, ws_type, ws_id, owner_type, owner_digest, sealed, scopes, expires_at) = (
            found.values[0]
        )
        principal = Principal(
            token_id=token_id,
            workspace_type=ws_type,
            workspace_id=ws_id,
            owner_type=owner_type,
            owner_key=self.repo.keyring.unseal_cached(sealed),
            owner_digest=owner_digest,
            scopes=_scopes(scopes),
        )
        return Live(principal, expires_at)

    async def live(self, token_ids: Sequence[str]) -> set[str]:
        """Which of `token_ids` are still live (neither revoked nor expired)."""
        self._require_system()
        if not token_ids:
            return set()
        found = await self.sql.rows(
            select(T.c.id).where(T.c.id.in_(list(token_ids)), _live(self.repo.now()))
        )
        return set(found.scalars())

    def _require_system(self) -> None:
        if self.reach(T, scope.Access.READ) is not scope.Reach.EVERYTHING:
            raise PermissionError("tokens are the process's to manage")


def _live(now: datetime | None = None) -> ColumnElement[bool]:
    """Neither revoked nor expired at `now` (bound later as `now` when not given)."""
    at = bindparam("now", value=now, type_=T.c.expires_at.type)
    return or_(T.c.expires_at.is_(None), _later(T.c.expires_at, at)) & T.c.revoked_at.is_(None)


class _later(FunctionElement[bool]):
    """`a > b` for two instants. SQLite stores them as text, which sorts as they do only in
    the form the server writes: an expiry typed in a shell with an offset (`… -05:00`) is
    compared as the instant it names, as Python (`token list`, the token cache) reads it."""

    type = Boolean()
    inherit_cache = True
    name = "later"


@compiles(_later)
def _later_sql(element: _later, compiler: SQLCompiler, **kw: Any) -> str:
    a, b = element.clauses
    return f"{compiler.process(a, **kw)} > {compiler.process(b, **kw)}"


@compiles(_later, "sqlite")
def _later_sqlite(element: _later, compiler: SQLCompiler, **kw: Any) -> str:
    a, b = element.clauses
    return f"julianday({compiler.process(a, **kw)}) > julianday({compiler.process(b, **kw)})"


@functools.cache
def _scopes(text: str) -> tuple[Scope, ...]:
    return tuple(Scope(s) for s in text.split(","))


# PostgreSQL: held by the transaction that looks for tokens and makes the first one.
_BOOTSTRAP_LOCK = select(
    func.pg_advisory_xact_lock(func.hashtextextended("convograph bootstrap token", 0))
)

# Every request whose token is not cached runs it: compiled once, run on the driver on
# SQLite, and only the columns a Principal is made of, and its expiry for the cache.
_LIVE_TOKEN = Prepared(
    select(
        T.c.id,
        T.c.workspace_type,
        T.c.workspace_id,
        T.c.owner_type,
        T.c.owner_digest,
        T.c.owner_key_sealed,
        T.c.scopes,
        T.c.expires_at,
    ).where(T.c.token_digest == bindparam("digest"), _live())
)
