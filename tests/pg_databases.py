"""PostgreSQL databases for the tests: one per pytest worker, emptied before each test.

Making a database from the migrated template and dropping it after cost about 0.3 s a test,
a third of the PostgreSQL pass. Each worker now makes one database from the template, and
each test gets it as a fresh one would be: the sessions left on it ended, every row
deleted, the sequences restarted. A test that changed its schema (a migration test, a
dropped table) leaves a different fingerprint: the next test gets it made again from the
template.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid

import asyncpg

# The schema as the tests can change it: columns, indexes, triggers, functions, revision.
FINGERPRINT = """
SELECT md5(concat_ws('|',
  (SELECT string_agg(table_name || '.' || column_name || ':' || data_type || ':'
                     || coalesce(column_default, ''), ',' ORDER BY table_name, column_name)
     FROM information_schema.columns WHERE table_schema = 'public'),
  (SELECT string_agg(indexdef, ',' ORDER BY indexdef) FROM pg_indexes
     WHERE schemaname = 'public'),
  (SELECT string_agg(t.tgname, ',' ORDER BY t.tgname) FROM pg_trigger t
     JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND NOT t.tgisinternal),
  (SELECT string_agg(p.proname, ',' ORDER BY p.proname) FROM pg_proc p
     JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'),
  (SELECT string_agg(version_num, ',') FROM alembic_version)))
"""
END_OTHER_SESSIONS = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
# DELETE, not TRUNCATE: a test leaves a few rows, and TRUNCATE makes new files for every
# table and index (about 100 ms); replication_role skips the foreign keys' triggers.
EMPTY = """
SELECT 'SET LOCAL session_replication_role = replica; '
  || (SELECT string_agg('DELETE FROM ' || quote_ident(tablename) || ';', ' ')
        FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version')
  || coalesce((SELECT string_agg('ALTER SEQUENCE ' || quote_ident(sequencename) || ' RESTART;',
                                 ' ')
                 FROM pg_sequences WHERE schemaname = 'public'), '')
"""


def database_on(url: str, name: str) -> str:
    """The URL of database `name` on the server of `url`."""
    return f"{url.rsplit('/', 1)[0]}/{name}"


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg", "postgresql")


async def admin(url: str, sql: str) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE) on the server of `url`."""
    conn = await asyncpg.connect(_dsn(url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


class WorkerDatabase:
    """This worker's database on the server of `url`, made from `template`.

    Its reset runs on one connection kept across tests, on a loop of its own: a new
    connection per test cost a backend's start and cold catalog caches (the fingerprint's
    queries), a sizeable part of a PostgreSQL test's setup.
    """

    def __init__(self, url: str, template: str) -> None:
        self.url = url
        self.template = template
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.name = f"cg_test_{worker}_{uuid.uuid4().hex[:8]}"
        # With a loop factory the runner leaves the thread's current loop alone (pytest-asyncio's).
        self._runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        self._conn: asyncpg.Connection | None = None
        self._empty: str | None = None  # the statements that empty it, for this fingerprint
        self.fingerprint = self._runner.run(self._fingerprint_of(template))
        self._runner.run(admin(url, f'CREATE DATABASE "{self.name}" TEMPLATE "{template}"'))

    @property
    def database_url(self) -> str:
        return database_on(self.url, self.name)

    def reset(self) -> None:
        """Empty the database, or make it again when its schema is not the template's."""
        self._runner.run(self._reset())

    def drop(self) -> None:
        self._runner.run(self._drop())
        self._runner.close()

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(_dsn(self.database_url))
        return self._conn

    async def _disconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
        self._conn = None

    async def _drop(self) -> None:
        await self._disconnect()
        await admin(self.url, f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    async def _reset(self) -> None:
        try:
            conn = await self._connection()
            await conn.execute(END_OTHER_SESSIONS)
        except (OSError, asyncpg.InterfaceError):
            # A test ended every session on the database, this one too: connect again.
            await self._disconnect()
            conn = await self._connection()
            await conn.execute(END_OTHER_SESSIONS)
        try:
            same = await conn.fetchval(FINGERPRINT) == self.fingerprint
        except asyncpg.PostgresError:  # alembic_version itself was dropped
            same = False
        if same:
            if self._empty is None:
                self._empty = await conn.fetchval(EMPTY)
            async with conn.transaction():
                await conn.execute(self._empty)
                # The key store of encryption at rest (the default schema) goes with
                # the data it seals: a next test without encryption must not find keys.
                await conn.execute("DROP SCHEMA IF EXISTS convograph_keys CASCADE")
            return
        await self._drop()
        await admin(self.url, f'CREATE DATABASE "{self.name}" TEMPLATE "{self.template}"')

    async def _fingerprint_of(self, name: str) -> str:
        conn = await asyncpg.connect(_dsn(database_on(self.url, name)))
        try:
            found: str = await conn.fetchval(FINGERPRINT)
            return found
        finally:
            await conn.close()
