"""The GraphQL endpoint: strawberry's ASGI app, with convograph's edges around it.

Authentication (auth.py, as middleware on this route), the per-token rate limit
(rate_limit.py; over WebSockets, transport_ws.py, with the cap on subscriptions), body
limits, the media type of the answer (negotiation.py, response_status.py), the request
parameters' types (parameters.py) and JSON errors for malformed requests live here, so that
the resolvers only ever see an authenticated, well-formed request within its limits.
"""

from __future__ import annotations

import functools
import json
import logging
from datetime import timedelta
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketDisconnected as ClosedSocket
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.http.types import QueryParams
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UnsetType

from graph.api.context import Context
from graph.api.execution.masking import VALIDATION_FAILED
from graph.domain import jsoncodec
from graph.server.access_log import observation_of
from graph.server.auth import (
    OWNER_HEADER,
    REFUSED,
    UNAVAILABLE,
    Liveness,
    Refusal,
    Refused,
    TokenBackend,
    Unavailable,
    authorization_from_params,
    bearer,
    header_text,
    owner_from_params,
    principal_of,
    same_owner,
    unauthorized,
)
from graph.server.body import (
    JSON_MEDIA_TYPE,
    BodyTooLarge,
    BodyTooSlow,
    ClientGone,
    read_body,
    unsupported_body,
)
from graph.server.denial import close_at_once, close_for, refuse
from graph.server.errors import error_response, internal_error
from graph.server.ide import asks_for_page, graphiql_html, page_headers
from graph.server.negotiation import GRAPHQL_RESPONSE_JSON, JSON, SERVED, negotiate
from graph.server.parameters import (
    RefusedNumber,
    check_operation_name,
    decode_query_params,
    query_text_problem,
)
from graph.server.rate_limit import RateLimit, too_many_requests
from graph.server.request_id import request_id_of
from graph.server.response_status import UNAVAILABLE_RETRY_AFTER, shape
from graph.server.sockets import OpenSockets
from graph.server.subscription_cap import SubscriptionSlots
from graph.server.transport_ws import (
    REVOKED_CLOSE_CODE,
    REVOKED_REASON,
    InitRefused,
    limited_handler,
)
from graph.server.ws_shapes import close_reason
from graph.services import Services

REVOKED_STATE = "revoked"
# The scope key of the media type negotiated for the response (negotiation.py).
MEDIA_TYPE = "convograph.media_type"
# The specification's own type says its encoding, as it recommends.
GRAPHQL_RESPONSE_CONTENT_TYPE = f"{GRAPHQL_RESPONSE_JSON}; charset=utf-8"
SUBSCRIPTIONS_OVER_WEBSOCKET = (
    "subscriptions are served over a WebSocket at this path (graphql-transport-ws), not over HTTP"
)
# A client gone from a WebSocket: one debug line (TextFrames).
ws_logger = logging.getLogger("convograph.ws")
NOT_ACCEPTABLE = f"Accept allows none of the media types served here: {', '.join(SERVED)}"
# Strawberry's words for it are "Can't get GraphQL operation type".
NO_OPERATION = "the document holds no operation to run (only fragments)"
# Automatic persisted queries (a hash in `extensions.persistedQuery`, no `query`): the
# message and code by which Apollo's and urql's clients learn that a server keeps none,
# and send the query's text from then on.
PERSISTED_QUERY_NOT_SUPPORTED = "PersistedQueryNotSupported"


class PersistedQueryRefused(Exception):
    """A request that names a persisted query by its hash and sends no query text."""


def _http_error(request: Request, exc: HTTPException) -> Response:
    refused = exc.__cause__
    if isinstance(refused, PersistedQueryRefused):
        return error_response(400, exc.reason, code="PERSISTED_QUERY_NOT_SUPPORTED")
    if isinstance(refused, CannotGetOperationTypeError):
        # A request error like any other (an operation that cannot be chosen): 200 with
        # `"data": null` in application/json, 400 in graphql-response+json.
        message = exc.reason if refused.operation_name else NO_OPERATION
        error = {"message": message, "extensions": {"code": VALIDATION_FAILED}}
        body: Any = {"data": None, "errors": [error]}
        status = shape(request.scope.get(MEDIA_TYPE, JSON), body)  # drops `data` for 400
        return JSONResponse(body, status_code=status)
    if isinstance(refused, InvalidOperationTypeError):
        if refused.operation_type is OperationType.SUBSCRIPTION:
            return error_response(400, SUBSCRIPTIONS_OVER_WEBSOCKET)
        # Strawberry answers a mutation over GET with 400; the method, not the request, is
        # what is wrong, so say 405 and name the method that works.
        if request.method == "GET":
            return error_response(405, exc.reason, Allow="POST")
    if exc.status_code == 405:  # a method strawberry does not serve (HEAD): say which it does
        return error_response(405, exc.reason, Allow="GET, POST")
    return error_response(exc.status_code, exc.reason)


def _in_media_type(response: Response, scope: Scope) -> Response:
    """An error response in the negotiated media type: its body is a GraphQL response."""
    if scope.get(MEDIA_TYPE) == GRAPHQL_RESPONSE_JSON:
        response.headers["content-type"] = GRAPHQL_RESPONSE_CONTENT_TYPE
    return response


class TextFrames(ASGIWebSocketAdapter):
    """graphql-transport-ws messages go out as text frames.

    Strawberry sends bytes from encode_json as binary frames, and browser clients
    (graphql-ws, GraphiQL's subscriptions) parse text frames only. Once a subscription was
    ended because its token was revoked or expired (its error sent, then `complete`), the
    connection is closed: nothing more is served to that token. A close's reason is shortened
    to what a close frame holds (ws_shapes.close_reason).

    A client that went away is no failure of the server: what would still go to it (an
    operation's answer, an event, a close) is dropped, with one debug line per socket, and
    the handler's receive loop, which learns of the disconnect, ends every operation.
    Raised instead, the failed send of an operation's task was logged by Strawberry as
    "Exception in worker task" with a traceback, and the failed close of a refused
    connection_init as uvicorn's "Exception in ASGI application" (tests/test_ws_client_gone.py).
    What would go out after the socket was closed by the server is dropped the same way.
    """

    gone = False

    async def send_json(self, message: Any) -> None:
        if self.gone:
            return
        encoded = self.view.encode_json(message)
        try:
            await self.ws.send_text(encoded if isinstance(encoded, str) else encoded.decode())
            if self.ws.scope["state"].get(REVOKED_STATE) and message.get("type") == "complete":
                await self.ws.close(code=REVOKED_CLOSE_CODE, reason=REVOKED_REASON)
        except WebSocketDisconnect:
            self._client_gone(str(message.get("type")))
        except ClosedSocket:
            pass  # closed by the server already (a cap, a revoked token, a bad message)

    async def close(self, code: int, reason: str) -> None:
        if self.gone:
            return
        try:
            await self.ws.close(code=code, reason=close_reason(reason))
        except WebSocketDisconnect:
            self._client_gone(f"close ({code})")
        except ClosedSocket:
            pass

    def _client_gone(self, what: str) -> None:
        if self.gone:  # another send that was waiting failed first
            return
        self.gone = True
        ws_logger.debug(
            "WebSocket client gone: its %s and whatever follows are dropped (request %s)",
            what,
            request_id_of(self.ws.scope),
            extra={"request_id": request_id_of(self.ws.scope)},
        )


BUSY = "too many open connections: retry later"


def _busy() -> JSONResponse:
    return JSONResponse({"errors": [{"message": BUSY}]}, 503, headers={"Retry-After": "1"})


def _another_token(context: Context) -> bool:
    """Whether the connection_init payload names another token than the upgrade's header (a
    value that names no token, empty or null, as some clients send, is no other token; one
    not written `Bearer …`, the bare token or another scheme's, is the text it holds)."""
    value = authorization_from_params(context.connection_params)
    if not isinstance(value, str) or not value.strip():
        return False
    given = bearer(value) or value.strip()
    return given != bearer(context.authorization_header)


class GraphQLEndpoint(GraphQL[Context, None]):
    websocket_adapter_class = TextFrames

    def __init__(
        self,
        services: Services,
        backend: TokenBackend,
        sockets: OpenSockets | None = None,
        **kwargs: Any,
    ) -> None:
        settings = services.settings
        super().__init__(
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            graphql_ide="graphiql" if settings.graphiql else None,
            # A socket that has not said connection_init by then is closed (4408), as a
            # connection whose headers do not end is: not a minute, Strawberry's default.
            connection_init_wait_timeout=timedelta(seconds=settings.header_timeout_seconds),
            **kwargs,
        )
        # WebSockets may hold all but a tenth of the process's connections (uvicorn counts
        # them in its limit but does not refuse an upgrade): the rest, at least one from a
        # limit of two up, stays for HTTP (health checks among it).
        limit = settings.max_connections
        self.websocket_cap = max(1, limit - max(1, limit // 10))
        self.services = services
        self.backend = backend
        self.liveness = Liveness(services.uow)
        # Closed with 1001 when the server shuts down (shutdown.py).
        self.sockets = OpenSockets() if sockets is None else sockets
        # Why a query text is refused before it is parsed: the same bounds over HTTP and
        # over a WebSocket.
        self.query_problem = functools.partial(
            query_text_problem,
            max_chars=settings.max_query_chars,
            max_lines=settings.max_query_tokens,
        )
        # The per-token limits, shared by HTTP and every WebSocket of the process.
        self.rate_limit = RateLimit.from_settings(services.settings)
        self.subscription_slots = SubscriptionSlots(services.settings.max_subscriptions_per_token)
        self.graphql_transport_ws_handler_class = limited_handler(
            self.rate_limit,
            self.subscription_slots,
            self.query_problem,
        )

    # -- edges ---------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if self._wants_ide(request):
            if request.method == "HEAD":  # the page's headers (strawberry serves GET and POST)
                await (await self.render_graphql_ide(request))(scope, receive, send)
            else:
                await self._respond(request, scope, receive, send)
            return
        principal = principal_of(request)
        if principal is None:
            await unauthorized()(scope, receive, send)
            return
        media_type = negotiate(request.headers.get("accept"))
        if media_type is None:
            await error_response(406, NOT_ACCEPTABLE)(scope, receive, send)
            return
        scope[MEDIA_TYPE] = media_type
        # Before the body is read: a refused request costs the server next to nothing.
        wait = self.rate_limit.take(principal.token_id)
        if wait:
            await _in_media_type(too_many_requests(self.rate_limit, wait), scope)(
                scope, receive, send
            )
            return
        if request.method == "POST":
            content_type = request.headers.get("content-type")
            unsupported = unsupported_body(content_type, request.headers.get("content-encoding"))
            if unsupported is not None:
                # Before the body is read: neither decoded nor inflated, whatever it holds.
                response = error_response(415, unsupported, **{"Accept-Encoding": "identity"})
                await _in_media_type(response, scope)(scope, receive, send)
                return
            if content_type != JSON_MEDIA_TYPE:
                # Strawberry looks for its own spelling of the media type in the header's text.
                scope["headers"] = [
                    (name, JSON_MEDIA_TYPE.encode()) if name == b"content-type" else (name, value)
                    for name, value in scope["headers"]
                ]
        limit = self.services.settings.max_body_bytes
        length = request.headers.get("content-length", "")
        try:
            if length.isdigit() and int(length) > limit:
                raise BodyTooLarge
            body = await read_body(receive, limit)
        except BodyTooLarge:
            response = error_response(413, f"request body exceeds {limit} bytes")
            await _in_media_type(response, scope)(scope, receive, send)
            return
        except BodyTooSlow:
            response = error_response(408, "request body arrived too slowly", Connection="close")
            await _in_media_type(response, scope)(scope, receive, send)
            return
        except ClientGone:
            # No answer: nobody is left to read it, and nothing ran (the access log says 499).
            if (observation := observation_of(scope)) is not None:
                observation.client_gone = True
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
            response = _in_media_type(_http_error(request, exc), scope)
        except Exception as exc:
            response = internal_error(exc, request_id_of(scope))
        await response(scope, receive, send)

    async def parse_http_body(
        self, request: AsyncHTTPRequestAdapter
    ) -> GraphQLRequestData | list[GraphQLRequestData]:
        data = await super().parse_http_body(request)
        for item in data if isinstance(data, list) else [data]:
            if (
                item.query is None
                and isinstance(item.extensions, dict)
                and "persistedQuery" in item.extensions
            ):
                raise HTTPException(400, PERSISTED_QUERY_NOT_SUPPORTED) from PersistedQueryRefused()
            check_operation_name(item)
            problem = self.query_problem(item.query)
            if problem is not None:
                raise HTTPException(413, problem)
        return data

    def parse_query_params(self, params: QueryParams) -> dict[str, Any]:
        return decode_query_params(params, self.decode_json)

    def _wants_ide(self, request: Request) -> bool:
        return self.services.settings.graphiql and asks_for_page(request)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = scope.get("user")
        if isinstance(refused, Refused):
            if refused.denial is not None:
                await refuse(scope, receive, send, refused.denial, refused.reason, refused.code)
            else:
                await close_at_once(scope, receive, send, refused.code, refused.reason)
            return
        if len(self.sockets) >= self.websocket_cap:
            await refuse(scope, receive, send, _busy(), BUSY)
            return
        with self.sockets.watch(send) as watched:
            await super().__call__(scope, receive, watched)

    # -- strawberry hooks ------------------------------------------------------

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        websocket = isinstance(request, WebSocket)
        liveness = self.liveness

        async def still_live(principal: Any) -> bool:
            live = await liveness(principal)
            if not live:
                # TextFrames closes the connection once the subscription's error is sent.
                request.scope["state"][REVOKED_STATE] = True
            return live

        return Context(
            services=self.services,
            request_id=request_id_of(request.scope),
            websocket=websocket,
            principal_=principal_of(request),
            log=observation_of(request.scope),
            still_live=still_live if websocket else None,
            owner_header=request.headers.get(OWNER_HEADER) if websocket else None,
            authorization_header=request.headers.get("authorization") if websocket else None,
        )

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        principal = context.principal_
        try:
            acting_for = owner_from_params(context.connection_params)
            header = header_text(context.owner_header)
            if acting_for is not None and header is not None and not same_owner(header, acting_for):
                raise Refusal(400, f"{OWNER_HEADER} differs from the handshake's")
            if principal is None:
                # The token comes in the payload: the upgrade's owner header is its too
                # (with the token in the upgrade, the authentication backend applied it).
                authorization = authorization_from_params(context.connection_params)
                if acting_for is None:
                    acting_for = header
                try:
                    principal = await self.backend.principal(authorization, acting_for)
                except Unavailable as failed:
                    # Logged as an HTTP request's failed check is; the client is told to
                    # retry (1013) when the database was away.
                    masked = internal_error(failed.cause, context.request_id)
                    raise InitRefused(*close_for(masked, UNAVAILABLE)) from None
                if principal is None:
                    raise InitRefused(4403, REFUSED)
            elif context.still_live is not None and not await context.still_live(principal):
                # The upgrade's token was revoked or expired before its connection_init: no
                # acknowledgement, as HTTP refuses it from the next request on.
                raise InitRefused(4403, REFUSED)
            elif _another_token(context):
                # The payload's token was ignored: the socket ran as the upgrade's, another
                # owner's or scope's (a proxy's token added to the upgrade), without a word.
                raise Refusal(400, "Authorization differs from the handshake's")
            elif acting_for is not None and principal.acting_service is None:
                principal = self.backend.act_for(principal, acting_for)
            elif acting_for is not None and not same_owner(acting_for, principal.owner):
                raise Refusal(400, f"{OWNER_HEADER} differs from the handshake's")
        except Refusal as refused:
            raise InitRefused(4403, refused.message) from None
        context.principal_ = principal
        return await super().on_ws_connect(context)

    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        sub_response = await super().get_sub_response(request)
        # What create_response needs to know of the request: the media type to answer in.
        sub_response.media_type = request.scope.get(MEDIA_TYPE, JSON)
        return sub_response

    def create_response(
        self,
        response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse],
        sub_response: Response,
    ) -> Response:
        media_type = sub_response.media_type
        if media_type == JSON or not isinstance(response_data, dict):
            return super().create_response(response_data, sub_response)
        status = shape(GRAPHQL_RESPONSE_JSON, response_data)
        response = super().create_response(response_data, sub_response)
        response.status_code = status
        response.headers["content-type"] = GRAPHQL_RESPONSE_CONTENT_TYPE
        if status == 503:
            response.headers["retry-after"] = UNAVAILABLE_RETRY_AFTER
        return response

    async def render_graphql_ide(self, request: Request) -> Response:
        page = graphiql_html(endpoint=request.url.path)
        return HTMLResponse(page, headers=page_headers(page))

    def parse_json(self, data: str | bytes) -> Any:
        try:
            value = super().parse_json(data)
        except HTTPException as exc:
            refused = exc.__cause__
            if isinstance(refused, RefusedNumber):
                # JSON text, but with a number the service does not hold: say which limit,
                # not "Unable to parse request body as JSON".
                raise HTTPException(400, refused.msg) from None
            if isinstance(refused, json.JSONDecodeError):
                # Strawberry's words, then the parser's: where, and what (a trailing comma,
                # a lone surrogate `\ud800`, bytes that are not UTF-8).
                raise HTTPException(400, f"{exc.reason}: {refused.msg}") from None
            raise
        # Strawberry assumes an object (or a batch list) and fails with a 500 on anything else.
        if not isinstance(value, dict | list):
            raise HTTPException(400, "expected a JSON object")
        return value

    def decode_json(self, data: str | bytes) -> object:
        try:
            return jsoncodec.loads(data)
        except jsoncodec.NumberOutOfRange as exc:
            raise RefusedNumber(str(exc), "", 0) from None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            # Strawberry turns this into a 400 "Unable to parse request body as JSON".
            # RecursionError: the exact-number parser gives up on JSON nested ~1000 deep,
            # where orjson's own limit says ValueError.
            raise json.JSONDecodeError(str(exc), "", 0) from None

    def encode_json(self, data: object) -> bytes:
        return jsoncodec.dumps(data)
