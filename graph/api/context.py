"""The typed per-request context: who is asking, the store, and this operation's loaders.

Built by the server for each HTTP request, and once per WebSocket connection, whose
operations each run on a copy of it (`for_operation`): loaders and a read transaction of
their own. Reads go through the unit of work as the request's principal; a query reads one
read transaction (`reading`), so every field of its answer comes from one committed state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from graph.api.loaders import Loaders
from graph.domain.principal import Principal
from graph.services import Services
from graph.settings import Settings
from graph.store.repository import Repository
from graph.store.unit_of_work import Reads


class NotAuthenticated(Exception):
    """No principal on the context: the server authenticates before anything executes."""


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """What one GraphQL operation did, for the access log and the metrics."""

    name: str | None
    type: str
    outcome: str
    codes: list[str]  # of its errors and user errors, internal ones included
    duration: float
    principal: Principal | None


class OperationLog(Protocol):
    """Where the server records operations (graph/server/access_log.py)."""

    def subscription_started(self) -> None: ...

    def operation_finished(self, record: OperationRecord, *, subscription: bool) -> None: ...


# Whether the principal's token is still live (revocation); supplied by the server.
LivenessCheck = Callable[[Principal], Awaitable[bool]]


# Slots: a WebSocket holds one per operation (see for_operation), each subscription's for as
# long as it lasts.
@dataclass(slots=True)
class Context:
    services: Services
    request_id: str
    websocket: bool = False
    principal_: Principal | None = None
    # Set by strawberry from a WebSocket's connection_init payload.
    connection_params: dict[str, Any] | None = None
    # A WebSocket's Convograph-Owner upgrade header, for a token that comes in its
    # connection_init payload instead of the upgrade's Authorization header.
    owner_header: str | None = None
    # A WebSocket's Authorization upgrade header: a token in the connection_init payload too
    # must be the same one.
    authorization_header: str | None = None
    log: OperationLog | None = None
    still_live: LivenessCheck | None = None
    _loaders: Loaders | None = field(default=None, repr=False)
    _reads: Reads | None = field(default=None, repr=False)

    @property
    def principal(self) -> Principal:
        if self.principal_ is None:
            raise NotAuthenticated("not authenticated")
        return self.principal_

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def loaders(self) -> Loaders:
        if self._loaders is None:
            self._loaders = Loaders(self.read)
        return self._loaders

    def for_operation(self) -> Context:
        """This context for one operation of a WebSocket: the connection's operations run
        side by side, and each needs loaders and a read transaction that no other one sees
        (a loader's batch read in another operation's transaction, or another operation's
        state cached, would tear its answer). The rest (principal, services) is shared."""
        return replace(self, _loaders=None, _reads=None)

    def reset_loaders(self) -> None:
        """Forget what this context's loaders cached (a new operation, or after a write)."""
        self._loaders = None

    def read(self) -> AbstractAsyncContextManager[Repository]:
        """A repository for reading, as this request's principal."""
        if self._reads is not None:
            return self._reads.repository()
        return self.services.uow.read(self.principal)

    @property
    def one_state(self) -> bool:
        """Whether this operation's reads all see one committed state (a query)."""
        return self._reads is not None

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """The reads inside share one read transaction (one committed state)."""
        async with self.services.uow.read_transaction(self.principal) as reads:
            self._reads = reads
            try:
                yield
            finally:
                self._reads = None

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Repository]:
        """One unit of work as this request's principal (see store.unit_of_work)."""
        async with self.services.uow.write(self.principal) as repo:
            yield repo
        # Reads later in this request must not serve what the write just changed.
        self.reset_loaders()
