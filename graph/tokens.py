"""API tokens: issue, list, revoke, and resolve a presented token to its Principal."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from .crypto import Keyring, new_token
from .principal import OwnerType, Principal, Scope, expand_scopes
from .repository.driver import Prepared
from .tables import api_token as T


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: str
    workspace_key: str
    owner: str
    scopes: tuple[Scope, ...]
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


async def create_token(
    conn: AsyncConnection,
    *,
    keyring: Keyring,
    workspace: tuple[str, str],
    owner: tuple[OwnerType, str],
    scope: Scope,
    label: str | None = None,
) -> tuple[str, str]:
    """Store a new token (as a digest) and return (id, token); the token is shown only here."""
    token = new_token()
    token_id = str(uuid.uuid4())
    await conn.execute(
        T.insert().values(
            id=token_id,
            token_digest=keyring.token_digest(token),
            workspace_type=workspace[0],
            workspace_id=workspace[1],
            owner_type=owner[0].value,
            owner_digest=keyring.owner_digest(owner[1]),
            owner_key_sealed=keyring.seal(owner[1]),
            scopes=",".join(s.value for s in expand_scopes((scope,))),
            label=label,
            created_at=datetime.now(UTC),
        )
    )
    return token_id, token


async def list_tokens(conn: AsyncConnection, *, keyring: Keyring) -> list[TokenInfo]:
    rows = await conn.execute(select(T).order_by(T.c.created_at, T.c.id))
    return [
        TokenInfo(
            id=r.id,
            workspace_key=f"{r.workspace_type}:{r.workspace_id}",
            owner=f"{r.owner_type.lower()}:{_owner_key(keyring, r.owner_key_sealed)}",
            scopes=tuple(Scope(s) for s in r.scopes.split(",")),
            label=r.label,
            created_at=r.created_at,
            revoked_at=r.revoked_at,
        )
        for r in rows
    ]


def _owner_key(keyring: Keyring, sealed: str) -> str:
    try:
        return keyring.unseal(sealed)
    except ValueError:
        # Sealed under another server secret: this server could never accept the token.
        return "<sealed under another secret>"


async def revoke_token(conn: AsyncConnection, *, token_id: str) -> bool:
    result = await conn.execute(
        update(T)
        .where(T.c.id == token_id, T.c.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC))
    )
    return bool(result.rowcount)


async def has_tokens(conn: AsyncConnection) -> bool:
    return (await conn.execute(select(T.c.id).limit(1))).first() is not None


# Every request runs it: compiled once, and run on the driver on SQLite.
_LIVE_TOKEN = Prepared(
    select(T).where(T.c.token_digest == bindparam("digest"), T.c.revoked_at.is_(None))
)


async def authenticate(conn: AsyncConnection, *, keyring: Keyring, token: str) -> Principal | None:
    """The principal of a live token, or None for an unknown or revoked one."""
    rows = await _LIVE_TOKEN.rows(conn, {"digest": keyring.token_digest(token)})
    if not rows:
        return None
    row = rows[0]._mapping
    return Principal(
        token_id=row["id"],
        workspace_type=row["workspace_type"],
        workspace_id=row["workspace_id"],
        owner_type=OwnerType(row["owner_type"]),
        owner_key=keyring.unseal_cached(row["owner_key_sealed"]),
        owner_digest=row["owner_digest"],
        scopes=tuple(Scope(s) for s in row["scopes"].split(",")),
    )
