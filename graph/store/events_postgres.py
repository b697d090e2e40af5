"""Events across replicas: PostgreSQL LISTEN/NOTIFY.

Each write transaction NOTIFYs its events; PostgreSQL delivers a notification only when
(and if) the transaction commits, to every listening replica, this one included. Payloads
above NOTIFY's 8000-byte limit are parked in the `event_outbox` table and the notification
carries only their id. Notifications sent while the LISTEN connection was down are lost:
once it listens again (and when a notification cannot be read), every subscriber reads
what it missed from the durable log (`EventBroker.lost_track`) before anything heard after.
The LISTEN connection is pinged every few seconds: a cut that sends no reset (a firewall
forgetting an idle connection, a host gone) leaves it open and silent, and TCP would take
hours to notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import orjson
from sqlalchemy import insert, select

from graph.domain.events import EventKind
from graph.store.db import Database
from graph.store.encryption import conversation_ref
from graph.store.events import QUEUE_SIZE, Event, EventBroker
from graph.store.rows import Builder, dump
from graph.store.sql import Sql
from graph.store.tables import Delegation, Message, event_outbox

logger = logging.getLogger("convograph.notify")

CHANNEL = "convograph_events"
NOTIFY_LIMIT = 7900  # PostgreSQL refuses payloads of 8000 bytes or more
RECONNECT_SECONDS = 1.0
LISTENER_NAME = "convograph events"  # its application_name, in pg_stat_activity
PING_SECONDS = 5.0  # how often a LISTEN connection with nothing to say is checked
PING_TIMEOUT_SECONDS = 5.0  # no answer by then: the connection is taken for dead
# Which backend a connection is (a pid alone may be reused by a later backend).
BACKEND = "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
END_BACKEND = """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE pid = $1 AND backend_start = $2"""
# Backends given up on and not ended yet, at most (the oldest forgotten: PostgreSQL's own
# timeouts end them in the end).
_ABANDONED_KEPT = 10
_MESSAGES = Builder(Message)
_DELEGATIONS = Builder(Delegation)


def encode_event(event: Event) -> bytes:
    # orjson writes the event (a dataclass), its enums and datetimes natively; the models
    # inside it go as their column values.
    return orjson.dumps(event, default=dump)


def decode_event(raw: bytes | str) -> Event:
    e = orjson.loads(raw)
    return Event(
        kind=EventKind(e["kind"]),
        conversation_id=e["conversation_id"],
        ancestry=tuple(e["ancestry"]),
        workspace_type=e["workspace_type"],
        workspace_id=e["workspace_id"],
        version=e["version"],
        at=datetime.fromisoformat(e["at"]),
        messages=None if e["messages"] is None else tuple(_MESSAGES.load(m) for m in e["messages"]),
        delegation=None if e["delegation"] is None else _DELEGATIONS.load(e["delegation"]),
        position=e["position"],
        # Absent from a replica not upgraded yet.
        count_without_messages=e.get("count_without_messages"),
    )


class PostgresBroker(EventBroker):
    """Delivers every replica's committed events to this replica's subscribers."""

    def __init__(self, db: Database, dsn: str, *, queue_size: int = QUEUE_SIZE) -> None:
        super().__init__(queue_size=queue_size)
        self._db = db
        self._dsn = dsn
        self._task: asyncio.Task[None] | None = None
        self._consumer: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._down_since: float | None = time.monotonic()  # not listening yet
        self.connections_lost = 0
        # Backends of connections given up on, to end from the next one that works.
        self._abandoned: list[asyncpg.Record] = []
        self._stopping = False
        # Notifications are handled one at a time, in arrival order, even when one of
        # them needs a round trip to load a parked payload.
        self._inbox: asyncio.Queue[str] = asyncio.Queue()

    async def notices(self, sql: Sql, events: Sequence[Event]) -> list[tuple[str, str]]:
        out = []
        for event in events:
            payload = encode_event(event)
            if len(payload) > NOTIFY_LIMIT:
                parked_text: str | bytes = payload.decode()
                if sql.encryption is not None:  # it carries the event's messages
                    parked_text = await sql.encryption.seal(
                        conversation_ref(event.root_id), payload.decode()
                    )
                parked = await sql.rows(
                    insert(event_outbox)
                    .values(payload=parked_text, created_at=event.at)
                    .returning(event_outbox.c.id)
                )
                payload = orjson.dumps({"ref": parked.scalars()[0]})
            out.append((CHANNEL, payload.decode()))
        return out

    def publish(self, events: Iterable[Event]) -> None:
        """Nothing to do here: the events come back through LISTEN once committed."""

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen_forever())
        self._consumer = asyncio.create_task(self._consume())
        # Subscribers that connect right after start-up must not miss events.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self._connected.wait()

    async def stop(self) -> None:
        self._stopping = True  # its connection ends now: no loss to count
        for task in (self._task, self._consumer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await super().stop()

    def listener_down_for(self) -> float | None:
        since = self._down_since
        return 0.0 if since is None else time.monotonic() - since

    async def _listen_forever(self) -> None:
        while True:
            conn: asyncpg.Connection | None = None
            backend: asyncpg.Record | None = None
            try:
                conn = await asyncpg.connect(
                    self._dsn, timeout=10, server_settings={"application_name": LISTENER_NAME}
                )
                lost = asyncio.Event()
                conn.add_termination_listener(lambda _c, lost=lost: lost.set())
                # Each step of the set-up bounded like a ping: a connection that goes silent
                # now would otherwise hold the listener until TCP gives up. Which backend it
                # is, first: one given up on once it listens is to be ended.
                async with asyncio.timeout(PING_TIMEOUT_SECONDS):
                    backend = await conn.fetchrow(BACKEND)
                async with asyncio.timeout(PING_TIMEOUT_SECONDS):
                    await conn.add_listener(CHANNEL, self._on_notify)
                async with asyncio.timeout(PING_TIMEOUT_SECONDS):
                    await self._end_abandoned(conn)
                # Before any notification heard from now on is handed out (the consumer waits
                # for `_connected`): what committed while nobody listened is in the log.
                self.lost_track()
                self._connected.set()
                self._down_since = None
                if await self._until_lost(conn, lost):
                    backend = None  # it ended: nothing of it is left to end
                logger.warning("event listener connection lost; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("event listener cannot connect (%s); retrying", type(exc).__name__)
            finally:
                if backend is not None and not self._stopping:
                    self._abandoned.append(backend)
                    del self._abandoned[:-_ABANDONED_KEPT]
                self._connected.clear()
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    if not self._stopping:
                        self.connections_lost += 1
                if conn is not None and not conn.is_closed():
                    # Not close(): it waits for the server's answer, which a dead one never sends.
                    conn.terminate()
            await asyncio.sleep(RECONNECT_SECONDS)

    @staticmethod
    async def _until_lost(conn: asyncpg.Connection, lost: asyncio.Event) -> bool:
        """Until the connection ends (True), or stops answering its pings (False)."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PING_SECONDS):
                    await lost.wait()
                return True
            try:
                async with asyncio.timeout(PING_TIMEOUT_SECONDS):
                    await conn.fetchval("SELECT 1")
            except (TimeoutError, asyncpg.PostgresError, OSError, asyncpg.InterfaceError):
                if lost.is_set():  # it ended during the ping
                    return True
                logger.warning("event listener connection does not answer")
                return False

    async def _end_abandoned(self, conn: asyncpg.Connection) -> None:
        """End the backends of connections given up on, if they still run: the server may
        not know a connection is gone, and a listener that reads nothing holds back the
        cleanup of PostgreSQL's notification queue (NOTIFY fails once it is full). Each
        is forgotten once its end was tried on a working connection."""
        while self._abandoned:
            abandoned = self._abandoned[0]
            try:
                await conn.execute(END_BACKEND, abandoned["pid"], abandoned["backend_start"])
            except asyncpg.PostgresError as exc:  # not allowed to: PostgreSQL's timeouts will
                logger.warning("cannot end the silent listener's backend (%s)", exc)
            self._abandoned.pop(0)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        # With nobody subscribed here, there is no one to decode it for. A subscriber that
        # arrives later misses nothing: what committed before it subscribed, it reads from
        # the event log (resuming) or was never owed (a new stream starts at its subscribe).
        if self.active:
            self._inbox.put_nowait(payload)

    async def _consume(self) -> None:
        while True:
            notification = await self._inbox.get()
            await self._connected.wait()
            try:
                payload: str | None = notification
                if notification.startswith('{"ref"'):
                    payload = await self._load(orjson.loads(notification)["ref"])
                if not payload:
                    raise LookupError("a parked event is gone")
                super().publish([decode_event(payload)])
            except Exception:
                logger.exception("cannot deliver an event notification; read from the log")
                self.lost_track()

    async def _load(self, ref: int) -> str | None:
        async with self._db.read() as conn:
            found = await Sql(conn, self._db).rows(
                select(event_outbox.c.payload).where(event_outbox.c.id == ref)
            )
            return found.values[0][0] if found.values else None
