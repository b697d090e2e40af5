"""What lives as long as the process: built once, by `build_services`, and handed down."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from graph.settings import Settings
from graph.store import pending_shreds
from graph.store.db import Database
from graph.store.dictionary_training import DictionaryTraining
from graph.store.encryption import EncryptionError, check_encrypted, check_unencrypted
from graph.store.errors import database_problem, is_from_database, is_unavailable
from graph.store.events import EventBroker
from graph.store.events_sqlite import SQLiteBroker
from graph.store.keyring import Keyring, load_secret
from graph.store.search_index import SearchIndex
from graph.store.unit_of_work import UnitOfWork

logger = logging.getLogger("convograph.services")

# What the background work gets to finish at shutdown (a sweep under way, the search
# index's last batch): the requests in flight have had CONVOGRAPH_SHUTDOWN_TIMEOUT_SECONDS
# already, and an orchestrator's grace period is only a little longer than that.
BACKGROUND_STOP_SECONDS = 2.0


@dataclass(frozen=True)
class Services:
    settings: Settings
    db: Database
    keyring: Keyring
    broker: EventBroker
    search_index: SearchIndex
    training: DictionaryTraining
    uow: UnitOfWork

    async def check_encryption(self, *, serving: bool = True) -> None:
        """Refuse to go on with a wrong master key, or none for an encrypted database
        (EncryptionError, naming the setting). A database that is away is a warning while
        `serving` (the server waits for it), else its error (a command stops on it)."""
        try:
            if self.db.encryption is not None:
                await check_encrypted(self.db.encryption, engine=self.db.reader)
            else:
                await check_unencrypted(self.settings, engine=self.db.reader)
        except Exception as exc:
            # A refused master key counts as unavailable once serving (errors.py), but here
            # the key store answered: the start stops on it.
            if not serving or isinstance(exc, EncryptionError) or not is_unavailable(exc):
                raise
            # A server starts while its database is away (and says so on /readyz): the
            # master key is checked on the key store's first use instead.
            if self.db.encryption is not None:
                logger.warning(
                    "the key store is unreachable: the master key is checked on first use"
                )
            else:
                logger.warning("the database is unreachable: not checked for encrypted content")

    async def start(self) -> None:
        await self.check_encryption()
        if self.db.encryption is not None:
            # The keys a process stopped mid-delete left: destroyed before anything is served.
            try:
                await pending_shreds.finish_all(self.db)
            except Exception as exc:  # the database away, or not migrated yet
                reason = database_problem(exc) or str(exc)
                logger.warning("pending data key deletions are left to the sweep: %s", reason)
        await self.broker.start()
        if self.settings.quotas_on:
            try:
                await self.uow.count_usage()
            except Exception as exc:
                if not (is_unavailable(exc) or is_from_database(exc)):
                    raise
                # The server starts while its database is away or not migrated yet (its
                # tables missing), as it does without quotas, and says so on /readyz; the
                # first write counts once the database can.
                logger.warning(
                    "workspace usage not counted at start (%s): counted before the first write",
                    "the database is unreachable" if is_unavailable(exc) else type(exc).__name__,
                )
        if self.training.enabled:
            # The stored dictionary, for the first writes; training, if it is due, is left to
            # the check after the next write (the server answers meanwhile), as is a failure.
            try:
                await self.training.check(training=False)
            except Exception as exc:
                logger.info("the messages' compression dictionary is checked later: %s", exc)
                self.training.failed()

    async def stop(self, *, within: float = BACKGROUND_STOP_SECONDS) -> None:
        """Stop the background work, giving what it finishes at most `within` seconds."""
        await self.broker.stop()
        await self.search_index.stop(within=within)
        await self.training.stop()
        await self.db.dispose()


def build_services(settings: Settings) -> Services:
    db = Database(settings)
    keyring = Keyring(load_secret(settings))
    # In process on SQLite; on PostgreSQL, NOTIFY that every replica LISTENs to.
    queue = settings.subscriber_queue_size
    broker: EventBroker
    if settings.is_sqlite:
        broker = SQLiteBroker(db, queue_size=queue)
    else:
        # Imported here: a server on SQLite does not load asyncpg.
        from graph.store.events_postgres import PostgresBroker

        broker = PostgresBroker(db, settings.asyncpg_dsn, queue_size=queue)
    search_index = SearchIndex(db)
    training = DictionaryTraining(db)
    uow = UnitOfWork(
        db,
        keyring=keyring,
        settings=settings,
        broker=broker,
        search_index=search_index,
        training=training,
    )
    return Services(settings, db, keyring, broker, search_index, training, uow)
