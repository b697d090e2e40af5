"""Every request gets an id: in `scope["state"]`, in the logs and in an `x-request-id` header.

It is what a client quotes when it reports a problem, and what the logs are searched by,
so the refusals (401, 413, …) and the health checks carry it too.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"


def new_request_id() -> str:
    # 64 random bits as 16 hex digits; os.urandom directly, not the UUID object that
    # uuid4() builds around the same bytes only to have all but its hex text dropped.
    return os.urandom(8).hex()


def request_id_of(scope: Scope) -> str:
    """The request's id (RequestIdMiddleware put it there)."""
    return str(scope.get("state", {}).get("request_id", "-"))


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine: a WebSocket keeps no frame of it alive (see in_flight.py).
        if scope["type"] not in ("http", "websocket"):
            return self.app(scope, receive, send)
        request_id = new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        if scope["type"] == "websocket":
            return self.app(scope, receive, send)
        return self._with_header(scope, receive, send, request_id)

    async def _with_header(
        self, scope: Scope, receive: Receive, send: Send, request_id: str
    ) -> None:
        header = (HEADER, request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        await self.app(scope, receive, send_with_id)
