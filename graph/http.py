"""The GraphQL endpoint over HTTP and WebSocket: strawberry's ASGI view, with our edges.

Authentication, body limits and JSON errors for malformed requests live here, so
that the resolvers only ever see an authenticated, well-formed request.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types.unset import UnsetType

from . import jsoncodec
from .auth import authorization_from_params, principal_for
from .context import Context, Services
from .ide import graphiql_html

logger = logging.getLogger("convograph.http")


def error_response(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"errors": [{"message": message}]}, status_code=status, headers=headers)


class BodyTooLarge(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
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


class GraphQLEndpoint(GraphQL[Context, None]):
    def __init__(self, services: Services, **kwargs: Any) -> None:
        super().__init__(
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            graphql_ide="graphiql" if services.settings.graphiql else None,
            **kwargs,
        )
        self.services = services

    # -- edges ---------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        request_id = uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = request_id
        request = Request(scope, receive)
        if self._wants_ide(request):
            await self._respond(Request(scope, receive), scope, receive, send)
            return
        principal = await principal_for(self.services, request.headers.get("authorization"))
        if principal is None:
            response: Response = error_response(
                401, "missing, unknown or revoked bearer token",
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
        except ConnectionError:
            return

        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
            await send(message)

        await self._respond(Request(scope, replay), scope, replay, send_with_id)

    async def _respond(self, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await self.run(request)
        except HTTPException as exc:
            response = error_response(exc.status_code, exc.reason)
        await response(scope, receive, send)

    def _wants_ide(self, request: Request) -> bool:
        return (
            request.method == "GET"
            and "text/html" in request.headers.get("accept", "")
            and "query" not in request.query_params
        )

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict((k.decode().lower(), v.decode("latin-1")) for k, v in scope["headers"])
        scope.setdefault("state", {})["request_id"] = uuid.uuid4().hex[:16]
        if "authorization" in headers:
            principal = await principal_for(self.services, headers["authorization"])
            if principal is None:
                ws = WebSocket(scope, receive, send)
                protocols = scope.get("subprotocols") or []
                chosen = GRAPHQL_TRANSPORT_WS_PROTOCOL if GRAPHQL_TRANSPORT_WS_PROTOCOL in (
                    protocols
                ) else None
                await ws.accept(subprotocol=chosen)
                await ws.close(code=4401, reason="Unauthorized")
                return
            scope["state"]["principal"] = principal
        await super().__call__(scope, receive, send)

    # -- strawberry hooks ------------------------------------------------------

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        state = request.scope.get("state", {})
        return Context(
            services=self.services, request=request, response=response,
            request_id=state.get("request_id", "-"), principal_=state.get("principal"),
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

    def decode_json(self, data: str | bytes) -> object:
        try:
            return jsoncodec.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            # Strawberry turns this into a 400 "Unable to parse request body as JSON".
            raise json.JSONDecodeError(str(exc), "", 0) from None

    def encode_json(self, data: object) -> bytes:
        return jsoncodec.dumps(data)
