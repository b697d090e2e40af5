"""Bearer token -> Principal, in one place for HTTP and WebSocket requests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .context import Services
from .principal import Principal
from .tokens import authenticate


def bearer(value: Any) -> str | None:
    """The token of an `Authorization: Bearer …` value, or None."""
    if not isinstance(value, str):
        return None
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 512:
        return None
    return token


async def principal_for(services: Services, authorization: Any) -> Principal | None:
    token = bearer(authorization)
    if token is None:
        return None
    async with services.db.read() as conn:
        return await authenticate(conn, keyring=services.keyring, token=token)


def authorization_from_params(params: Mapping[str, Any] | None) -> Any:
    """The token a graphql-transport-ws client sent in its connection_init payload."""
    if not isinstance(params, Mapping):
        return None
    for key in ("Authorization", "authorization"):
        if key in params:
            return params[key]
    headers = params.get("headers")
    if isinstance(headers, Mapping):
        return headers.get("Authorization") or headers.get("authorization")
    return None
