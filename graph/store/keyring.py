"""Keyed digests and sealing of secrets at rest.

Tokens and owner keys never reach the database in clear text: lookups use an
HMAC-SHA256 digest under the server secret. The owner key of an API token is also sealed
(AES-GCM under a key derived from the server secret) so that `token list` and
`viewer.ownerKey` can show it without storing it in clear.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from graph.settings import Settings

TOKEN_PREFIX = "cvg_"
SEALED_PREFIX = "v2."
# What a sealed value is for: a sealed value cannot be passed off as another kind.
SEAL_CONTEXT = b"convograph/owner-key"


class Keyring:
    """Holds the server secret and derives every digest and seal from it."""

    def __init__(self, secret: bytes) -> None:
        self._digest_key = hmac.new(secret, b"convograph/digest", hashlib.sha256).digest()
        self._aead = AESGCM(hmac.new(secret, b"convograph/seal-aes-gcm", hashlib.sha256).digest())
        self._unsealed: dict[str, str] = {}

    def digest(self, purpose: str, value: str) -> str:
        message = purpose.encode() + b"\0" + value.encode("utf-8", "surrogatepass")
        # The one-shot form: OpenSSL's HMAC in one call, no HMAC object (every request's
        # token is digested to be looked up).
        return hmac.digest(self._digest_key, message, "sha256").hex()

    def owner_digest(self, owner_key: str) -> str:
        return self.digest("owner", owner_key)

    def token_digest(self, token: str) -> str:
        return self.digest("token", token)

    def seal(self, value: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, value.encode("utf-8"), SEAL_CONTEXT)
        return SEALED_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def unseal(self, sealed: str) -> str:
        """The value `seal` sealed; ValueError when it was sealed under another secret."""
        if not sealed.startswith(SEALED_PREFIX):
            raise ValueError("not a value sealed by this version of convograph")
        raw = base64.urlsafe_b64decode(sealed[len(SEALED_PREFIX) :].encode())
        try:
            return self._aead.decrypt(raw[:12], raw[12:], SEAL_CONTEXT).decode("utf-8")
        except InvalidTag:
            raise ValueError("sealed value was not made with this server secret") from None

    def unseal_cached(self, sealed: str) -> str:
        """`unseal`, remembered: every request of a token unseals the same value."""
        cached = self._unsealed.get(sealed)
        if cached is None:
            cached = self.unseal(sealed)
            if len(self._unsealed) >= 4096:
                self._unsealed.clear()
            self._unsealed[sealed] = cached
        return cached


class MissingSecret(RuntimeError):
    pass


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_lock_token() -> str:
    return secrets.token_urlsafe(24)


def load_secret(settings: Settings) -> bytes:
    """The server secret: CONVOGRAPH_SECRET, else a file created on first use (mode 0600)."""
    if settings.secret:
        return settings.secret.encode()
    if not settings.is_sqlite and not settings.secret_file:
        # Replicas (and the CLI) must share one secret; a file generated beside one
        # process would silently make the others' tokens unusable.
        raise MissingSecret(
            "CONVOGRAPH_SECRET (or CONVOGRAPH_SECRET_FILE) must be set when the database is "
            "PostgreSQL: every replica and the CLI must use the same secret"
        )
    path: Path = settings.resolved_secret_file
    if path.exists() or not settings.is_sqlite:
        # On PostgreSQL the file is the secret every replica was given: never generated.
        return _read_secret(path)
    try:
        return _generate_secret(path)
    except OSError as exc:
        # Not the database's failure, which is what a command would otherwise call it.
        raise MissingSecret(
            f"CONVOGRAPH_SECRET_FILE: cannot create the secret {path}: "
            f"{exc.strerror or exc} (or set CONVOGRAPH_SECRET)"
        ) from None


def _generate_secret(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32).encode()
    # Written apart, then linked into place: a process starting beside this one reads the
    # whole secret or finds no file, never an empty one.
    written = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(value)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(written, path)
    except FileExistsError:  # another process put its own first: that one is the secret
        return _read_secret(path)
    finally:
        written.unlink()
    return value


def _read_secret(path: Path) -> bytes:
    try:
        value = path.read_bytes().strip()
    except OSError as exc:
        raise MissingSecret(f"CONVOGRAPH_SECRET_FILE: cannot read {path}: {exc.strerror}") from None
    if not value:
        raise MissingSecret(f"CONVOGRAPH_SECRET_FILE: {path} is empty")
    return value
