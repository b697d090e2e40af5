"""The typed per-request context: the principal, the services and this request's loaders."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from .crypto import Keyring
from .db import Database, Snapshot
from .errors import forbidden
from .events import EventBroker
from .loaders import Loaders
from .principal import Principal
from .repository import Repository
from .search_index import SearchIndex
from .settings import Settings


@dataclass
class Services:
    """What lives as long as the process: built once in the app's lifespan."""

    settings: Settings
    db: Database
    keyring: Keyring
    broker: EventBroker
    search_index: SearchIndex


class NotAuthenticated(Exception):
    """No principal on the request (guarded by the auth middleware; here for WebSockets)."""


@dataclass
class Context:
    services: Services
    request: Request | WebSocket
    response: Response | WebSocket | None
    request_id: str
    principal_: Principal | None = None
    connection_params: dict[str, Any] | None = None
    _loaders: Loaders | None = field(default=None, repr=False)
    _snapshot: Snapshot | None = field(default=None, repr=False)

    @property
    def principal(self) -> Principal:
        if self.principal_ is None:
            raise NotAuthenticated("not authenticated")
        return self.principal_

    @property
    def loaders(self) -> Loaders:
        if self._loaders is None:
            self._loaders = Loaders(self)
        return self._loaders

    def reset_loaders(self) -> None:
        self._loaders = None

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Repository]:
        if self._snapshot is not None:
            async with self._snapshot.use() as conn:
                yield self._repository(conn)
            return
        async with self.services.db.read() as conn:
            yield self._repository(conn)

    @asynccontextmanager
    async def one_snapshot(self) -> AsyncIterator[None]:
        """The reads inside share one connection and one read transaction (see Snapshot).

        For a query over HTTP (its context is its own): a WebSocket's context is shared by
        the connection's concurrent operations, and a mutation's reads must see its writes.
        """
        async with self.services.db.snapshot() as snapshot:
            self._snapshot = snapshot
            try:
                yield
            finally:
                self._snapshot = None

    def _repository(self, conn: Any) -> Repository:
        return Repository(
            conn, self.principal, keyring=self.services.keyring, settings=self.settings
        )

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Repository]:
        """A unit of work: commits or rolls back as one, then publishes its events."""
        principal = self.principal
        if not principal.can_write:
            raise forbidden()
        self.services.search_index.written()
        async with self.services.db.write() as conn:
            repo = self._repository(conn)
            yield repo
            await self.services.broker.stage(conn, repo.events)
        self.services.broker.publish(repo.events)
        # Reads later in this request must not serve what the write just changed.
        self.reset_loaders()
