"""Whether the database's schema is at the newest migration this code ships.

Asked by /healthz and /readyz. It knows the head revision without Alembic, which a serving
process that does not migrate (`serve --no-migrate`, the replicas of a scaled-out
deployment) then never loads.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from graph.store.db import Database

# The head of store/migrations/versions: tests/unit/test_migration_state.py holds it to
# Alembic's own answer, so a new migration cannot be forgotten here.
HEAD_REVISIONS = frozenset({"0017"})

# What MigrationState.current() answers.
AT_HEAD = "head"
BEHIND = "behind"


class MigrationState:
    """Whether the database's schema is at the newest migration this code knows.

    Once it matched it is not queried again (migrations only move forward while a process
    runs), so a readiness check then costs one ping.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._at_head = False

    async def current(self) -> str:
        """AT_HEAD or BEHIND; a database that cannot be reached raises ConnectionError."""
        if self._at_head:
            return AT_HEAD
        try:
            async with self.db.read() as conn:
                rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
                current = frozenset(rows.scalars())
        except DBAPIError as exc:
            # No alembic_version table: the database was never migrated. A lost
            # connection is not that: let the caller see it.
            if exc.connection_invalidated or not await self.db.ping():
                raise ConnectionError("the database is unreachable") from exc
            return BEHIND
        self._at_head = current == HEAD_REVISIONS
        return AT_HEAD if self._at_head else BEHIND
