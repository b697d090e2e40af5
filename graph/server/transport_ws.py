"""graphql-transport-ws with the per-token limits: each `subscribe` is charged to the
token's rate limit (rate_limit.py) and holds a slot under its cap (subscription_cap.py).
Before that, its token must still be live: a token revoked or expired since the socket
opened gets FORBIDDEN for the operation and the socket is closed with 4403.

Over the rate, the operation is answered with an `error` message (code RATE_LIMITED, with
`retryAfterSeconds`) and the socket stays open, as an HTTP request gets a 429. Past the
cap, likewise, with code LIMIT_EXCEEDED: the operations already running on the socket go
on (closing it would end them too, and graphql-ws clients take 4429 as fatal). Either way
the operation never runs.

The slot is given back when strawberry forgets the operation (the client's `complete`, the
server's `complete` or `error`, the socket closing) and, for every other way its task can
end, when the task is done (a task cancelled before it started runs no `finally`, but its
done callback runs): the protocol's order is kept (a `complete` then a `subscribe` on one
socket always fits under the cap) and no path keeps a slot.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable
from typing import Any

from graphql import GraphQLFormattedError
from starlette.websockets import WebSocketDisconnect
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ErrorMessage,
    Message,
    SubscribeMessage,
)

from graph.api.context import Context
from graph.domain.errors import ErrorCode
from graph.server.parameters import RefusedNumber
from graph.server.rate_limit import RateLimit, rate_limited_error
from graph.server.subscription_cap import Slot, SubscriptionSlots
from graph.server.ws_shapes import problem

logger = logging.getLogger("convograph.limits")

REVOKED_CLOSE_CODE = 4403
REVOKED_REASON = "token revoked or expired"
REVOKED: Any = {
    "message": "the token of this connection was revoked or has expired",
    "extensions": {"code": ErrorCode.FORBIDDEN.value},
}

# Strawberry's cap on the operations one socket runs at once (its GraphQL view's
# `max_subscriptions_per_connection`), refused here with a code and the number.
PER_SOCKET_REASON = "too many operations on this WebSocket (limit {}): open another one"

Handler = BaseGraphQLTransportWSHandler[Context, None]


class InitRefused(Exception):
    """Raised by the endpoint's on_ws_connect: `connection_init` is answered by closing the
    socket with `code` and `reason`. Strawberry's own rejection always says 4403 "Forbidden",
    which told a client neither what was wrong with its init nor that a database outage is
    worth a retry."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def over_a_limit(reason: str) -> GraphQLFormattedError:
    """The error of an operation refused for a limit (LIMIT_EXCEEDED), saying which."""
    return GraphQLFormattedError(
        message=reason, extensions={"code": ErrorCode.LIMIT_EXCEEDED.value}
    )


def limited_handler(
    rate_limit: RateLimit,
    slots: SubscriptionSlots,
    query_problem: Callable[[object], str | None],
) -> type[Handler]:
    """The handler class for GraphQLEndpoint, bound to the process's limits
    (`query_problem`: why a query text is refused before it is parsed, as over HTTP)."""

    class Limited(Handler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # The slots of the operations strawberry knows, by id.
            self.slots: dict[str, Slot] = {}

        async def handle_message(self, message: Message) -> None:
            wrong = problem(message)
            if wrong is not None:
                await self.handle_invalid_message(wrong)  # closes with 4400
                return
            await super().handle_message(message)

        async def handle_invalid_message(self, error_message: str) -> None:
            # Strawberry calls this inside its `except NonJsonMessageReceived`, whose cause
            # is the codec's: a frame of JSON with a number the service does not keep (past
            # 4,300 digits, 1e400) is told the limit, as over HTTP, not "must be valid JSON".
            refused = sys.exc_info()[1]
            if refused is not None and isinstance(refused.__cause__, RefusedNumber):
                error_message = refused.__cause__.msg
            await super().handle_invalid_message(error_message)

        async def handle_connection_init(self, message: Any) -> None:
            try:
                await super().handle_connection_init(message)
            except InitRefused as refused:
                await self._close(refused.code, refused.reason)

        async def _close(self, code: int, reason: str) -> None:
            # A client gone already (it hung up as it was refused) is no server error.
            with contextlib.suppress(WebSocketDisconnect, WebSocketDisconnected):
                await self.websocket.close(code=code, reason=reason)

        async def handle_subscribe(self, message: SubscribeMessage) -> None:
            principal = self.context.principal_
            if (
                not self.connection_acknowledged
                or principal is None
                or message["id"] in self.operations
            ):
                # Not authenticated yet, or a duplicate id: strawberry closes the socket.
                await super().handle_subscribe(message)
                return
            still_live = self.context.still_live
            if still_live is not None and not await still_live(principal):
                # HTTP refuses a revoked or expired token from the next request on; so does
                # a socket opened before, for a query or a mutation as for a subscription.
                await self._refuse(message, REVOKED)
                await self._close(REVOKED_CLOSE_CODE, REVOKED_REASON)
                return
            wait = rate_limit.take(principal.token_id)
            if wait:
                await self._refuse(message, rate_limited_error(rate_limit, wait))
                return
            too_big = query_problem(message["payload"].get("query"))
            if too_big is not None:
                await self._refuse(message, over_a_limit(too_big))
                return
            per_socket = self.max_subscriptions_per_connection
            if per_socket is not None and len(self.operations) >= per_socket:
                slots.refused_on_a_socket += 1
                # Strawberry's own check would refuse it with no code and no number.
                await self._refuse(message, over_a_limit(PER_SOCKET_REASON.format(per_socket)))
                return
            slot = slots.take(principal.token_id)
            if slot is None:
                logger.info(
                    "refused a WebSocket operation: token %s has %d operations running (limit %d)",
                    principal.token_id,
                    slots.held(principal.token_id),
                    slots.cap,
                )
                await self._refuse(message, over_a_limit(slots.reason))
                return
            try:
                await super().handle_subscribe(message)
            finally:
                operation = self.operations.get(message["id"])
                if operation is None or operation.task is None:
                    slot.release()  # refused by strawberry (a payload it does not take)
                else:
                    self.slots[message["id"]] = slot
                    operation.task.add_done_callback(self._on_done(message["id"], slot))

        async def _refuse(self, message: SubscribeMessage, error: Any) -> None:
            """Answer `message` with one `error` for its operation, which never runs."""
            await self.send_message(ErrorMessage(id=message["id"], type="error", payload=[error]))

        def forget_id(self, id: str) -> None:
            super().forget_id(id)
            self._release(id)

        async def cleanup_operation(self, operation_id: str) -> None:
            await super().cleanup_operation(operation_id)
            self._release(operation_id)

        def _on_done(self, operation_id: str, slot: Slot) -> Callable[[object], None]:
            def done(_: object) -> None:
                # The id may be in use again by then, by another operation with its own slot.
                if self.slots.get(operation_id) is slot:
                    del self.slots[operation_id]
                slot.release()

            return done

        def _release(self, operation_id: str) -> None:
            slot = self.slots.pop(operation_id, None)
            if slot is not None:
                slot.release()

    return Limited
