"""A database out of space: its refused writes told apart, counted and reported.

SQLite says SQLITE_FULL ("database or disk is full") when its file or journal cannot grow;
PostgreSQL says SQLSTATE 53100 (disk_full) when a relation or the WAL cannot. Either way
the transaction rolled back, so nothing was written: the unit of work (told by
errors.is_storage_full) answers such a write with STORAGE_FULL instead of an unexpected
error, and nothing has to be restarted once space returns, since every write tries again.
`FullDisk` remembers the last refusal until a write succeeds, for /healthz, /readyz and
/metrics.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from graph.domain.errors import DomainError, ErrorCode

logger = logging.getLogger("convograph.storage")


class FullDisk:
    """The last write the database refused for want of space, until one succeeds again."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.refused = 0
        self.since: datetime | None = None

    def refusal(self) -> DomainError:
        """Note a refused write; the error its caller answers with."""
        self.refused += 1
        if self.since is None:
            self.since = datetime.now(UTC)
            logger.error("the database is out of space, writes are refused: %s", self.where)
        return DomainError(
            ErrorCode.STORAGE_FULL,
            "the database's disk is full: nothing was written; retry once space is freed",
        )

    def wrote(self) -> None:
        """A write succeeded: there is space again."""
        if self.since is not None:
            logger.warning("the database takes writes again: %s", self.where)
            self.since = None

    @property
    def is_full(self) -> bool:
        return self.since is not None
