"""Which failures are the database's, not the request's: the layers above tell clients
"retry" for these instead of "unexpected error"."""

from __future__ import annotations

import asyncio

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from graph.store.db import DatabaseBusy


def is_unavailable(exc: BaseException | None) -> bool:
    """Connection loss, refusal, pool exhaustion, or SQLite's write lock held elsewhere too
    long: the database, not the request, is at fault."""
    if isinstance(exc, PoolTimeout | ConnectionError | asyncio.TimeoutError | DatabaseBusy):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        return isinstance(exc.orig, ConnectionError | OSError) or "connect" in str(exc.orig).lower()
    return isinstance(exc, OSError)
