"""PostgreSQL connections are pinged when they come out of the pool after sitting idle.

SQLAlchemy's `pool_pre_ping` pings on every checkout: on asyncpg that is BEGIN, an empty
query and ROLLBACK, three round trips before each request's own statements. A connection in
steady use proves itself with every statement, and when one fails as a disconnect,
SQLAlchemy invalidates every connection the pool held then (they are replaced on their next
checkout): what a ping on each checkout adds is only for connections that sat unused, the
ones a database restart, a failover or a firewall's idle timeout may have cut meanwhile.
Those are pinged here, once idle for CONVOGRAPH_POOL_PING_IDLE_SECONDS; a dead one is
replaced before the request gets it (SQLAlchemy's pessimistic disconnect handling: a
`DisconnectionError` from a checkout listener makes the pool connect again).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine

_IDLE_SINCE = "convograph_idle_since"


def ping_when_idle(engine: AsyncEngine, *, idle_seconds: float) -> None:
    """Ping each connection `engine` checks out that was idle for `idle_seconds` or more
    (0: every connection it checks out again)."""
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    def checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop(_IDLE_SINCE, None)
        if since is None or time.monotonic() - since < idle_seconds:
            return  # new, or in use a moment ago
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError("an idle connection failed its ping") from exc
        if not alive:
            raise DisconnectionError("an idle connection failed its ping")

    event.listen(pool, "checkin", checked_in)
    event.listen(pool, "checkout", checked_out)
