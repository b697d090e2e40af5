"""The unit of work: the only way into the store.

`write(principal)` is one transaction: it commits when the block ends, rolls back if it
raises, and publishes the events of what it wrote once (and only if) it committed. A write
the database refuses for want of space, or that passes a workspace quota, is STORAGE_FULL
(see full_disk.py and quotas.py).
`read(principal)` reads on a connection of its own; `read_transaction(principal)` gives
one read transaction that several reads share (a GraphQL query's resolvers and loaders),
so that they all see one committed state. The GraphQL context, the retention sweep, the
CLI and the bench all come in here. `authenticate(token)` names a request's principal,
from the token cache while nothing can have changed its token (store/token_cache.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from sqlalchemy.exc import DBAPIError

from graph.domain.principal import SYSTEM, Principal
from graph.settings import Settings
from graph.store import event_log, pending_shreds, quotas, scope
from graph.store.db import Database, ReadTransaction
from graph.store.dictionary_training import DictionaryTraining
from graph.store.errors import is_storage_full
from graph.store.events import Event, EventBroker
from graph.store.keyring import Keyring
from graph.store.quotas import Quotas
from graph.store.repository import Repository
from graph.store.repository.tokens import Live
from graph.store.search_index import SearchIndex
from graph.store.sql import Sql
from graph.store.token_cache import TokenCache

logger = logging.getLogger("convograph.encryption")


class Reads:
    """The reads of one read transaction, for one principal."""

    def __init__(self, uow: UnitOfWork, transaction: ReadTransaction, principal: Principal) -> None:
        self._uow = uow
        self._transaction = transaction
        self.principal = principal

    @asynccontextmanager
    async def repository(self) -> AsyncIterator[Repository]:
        async with self._transaction.use() as conn:
            yield self._uow.repository(Sql(conn, self._uow.db), self.principal)


class UnitOfWork:
    def __init__(
        self,
        db: Database,
        *,
        keyring: Keyring,
        settings: Settings,
        broker: EventBroker,
        search_index: SearchIndex,
        training: DictionaryTraining,
    ) -> None:
        self.db = db
        self.keyring = keyring
        self.settings = settings
        self.broker = broker
        self.search_index = search_index
        self.training = training
        self.quotas = Quotas(settings)
        self.token_cache = TokenCache()
        # Set while the usage count a start with quotas owes has not succeeded yet (the
        # database was away then): every write counts first.
        self._uncounted = False
        self._counting = asyncio.Lock()

    def repository(self, sql: Sql, principal: Principal) -> Repository:
        return Repository(sql, principal, keyring=self.keyring, settings=self.settings)

    async def authenticate(self, token: str) -> Principal | None:
        """The principal of a live token; None for an unknown, revoked or expired one."""
        digest = self.keyring.token_digest(token)
        # Taken before the read: whatever commits meanwhile leaves the entry stale.
        stamp = self.token_cache.stamp(self.db.outside_changes())
        if stamp is not None:
            principal = self.token_cache.get(digest, stamp, datetime.now(UTC))
            if principal is not None:
                return principal
        try:
            live = await self._live_token(digest)
        except DBAPIError as exc:
            # A connection the database ended since its last use (a failover, a pooler's
            # restart: only idle ones are pinged) fails its first statement, and that failure
            # renews the pool. This is the request's first statement, and a read: asked once
            # more, on a new connection, instead of refusing the request.
            if not exc.connection_invalidated:
                raise
            live = await self._live_token(digest)
        if live is None:
            return None
        if stamp is not None:
            self.token_cache.put(digest, live, stamp)
        return live.principal

    async def _live_token(self, digest: str) -> Live | None:
        async with self.read(SYSTEM) as repo:
            return await repo.tokens.live_token(digest)

    @asynccontextmanager
    async def read(self, principal: Principal) -> AsyncIterator[Repository]:
        async with self.db.read() as conn:
            yield self.repository(Sql(conn, self.db), principal)

    @asynccontextmanager
    async def read_transaction(self, principal: Principal) -> AsyncIterator[Reads]:
        async with self.db.read_transaction() as transaction:
            yield Reads(self, transaction, principal)

    @asynccontextmanager
    async def write(self, principal: Principal) -> AsyncIterator[Repository]:
        """One transaction as `principal`; FORBIDDEN for a principal that may not write."""
        scope.check_write(principal)
        if self._uncounted:
            await self._count()
        # Marked before the transaction commits, so that no search can read between its
        # commit and this mark (see SearchIndex.written).
        self.search_index.written()
        self.training.written()
        events: list[Event] = []

        def committed() -> None:
            # Called only once the block below has run: `repo` is its repository.
            if repo.tokens_changed:
                self.token_cache.changed()
            # Published in the order the transactions commit (the order of their positions).
            self.broker.publish(events)

        try:
            async with self.db.write(on_commit=committed) as conn:
                sql = Sql(conn, self.db)
                repo = self.repository(sql, principal)
                yield repo
                # Last but the log: a quota's row stays locked the shortest time.
                await self.quotas.settle(sql, repo.usage)
                # Numbered, logged and notified in the transaction: in the log (and sent to
                # the other replicas) if and only if it commits.
                events.extend(
                    await event_log.record(sql, repo.events, repo.positions, broker=self.broker)
                )
                if shreds := self._shredded(repo):
                    # Committed with the delete, so that a stop before the keys' end leaves
                    # the record for the next start or sweep to finish.
                    await pending_shreds.record(sql, shreds)
        except Exception as exc:
            # Out of space: rolled back, so nothing was written; the caller says so.
            if is_storage_full(exc):
                raise self.db.full_disk.refusal() from None
            raise
        self.db.full_disk.wrote()
        if shreds := self._shredded(repo):
            # Only now that the delete has committed: a key without data is harmless, data
            # without its key is lost.
            try:
                await pending_shreds.finish(self.db, shreds)
            except Exception:
                # The delete stands (committed): its record stays for the sweep to finish.
                logger.exception(
                    "the data keys of a committed delete could not be destroyed yet; the "
                    "next sweep (or start) destroys them"
                )

    def _shredded(self, repo: Repository) -> list[str]:
        """The data keys `repo`'s deletes destroy (none without encryption)."""
        if "shredded" not in repo.__dict__ or self.db.encryption is None:
            return []
        return repo.shredded

    async def count_usage(self) -> int:
        """Count every workspace's usage again (a process starting with quotas on, since
        one without them does not count); how many workspaces. Until a count has succeeded,
        every write counts first: a server starts while its database is away, and its
        first write must not grow a stale count."""
        self._uncounted = True
        return await self._count()

    async def _count(self) -> int:
        async with self._counting:
            if not self._uncounted:
                return 0  # another write counted meanwhile
            async with self.db.write() as conn:
                counted = await quotas.recount_all(Sql(conn, self.db))
            self._uncounted = False
            return counted
