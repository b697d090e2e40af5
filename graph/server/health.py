"""/healthz (the process is up; says how the database is) and /readyz (send me traffic).

Ready means the database answers AND its schema is at the newest migration this code
knows, or at a later one: a replica started against a database nobody has migrated yet
would fail every request that touches a new column, while one of the previous release
started during a rollout serves the newer schema (every migration keeps it working). Both
say `"storage": "full"` while the database refuses writes for want of space (reads still
work, so a full disk keeps the replica in rotation: taken out, it would never see the write
that finds space again). With encryption at rest, ready also means the master key opens the
key store: one `keys rotate` rotated away from, or refused once the key store could be
asked (it was away at start), leaves rotation until the server is restarted with the right
key.

On PostgreSQL, ready also means the replica hears events: a replica whose LISTEN connection
has been down for more than `LISTENER_GRACE_SECONDS` would leave its live subscriptions
silent, so it leaves rotation until the connection is back (a restart of the database, or a
listener killed, is back within about a second: no flapping). `/healthz` says `"events":
"listening"` or `"down"` there, and `"local"` on SQLite, where no connection carries them.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from graph.store.db import Database
from graph.store.events import EventBroker
from graph.store.migration_state import BEHIND, MigrationState

UNKNOWN = "unknown"
LISTENER_GRACE_SECONDS = 5.0


class Health:
    def __init__(
        self, db: Database, broker: EventBroker, migrations: MigrationState | None = None
    ) -> None:
        self.db = db
        self.broker = broker
        self.migrations = MigrationState(db) if migrations is None else migrations

    @property
    def _storage(self) -> str:
        return "full" if self.db.full_disk.is_full else "ok"

    @property
    def _events(self) -> str:
        down_for = self.broker.listener_down_for()
        return "local" if down_for is None else "listening" if down_for == 0 else "down"

    async def _master_key_refused(self) -> bool:
        encryption = self.db.encryption
        assert encryption is not None
        try:
            return await encryption.refusal() is not None
        except Exception:  # the key store away: what the database's check says meanwhile
            return False

    async def healthz(self, request: Request) -> JSONResponse:
        body = {
            "status": "ok",
            "database": "down",
            "migrations": UNKNOWN,
            "storage": self._storage,
            "events": self._events,
        }
        if await self.db.ping():
            body["database"] = "up"
            try:
                body["migrations"] = await self.migrations.current()
            except ConnectionError:
                body["database"] = "down"
        return JSONResponse(body)

    async def readyz(self, request: Request) -> JSONResponse:
        if not await self.db.ping():
            return JSONResponse({"status": "database unreachable"}, 503)
        try:
            state = await self.migrations.current()
        except ConnectionError:
            return JSONResponse({"status": "database unreachable"}, 503)
        if state == BEHIND:
            return JSONResponse(
                {"status": "database not migrated: run `convograph migrate`"}, status_code=503
            )
        if self.db.encryption is not None and await self._master_key_refused():
            # Details in the log, not here: a probe's answer is not for everyone.
            return JSONResponse(
                {"status": "master key refused by the key store: see the log"}, status_code=503
            )
        if (self.broker.listener_down_for() or 0.0) > LISTENER_GRACE_SECONDS:
            return JSONResponse(
                {"status": "event listener down: live subscriptions would hear nothing"}, 503
            )
        return JSONResponse({"status": "ready", "storage": self._storage})
