"""Turning a request or a WebSocket's upgrade away before any app runs for it.

A WebSocket closed before it is accepted gets no code or reason of its own: uvicorn answers
the handshake 403, which a client takes for bad credentials and does not retry. So a
refused upgrade is either answered over HTTP, with ASGI's denial-response extension where
the server offers it (uvicorn does: a 503 with Retry-After, say), or accepted and closed at
once with a code and reason a graphql-ws client understands.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from graph.server.ws_shapes import close_reason

TRY_AGAIN_LATER = 1013
INTERNAL_ERROR = 1011


async def refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    response: Response,
    reason: str,
    code: int = TRY_AGAIN_LATER,
) -> None:
    """`response` for a request; for a WebSocket upgrade, a denial with it where the server
    can send one, else the socket closed at once with `code` (1013, try again later, unless
    told otherwise) and `reason`."""
    if scope["type"] != "websocket":
        await response(scope, receive, send)
    elif "websocket.http.response" in scope.get("extensions", {}):
        await WebSocket(scope, receive, send).send_denial_response(response)
    else:
        await close_at_once(scope, receive, send, code, reason)


def close_for(failure: Response, unavailable: str) -> tuple[int, str]:
    """The close that says what the masked `failure` (errors.internal_error) says over HTTP:
    1013 (try again later) with `unavailable` for a database away (503), else 1011."""
    if failure.status_code == 503:
        return TRY_AGAIN_LATER, unavailable
    return INTERNAL_ERROR, "internal error"


async def close_at_once(scope: Scope, receive: Receive, send: Send, code: int, reason: str) -> None:
    """Accept the WebSocket (in graphql-transport-ws, if the client offered it) and close it
    with `code` and `reason`, shortened to what a close frame holds."""
    ws = WebSocket(scope, receive, send)
    offered = scope.get("subprotocols") or []
    chosen = GRAPHQL_TRANSPORT_WS_PROTOCOL if GRAPHQL_TRANSPORT_WS_PROTOCOL in offered else None
    await ws.accept(subprotocol=chosen)
    await ws.close(code=code, reason=close_reason(reason))
