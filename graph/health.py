"""/healthz (the process is up; says how the database is) and /readyz (send me traffic).

Ready means the database answers AND its schema is at the newest migration this code
knows: a replica started against a database nobody has migrated yet would fail every
request that touches a new column. Once the revision matched it is not queried again
(migrations only move forward while a process runs), so the check then costs one ping.
"""

from __future__ import annotations

import functools

from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from starlette.requests import Request
from starlette.responses import JSONResponse

from .db import Database
from .migrate import MIGRATIONS_DIR

# What migration_state() answers.
AT_HEAD = "head"
BEHIND = "behind"
UNKNOWN = "unknown"  # the migration scripts could not be read


@functools.cache
def head_revisions(migrations_dir: str) -> frozenset[str] | None:
    """The head revision(s) of the migration scripts, or None when they cannot be read."""
    config = Config()
    config.set_main_option("script_location", migrations_dir)
    try:
        return frozenset(ScriptDirectory.from_config(config).get_heads())
    except CommandError:
        return None


class Health:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._at_head = False

    async def migration_state(self) -> str:
        """AT_HEAD, BEHIND or UNKNOWN; database errors other than a missing table propagate."""
        if self._at_head:
            return AT_HEAD
        heads = head_revisions(str(MIGRATIONS_DIR))
        if heads is None:
            return UNKNOWN
        try:
            async with self.db.read() as conn:
                rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
                current = frozenset(rows.scalars())
        except DBAPIError as exc:
            # No alembic_version table: the database was never migrated. A lost
            # connection is not that: let the caller see it.
            if exc.connection_invalidated or not await self.db.ping():
                raise
            return BEHIND
        self._at_head = current == heads
        return AT_HEAD if self._at_head else BEHIND

    async def healthz(self, request: Request) -> JSONResponse:
        body = {"status": "ok", "database": "down", "migrations": UNKNOWN}
        if await self.db.ping():
            body["database"] = "up"
            try:
                body["migrations"] = await self.migration_state()
            except DBAPIError:
                body["database"] = "down"
        return JSONResponse(body)

    async def readyz(self, request: Request) -> JSONResponse:
        if not await self.db.ping():
            return JSONResponse({"status": "database unreachable"}, 503)
        try:
            state = await self.migration_state()
        except DBAPIError:
            return JSONResponse({"status": "database unreachable"}, 503)
        if state == AT_HEAD:
            return JSONResponse({"status": "ready"})
        if state == BEHIND:
            return JSONResponse(
                {"status": "database not migrated: run `convograph migrate`"}, status_code=503
            )
        missing = f"no migration scripts in {MIGRATIONS_DIR}: set CONVOGRAPH_MIGRATIONS_DIR"
        return JSONResponse({"status": missing}, status_code=503)
