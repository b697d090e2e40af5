"""What lives as long as the process: built once, by `build_services`, and handed down."""

from __future__ import annotations

from dataclasses import dataclass

from graph.settings import Settings
from graph.store.db import Database
from graph.store.encryption import check_unencrypted
from graph.store.events import EventBroker
from graph.store.events_postgres import PostgresBroker
from graph.store.keyring import Keyring, load_secret
from graph.store.search_index import SearchIndex
from graph.store.unit_of_work import UnitOfWork


@dataclass(frozen=True)
class Services:
    settings: Settings
    db: Database
    keyring: Keyring
    broker: EventBroker
    search_index: SearchIndex
    uow: UnitOfWork

    async def check_encryption(self) -> None:
        """Refuse to go on with a wrong master key, or none for an encrypted database
        (EncryptionError, naming the setting)."""
        if self.db.encryption is not None:
            await self.db.encryption.ready()
        else:
            await check_unencrypted(self.settings)

    async def start(self) -> None:
        await self.check_encryption()
        await self.broker.start()
        if self.settings.quotas_on:
            await self.uow.count_usage()

    async def stop(self) -> None:
        await self.broker.stop()
        await self.search_index.stop()
        await self.db.dispose()


def build_services(settings: Settings) -> Services:
    db = Database(settings)
    keyring = Keyring(load_secret(settings))
    # In process on SQLite; on PostgreSQL, NOTIFY that every replica LISTENs to.
    queue = settings.subscriber_queue_size
    broker = (
        EventBroker(queue_size=queue)
        if settings.is_sqlite
        else PostgresBroker(db, settings.asyncpg_dsn, queue_size=queue)
    )
    search_index = SearchIndex(db)
    uow = UnitOfWork(
        db, keyring=keyring, settings=settings, broker=broker, search_index=search_index
    )
    return Services(settings, db, keyring, broker, search_index, uow)
