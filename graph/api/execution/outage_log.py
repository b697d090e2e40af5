"""Failures of a database that is away: a warning line now and then, not a traceback each.

During an outage every request fails the same way, and each logged an ERROR with the whole
traceback: hundreds of lines a second under load, burying whatever else the log said, and
none saying more than the first. Now one WARNING line names the reason (the driver's first
line) at most every `INTERVAL` seconds per process, with how many requests failed so since
the line before; the metrics count every one of them (by code, DATABASE_UNAVAILABLE).
"""

from __future__ import annotations

import logging
import math
import time

from graph.store.errors import database_problem

INTERVAL = 10.0


class _Outage:
    def __init__(self) -> None:
        self.last = -math.inf
        self.quiet = 0

    def note(self, logger: logging.Logger, request_id: str, exc: BaseException | None) -> None:
        now = time.monotonic()
        if now - self.last < INTERVAL:
            self.quiet += 1
            return
        more = f"; {self.quiet} more such failures since the last line" if self.quiet else ""
        self.last, self.quiet = now, 0
        reason = (database_problem(exc) if exc is not None else None) or _first_line(exc)
        logger.warning(
            "request %s: the database is unavailable (%s)%s",
            request_id,
            reason,
            more,
            extra={"request_id": request_id},
        )


def _first_line(exc: BaseException | None) -> str:
    text = str(exc).strip() if exc is not None else ""
    return text.splitlines()[0] if text else type(exc).__name__


_outage = _Outage()


def unavailable(logger: logging.Logger, request_id: str, exc: BaseException | None) -> None:
    """Log that request `request_id` failed on a database that is away (`exc`), unless such
    a line was logged within the last `INTERVAL` seconds (it is counted for the next)."""
    _outage.note(logger, request_id, exc)
