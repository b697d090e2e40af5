"""API tokens: issue, list, revoke, and resolve a presented token to its Principal.

Tokens belong to the process (scope.RULES: api_token): only the SYSTEM principal (the CLI,
authentication, the revocation check of open subscriptions) reaches this table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, select, update

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
class TokenInfo:
    """What `token list` shows of a token (never the token itself)."""

    id: str
    workspace_key: str
    owner: str
    scopes: tuple[Scope, ...]
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


class Tokens(Part):
    async def create(
        self,
        *,
        workspace: tuple[str, str],
        owner: tuple[OwnerType, str],
        scope_: Scope,
        label: str | None = None,
    ) -> tuple[str, str]:
        """Store a new token (as a digest) and return (id, token); the token is shown only here."""
        self._require_system()
        keyring = self.repo.keyring
        token = new_token()
        token_id = ids.new_id()
        await self.sql.execute(
            T.insert().values(
                id=token_id,
                token_digest=keyring.token_digest(token),
                workspace_type=workspace[0],
                workspace_id=workspace[1],
                owner_type=owner[0],
                owner_digest=keyring.owner_digest(owner[1]),
                owner_key_sealed=keyring.seal(owner[1]),
                scopes=",".join(s.value for s in expand_scopes((scope_,))),
                label=label,
                created_at=self.repo.now(),
            )
        )
        return token_id, token

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
            )
            for t in TOKENS.many(found.keys, found.values)
        ]

    def _owner_key(self, sealed: str) -> str:
        try:
            return self.repo.keyring.unseal(sealed)
        except ValueError:
            # Sealed under another server secret: this server could never accept the token.
            return "<sealed under another secret>"

    async def revoke(self, token_id: str) -> bool:
        self._require_system()
        revoked = await self.sql.execute(
            update(T)
            .where(T.c.id == token_id, T.c.revoked_at.is_(None))
            .values(revoked_at=self.repo.now())
        )
        return bool(revoked)

    async def exist(self) -> bool:
        self._require_system()
        return bool((await self.sql.rows(select(T.c.id).limit(1))).values)

    async def authenticate(self, token: str) -> Principal | None:
        """The principal of a live token, or None for an unknown or revoked one."""
        self._require_system()
        keyring = self.repo.keyring
        found = await self.sql.rows(_LIVE_TOKEN, {"digest": keyring.token_digest(token)})
        if not found.values:
            return None
        (token_id, ws_type, ws_id, owner_type, owner_digest, sealed, scopes) = found.values[0]
        return Principal(
            token_id=token_id,
            workspace_type=ws_type,
            workspace_id=ws_id,
            owner_type=owner_type,
            owner_key=keyring.unseal_cached(sealed),
            owner_digest=owner_digest,
            scopes=_scopes(scopes),
        )

    async def live(self, token_ids: Sequence[str]) -> set[str]:
        """Which of `token_ids` are still live (not revoked)."""
        self._require_system()
        if not token_ids:
            return set()
        found = await self.sql.rows(
            select(T.c.id).where(T.c.id.in_(list(token_ids)), T.c.revoked_at.is_(None))
        )
        return set(found.scalars())

    def _require_system(self) -> None:
        if self.reach(T, scope.Access.READ) is not scope.Reach.EVERYTHING:
            raise PermissionError("tokens are the process's to manage")


@functools.cache
def _scopes(text: str) -> tuple[Scope, ...]:
    return tuple(Scope(s) for s in text.split(","))


# Every request runs it: compiled once, run on the driver on SQLite, and only the columns a
# Principal is made of.
_LIVE_TOKEN = Prepared(
    select(
        T.c.id,
        T.c.workspace_type,
        T.c.workspace_id,
        T.c.owner_type,
        T.c.owner_digest,
        T.c.owner_key_sealed,
        T.c.scopes,
    ).where(T.c.token_digest == bindparam("digest"), T.c.revoked_at.is_(None))
)
