"""`python -m tests.pg_probe URL`: exit 0 when a PostgreSQL server answers at URL."""

from __future__ import annotations

import asyncio
import sys
from urllib.parse import urlsplit

import asyncpg


def describe(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 5432}{parts.path}"


async def reachable(url: str) -> bool:
    try:
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"), timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return False
    await conn.close()
    return True


if __name__ == "__main__":
    if sys.argv[1] == "--describe":
        print(describe(sys.argv[2]))
        raise SystemExit(0)
    raise SystemExit(0 if asyncio.run(reachable(sys.argv[1])) else 1)
