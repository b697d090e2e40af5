"""Whether the database's schema is at the newest migration this code ships.

Asked by /healthz and /readyz. It knows the head revision without Alembic, which a serving
process that does not migrate (`serve --no-migrate`, the replicas of a scaled-out
deployment) then never loads.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from graph.store.db import Database
from graph.store.errors import NotMigrated

# Every revision of store/migrations/versions, and its head: tests/unit/test_migration_state.py
# holds them to Alembic's own answer, so a new migration cannot be forgotten here.
REVISIONS = frozenset(f"{n:04d}" for n in range(1, 20))
HEAD_REVISIONS = frozenset({"0019"})

# What MigrationState.current() answers.
AT_HEAD = "head"
BEHIND = "behind"
# At a revision this code does not know: a later release migrated the database. Every
# migration keeps the release before it working (README, Upgrades), so a replica of this
# release (re)started during that rollout can serve; it is no reason to run `migrate`.
AHEAD = "ahead"


class MigrationState:
    """Whether the database's schema is at the newest migration this code knows.

    Once it matched (or was ahead) it is not queried again (migrations only move forward
    while a process runs), so a readiness check then costs one ping.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._known: str | None = None

    @property
    def settled(self) -> bool:
        """Whether the answer is known for the rest of the process (head, or ahead)."""
        return self._known is not None

    async def current(self) -> str:
        """AT_HEAD, AHEAD or BEHIND; a database that cannot be reached raises
        ConnectionError."""
        if self._known is not None:
            return self._known
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
        if current == HEAD_REVISIONS:
            self._known = AT_HEAD
        elif current and not current <= REVISIONS:
            self._known = AHEAD
        return self._known or BEHIND


async def require_migrated(db: Database) -> None:
    """NotMigrated unless the database's schema is this release's (or a later one's): a
    command run on a database behind it failed on a missing column, or wrote rows in the
    old schema's shape."""
    if await MigrationState(db).current() == BEHIND:
        raise NotMigrated("its schema is behind this release's (convograph migrate upgrades it)")
