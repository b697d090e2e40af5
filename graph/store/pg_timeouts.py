"""How long a PostgreSQL connection of convograph waits: to connect, and for a statement
(a lock it waits for included). The data's pool and the key store's own pool take the same
bounds, so that no request waits without limit on either: a table another session has
locked makes a statement fail after CONVOGRAPH_STATEMENT_TIMEOUT_SECONDS, which clients are
told to retry (store/errors.py), instead of holding the request past every client's own
timeout."""

from __future__ import annotations

from typing import Any

from graph.settings import Settings


def connect_args(settings: Settings) -> dict[str, Any]:
    """asyncpg's connect() arguments: the connect timeout, the client's command timeout
    and the server's statement_timeout (an int of milliseconds)."""
    return {
        "timeout": settings.pool_timeout_seconds,
        "command_timeout": settings.statement_timeout_seconds,
        "server_settings": {
            "statement_timeout": str(int(settings.statement_timeout_seconds * 1000))
        },
    }
