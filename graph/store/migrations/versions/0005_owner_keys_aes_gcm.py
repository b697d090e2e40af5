"""Tokens' sealed owner keys: AES-GCM (cryptography) instead of a hand-made SHAKE-256 stream

Each sealed value is opened with the old construction and sealed again with
graph.store.keyring.Keyring.seal, under the same server secret (so this migration needs the
secret that made the tokens: CONVOGRAPH_SECRET, or the secret file beside the SQLite
database). The old construction is kept here only, for this migration and its downgrade.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

from graph.settings import Settings, SettingsError
from graph.store.keyring import SEALED_PREFIX, Keyring, load_secret

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _legacy_key(secret: bytes) -> bytes:
    return hmac.new(secret, b"convograph/seal", hashlib.sha256).digest()


def _legacy_unseal(key: bytes, sealed: str) -> str:
    raw = base64.urlsafe_b64decode(sealed.encode())
    nonce, tag, cipher = raw[:16], raw[16:32], raw[32:]
    expected = hmac.new(key, nonce + cipher, hashlib.sha256).digest()[:16]
    if not hmac.compare_digest(tag, expected):
        raise _other_secret()
    stream = hashlib.shake_256(key + nonce).digest(len(cipher))
    return bytes(a ^ b for a, b in zip(cipher, stream, strict=True)).decode("utf-8")


def _other_secret() -> SettingsError:
    # A SettingsError: the command stops with this one line (exit 2), not a traceback.
    return SettingsError(
        "CONVOGRAPH_SECRET: a token's owner key was sealed under another server secret: run "
        "the migration with the secret that made the tokens (CONVOGRAPH_SECRET or its secret "
        "file); nothing of this revision was changed"
    )


def _unseal(secret: bytes, sealed: str) -> str:
    try:
        return Keyring(secret).unseal(sealed)
    except ValueError:
        raise _other_secret() from None


def _legacy_seal(key: bytes, value: str) -> str:
    nonce = os.urandom(16)
    plain = value.encode("utf-8")
    stream = hashlib.shake_256(key + nonce).digest(len(plain))
    cipher = bytes(a ^ b for a, b in zip(plain, stream, strict=True))
    tag = hmac.new(key, nonce + cipher, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(nonce + tag + cipher).decode()


def _reseal(pick: Callable[[str], bool], convert: Callable[[bytes, str], str]) -> None:
    bind = op.get_bind()
    rows = [
        (token_id, sealed)
        for token_id, sealed in bind.execute(sa.text("SELECT id, owner_key_sealed FROM api_token"))
        if pick(sealed)
    ]
    if not rows:
        return
    config = op.get_context().config
    settings = (config.attributes.get("settings") if config else None) or Settings.from_env()
    secret = load_secret(settings)
    for token_id, sealed in rows:
        bind.execute(
            sa.text("UPDATE api_token SET owner_key_sealed = :sealed WHERE id = :id"),
            {"sealed": convert(secret, sealed), "id": token_id},
        )


def upgrade() -> None:
    _reseal(
        lambda sealed: not sealed.startswith(SEALED_PREFIX),
        lambda secret, sealed: Keyring(secret).seal(_legacy_unseal(_legacy_key(secret), sealed)),
    )


def downgrade() -> None:
    _reseal(
        lambda sealed: sealed.startswith(SEALED_PREFIX),
        lambda secret, sealed: _legacy_seal(_legacy_key(secret), _unseal(secret, sealed)),
    )
