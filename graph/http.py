"""The GraphQL endpoint over HTTP and WebSocket: strawberry's ASGI view, with our edges.

Authentication, body limits and JSON errors for malformed requests live here, so
that the resolvers only ever see an authenticated, well-formed request.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLRequestData
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types.unset import UnsetType

from . import jsoncodec
from .auth import authorization_from_params, principal_for
from .context import Context, Services
from .ide import graphiql_html
from .masking import UNAVAILABLE, is_unavailable
from .request_id import new_request_id

logger = logging.getLogger("convograph.http")


def error_response(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"errors": [{"message": message}]}, status_code=status, headers=headers)


def internal_error(exc: Exception, request_id: str) -> JSONResponse:
    """A failure outside the resolvers, masked as the schema masks errors inside them."""
    unavailable = is_unavailable(exc)
    logger.error("request %s failed before execution", request_id, exc_info=exc)
    error = {
        "message": UNAVAILABLE if unavailable else "Unexpected error.",
        "extensions": {
            "code": "DATABASE_UNAVAILABLE" if unavailable else "INTERNAL",
            "requestId": request_id,
        },
    }
    return JSONResponse({"errors": [error]}, status_code=503 if unavailable else 500)


def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    # Strawberry answers a mutation over GET with 400; the method, not the request, is
    # what is wrong, so say 405 and name the method that works.
    if request.method == "GET" and isinstance(exc.__cause__, InvalidOperationTypeError):
        return error_response(405, exc.reason, Allow="POST")
    return error_response(exc.status_code, exc.reason)


class BodyTooLarge(Exception):
    pass


class BodyTooSlow(Exception):
    pass


# A body must keep coming: after a grace period, at least this many bytes per second on
# average (Kestrel's MinRequestBodyDataRate rule). A client that trickles its body (slow
# loris) is refused with 408 instead of holding a request open for ever.
BODY_GRACE_SECONDS = 5.0
BODY_MIN_BYTES_PER_SECOND = 1024


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    start = asyncio.get_running_loop().time()
    try:
        async with asyncio.timeout_at(start + BODY_GRACE_SECONDS) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ConnectionError("client went away")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
                deadline.reschedule(start + BODY_GRACE_SECONDS + size / BODY_MIN_BYTES_PER_SECOND)
    except TimeoutError:
        raise BodyTooSlow from None


class TextFrames(ASGIWebSocketAdapter):
    """graphql-transport-ws messages go out as text frames.

    Strawberry sends bytes from encode_json as binary frames, and browser clients
    (graphql-ws, GraphiQL's subscriptions) parse text frames only.
    """

    async def send_json(self, message: Any) -> None:
        encoded = self.view.encode_json(message)
        try:
            await self.ws.send_text(encoded if isinstance(encoded, str) else encoded.decode())
        except WebSocketDisconnect as exc:
            raise WebSocketDisconnected from exc


class GraphQLEndpoint(GraphQL[Context, None]):
    websocket_adapter_class = TextFrames

    def __init__(self, services: Services, **kwargs: Any) -> None:
        super().__init__(
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            graphql_ide="graphiql" if services.settings.graphiql else None,
            **kwargs,
        )
        self.services = services

    # -- edges ---------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # RequestIdMiddleware (app.py) has put the request id in the scope's state.
        state = scope.setdefault("state", {})
        if "request_id" not in state:  # (setdefault would make one every time)
            state["request_id"] = new_request_id()
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if self._wants_ide(request):
            await self._respond(request, scope, receive, send)
            return
        try:
            principal = await principal_for(self.services, request.headers.get("authorization"))
        except Exception as exc:
            await internal_error(exc, scope["state"]["request_id"])(scope, receive, send)
            return
        if principal is None:
            response: Response = error_response(
                401,
                "missing, unknown or revoked bearer token",
                **{"WWW-Authenticate": 'Bearer realm="convograph"'},
            )
            await response(scope, receive, send)
            return
        scope["state"]["principal"] = principal
        limit = self.services.settings.max_body_bytes
        length = request.headers.get("content-length", "")
        try:
            if length.isdigit() and int(length) > limit:
                raise BodyTooLarge
            body = await read_body(receive, limit)
        except BodyTooLarge:
            await error_response(413, f"request body exceeds {limit} bytes")(scope, receive, send)
            return
        except BodyTooSlow:
            response = error_response(408, "request body arrived too slowly", Connection="close")
            await response(scope, receive, send)
            return
        except ConnectionError:
            return

        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._respond(Request(scope, replay), scope, replay, send)

    async def _respond(self, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await self.run(request)
        except HTTPException as exc:
            response = _http_error(request, exc)
        except Exception as exc:
            response = internal_error(exc, scope["state"]["request_id"])
        await response(scope, receive, send)

    async def parse_http_body(
        self, request: AsyncHTTPRequestAdapter
    ) -> GraphQLRequestData | list[GraphQLRequestData]:
        data = await super().parse_http_body(request)
        # graphql-core's error locations scan the text from its start, and comments are
        # lexed but not counted as tokens: the text's length is bounded before parsing.
        limit = self.services.settings.max_query_chars
        for item in data if isinstance(data, list) else [data]:
            if item.query is not None and len(item.query) > limit:
                raise HTTPException(
                    413, f"query text exceeds {limit} characters; pass large values as variables"
                )
        return data

    def _wants_ide(self, request: Request) -> bool:
        return (
            self.services.settings.graphiql
            and request.method == "GET"
            and "text/html" in request.headers.get("accept", "")
            and "query" not in request.query_params
        )

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict((k.decode().lower(), v.decode("latin-1")) for k, v in scope["headers"])
        if "authorization" in headers:
            principal = await principal_for(self.services, headers["authorization"])
            if principal is None:
                ws = WebSocket(scope, receive, send)
                protocols = scope.get("subprotocols") or []
                chosen = (
                    GRAPHQL_TRANSPORT_WS_PROTOCOL
                    if GRAPHQL_TRANSPORT_WS_PROTOCOL in (protocols)
                    else None
                )
                await ws.accept(subprotocol=chosen)
                await ws.close(code=4401, reason="Unauthorized")
                return
            scope["state"]["principal"] = principal
        await super().__call__(scope, receive, send)

    # -- strawberry hooks ------------------------------------------------------

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        state = request.scope.get("state", {})
        return Context(
            services=self.services,
            request=request,
            response=response,
            request_id=state.get("request_id", "-"),
            principal_=state.get("principal"),
        )

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        if context.principal_ is None:
            authorization = authorization_from_params(context.connection_params)
            principal = await principal_for(self.services, authorization)
            if principal is None:
                raise ConnectionRejectionError()
            context.principal_ = principal
        return await super().on_ws_connect(context)

    async def render_graphql_ide(self, request: Request) -> Response:
        return HTMLResponse(graphiql_html(endpoint=request.url.path))

    def parse_json(self, data: str | bytes) -> Any:
        value = super().parse_json(data)
        # Strawberry assumes an object (or a batch list) and fails with a 500 on anything else.
        if not isinstance(value, dict | list):
            raise HTTPException(400, "expected a JSON object")
        return value

    def decode_json(self, data: str | bytes) -> object:
        try:
            return jsoncodec.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            # Strawberry turns this into a 400 "Unable to parse request body as JSON".
            # RecursionError: the exact-number parser gives up on JSON nested ~1000 deep,
            # where orjson's own limit says ValueError.
            raise json.JSONDecodeError(str(exc), "", 0) from None

    def encode_json(self, data: object) -> bytes:
        return jsoncodec.dumps(data)
