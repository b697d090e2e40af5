"""Authentication: a bearer token in, the Principal on the scope (HTTP and WebSocket alike).

`TokenBackend` is a Starlette AuthenticationBackend: the request's `Authorization: Bearer`
token's keyed digest names the Principal (workspace, owner, scopes), the only source of
ownership. A request without the header is anonymous (the endpoints decide what anonymous
may do: a WebSocket may still authenticate in its `connection_init` payload); a header
with a token that is unknown, revoked or expired is refused with 401 (a WebSocket is
accepted and closed with 4401, which graphql-ws clients understand). A SERVICE token may
name the owner it acts for in `Convograph-Owner: TYPE:KEY` (or that key of the
connection_init payload): the request then runs as that owner of the token's workspace.
The header with any other token is 403, a malformed one 400, and two lines of either header
with different values 400: never silently ignored (a WebSocket is accepted and closed with
4403, the reason saying which).
`Liveness` answers whether an open subscription's token is still live (neither revoked
nor expired).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response

from graph.domain.principal import SYSTEM, Principal, owner_key_problem, parse_owner
from graph.server.denial import close_for
from graph.server.errors import error_response, internal_error
from graph.store.unit_of_work import UnitOfWork

logger = logging.getLogger("convograph.auth")

REFUSED = "missing, unknown, revoked or expired bearer token"
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="convograph"'}
OWNER_HEADER = "Convograph-Owner"
UNAVAILABLE = "the token could not be checked: the database is unavailable; retry shortly"
OWNER_KEY = OWNER_HEADER.lower()
NOT_A_SERVICE = f"only a SERVICE token may act for an owner ({OWNER_HEADER}); this token is not one"


class Caller(BaseUser):
    """The authenticated principal, as Starlette's `request.user`."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return f"{self.principal.workspace_key} {self.principal.owner_type.value.lower()}"


class Refused(BaseUser):
    """A WebSocket whose handshake carried credentials we do not accept: a token (closed with
    4401), or an owner header (4403, the reason saying why, as HTTP's 403 or 400 does)."""

    def __init__(
        self, code: int = 4401, reason: str = REFUSED, denial: Response | None = None
    ) -> None:
        self.code = code
        self.reason = reason
        # An HTTP answer for the upgrade instead (the token could not be checked), where the
        # server can send one; else the close says it (server/denial.py).
        self.denial = denial

    @property
    def is_authenticated(self) -> bool:
        return False


class Refusal(AuthenticationError):
    """Credentials we understand and refuse, with the status that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Unavailable(AuthenticationError):
    """The token could not be checked: the database failed, not the credentials."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


V = TypeVar("V")


def bearer(value: Any) -> str | None:
    """The token of an `Authorization: Bearer …` value, or None."""
    if not isinstance(value, str):
        return None
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 512:
        return None
    return token


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


def owner_from_params(params: Mapping[str, Any] | None) -> Any:
    """The owner a graphql-transport-ws client acts for, from its connection_init payload:
    the Convograph-Owner key in any case, at the top or in the payload's `headers` object,
    wherever the token may come from too. Refusal (400) for two different values."""
    if not isinstance(params, Mapping):
        return None
    found = _named(params, OWNER_KEY)
    headers = params.get("headers")
    if isinstance(headers, Mapping):
        found += _named(headers, OWNER_KEY)
    return _one(found, OWNER_HEADER, same_owner)


def same_owner(one: object, other: object) -> bool:
    """Whether two Convograph-Owner values name one owner: the type in any case, as it is
    taken (`USER:7` is `user:7`); values that name no owner, when they are equal."""
    if not isinstance(one, str) or not isinstance(other, str):
        return one == other
    try:
        return parse_owner(one) == parse_owner(other)
    except ValueError:
        return one == other


def header_text(value: str | None) -> str | None:
    """A header's value as its UTF-8 text: Starlette reads header bytes as Latin-1, which
    would make `Convograph-Owner: user:é` another owner than the same name sent in a
    WebSocket's payload. Refusal (400) for bytes that are not UTF-8."""
    if value is None or value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(400, "a header must be UTF-8 text") from None


def same_authorization(one: str, other: str) -> bool:
    """Whether two Authorization values name one token (the scheme in any case, spaces
    around the token as `bearer` takes them); values that name none, when they are equal."""
    token = bearer(one)
    return token == bearer(other) if token is not None else one == other


def one_header(conn: HTTPConnection, name: str, same: Callable[[str, str], bool]) -> str | None:
    """The request's header `name` (Authorization, Convograph-Owner); Refusal (400) for two
    lines that are not the `same` token or owner (`same_authorization`, `same_owner`), as for
    two owners in a connection_init payload: the first was taken, without a word, and the
    request ran as that token or owner."""
    return _one(conn.headers.getlist(name), name, same)


def _one(values: Sequence[V], name: str, same: Callable[[V, V], bool]) -> V | None:
    """The first of `values` (None for none); Refusal (400) unless every one is the `same`."""
    if any(not same(value, values[0]) for value in values):
        raise Refusal(400, f"{name} is given twice, with different values")
    return values[0] if values else None


def _named(params: Mapping[Any, Any], key: str) -> list[Any]:
    return [v for k, v in params.items() if isinstance(k, str) and k.lower() == key]


class TokenBackend(AuthenticationBackend):
    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    async def principal(self, authorization: Any, acting_for: Any = None) -> Principal | None:
        """The principal of an Authorization value (and Convograph-Owner value), or None
        when it names no live token; Refusal for an owner the token may not act for;
        Unavailable when the token could not be checked (the upgrade and connection_init
        alike tell a client to retry that)."""
        try:
            token = bearer(authorization)
            if token is None:
                return None
            principal = await self.uow.authenticate(token)
            if principal is None or acting_for is None:
                return principal
            return self.act_for(principal, acting_for)
        except Refusal:
            raise
        except Exception as exc:
            raise Unavailable(exc) from exc

    def act_for(self, service: Principal, acting_for: Any) -> Principal:
        """`service` acting for the owner `acting_for` names; Refusal if it may not."""
        if not service.is_service:
            raise Refusal(403, NOT_A_SERVICE)
        try:
            owner_type, key = parse_owner(acting_for if isinstance(acting_for, str) else "")
        except ValueError as exc:
            raise Refusal(400, f"{OWNER_HEADER}: {exc}") from None
        if (problem := owner_key_problem(key)) is not None:
            raise Refusal(400, f"{OWNER_HEADER}: {problem}")
        return service.acting_for(owner_type, key, self.uow.keyring.owner_digest(key))

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        try:
            return await self._authenticate(conn)
        except Refusal as refused:
            if conn.scope["type"] != "websocket":
                raise
            # Refused in the handshake, the socket is never accepted: uvicorn answers 403 with
            # no reason, which a graphql-ws client sees as a connection that failed. Accepted
            # and closed, as a refused connection_init is, it learns why.
            return AuthCredentials(), Refused(4403, refused.message)
        except Unavailable as failed:
            if conn.scope["type"] != "websocket":
                raise
            # Refused in the handshake, this too was a bare 403: a client took the database's
            # outage for a bad token and stopped. The upgrade gets HTTP's 503 and Retry-After.
            answer = refusal(conn, failed)
            code, reason = close_for(answer, UNAVAILABLE)
            return AuthCredentials(), Refused(code, reason, denial=answer)

    async def _authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        authorization = one_header(conn, "Authorization", same_authorization)
        acting_for = header_text(one_header(conn, OWNER_HEADER, same_owner))
        if authorization is None:
            return None  # anonymous, header or not: the endpoint asks for credentials
        principal = await self.principal(authorization, acting_for)
        if principal is None:
            if conn.scope["type"] == "websocket":
                return AuthCredentials(), Refused()
            raise AuthenticationError(REFUSED)
        return AuthCredentials([s.value.lower() for s in principal.scopes]), Caller(principal)


def refusal(conn: HTTPConnection, exc: AuthenticationError) -> Response:
    """What a refused request gets: 401 (or 403, 400) with a JSON body saying why, or the
    masked error of a failure."""
    if isinstance(exc, Unavailable):
        return internal_error(exc.cause, conn.scope.get("state", {}).get("request_id", "-"))
    if isinstance(exc, Refusal):
        return error_response(exc.status, exc.message)
    return unauthorized()


def principal_of(conn: HTTPConnection) -> Principal | None:
    user = conn.scope.get("user")
    return user.principal if isinstance(user, Caller) else None


def unauthorized() -> JSONResponse:
    return error_response(401, REFUSED, **CHALLENGE)


class Liveness:
    """Whether tokens are still live: asked by every open subscription before each event
    it delivers (and now and then while idle). The questions asked in one pass of the event
    loop are answered by one query."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow
        self._waiting: dict[str, list[asyncio.Future[bool]]] = {}
        self._answering: asyncio.Task[None] | None = None

    async def __call__(self, principal: Principal) -> bool:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._waiting.setdefault(principal.token_id, []).append(future)
        if self._answering is None:
            self._answering = loop.create_task(self._answer())
        return await future

    async def _answer(self) -> None:
        await asyncio.sleep(0)  # the other subscribers of this event ask in this pass too
        waiting, self._waiting = self._waiting, {}
        self._answering = None
        try:
            async with self.uow.read(SYSTEM) as repo:
                live = await repo.tokens.live(list(waiting))
        except Exception:
            # A failed check ends no stream: the next event asks again.
            logger.warning("checking that tokens are live failed", exc_info=True)
            live = set(waiting)
        for token_id, futures in waiting.items():
            for future in futures:
                if not future.done():
                    future.set_result(token_id in live)
