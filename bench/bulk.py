"""Databases filled in bulk with SQL, for the benches that measure reads at scale.

`bench/figures_plans.py`, `bench/dashboard_list.py` and `bench/million.py` fill a migrated
database with rows they generate (not through HTTP, so that the benches stay short), on
SQLite by default or on a PostgreSQL database made beside the one named and dropped after.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from graph.settings import Settings
from graph.store.compression import Compression
from graph.store.keyring import Keyring, load_secret
from graph.store.migrate import upgrade

Batch = Mapping[str, Sequence[tuple[Any, ...]]]  # table -> rows, in its COLUMNS' order


def sqlite_settings(path: Path, workdir: Path, **changes: Any) -> Settings:
    """Settings for the SQLite file at `path`, its secret kept in `workdir`."""
    return Settings(
        database_url=f"sqlite+aiosqlite:///{path}",
        secret="bench",
        sweep_interval_seconds=0,
        **changes,
    )


@asynccontextmanager
async def postgres_databases(
    url: str, prefix: str, count: int = 1, **changes: Any
) -> AsyncIterator[list[Settings]]:
    """`count` empty databases on the server of `url`, dropped when the block ends."""
    admin = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    names = [f"{prefix}_{uuid.uuid4().hex[:8]}" for _ in range(count)]
    try:
        for name in names:
            await admin.execute(f'CREATE DATABASE "{name}"')
        base = url.rsplit("/", 1)[0]
        yield [
            Settings(
                database_url=f"{base}/{name}", secret="bench", sweep_interval_seconds=0, **changes
            )
            for name in names
        ]
    finally:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def filled_once(workdir: Path, name: str, fill: Callable[[Path, Keyring], None]) -> Path:
    """The SQLite file `name` in `workdir`, migrated and filled by `fill(path, keyring)` the
    first time (then kept for the next runs)."""
    path = workdir / name
    if not path.exists():
        made = workdir / "filling.sqlite"
        settings = sqlite_settings(made, workdir)
        await upgrade(settings)
        fill(made, Keyring(load_secret(settings)))
        made.rename(path)
    return path


def _sqlite_value(value: Any) -> Any:
    # As UTCDateTime stores a timestamp on SQLite: naive UTC text with microseconds.
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat(" ", "microseconds")
    return value


def load_sqlite(
    path: Path, batches: Iterable[Batch], columns: Mapping[str, str], *, then: Sequence[str] = ()
) -> None:
    """Insert every batch, one commit each; run `then`; ANALYZE."""
    db = sqlite3.connect(path)
    # The search index's view and trigger read compressed messages through it.
    Compression(path, enabled=False).register(db)
    try:
        for batch in batches:
            for table, values in batch.items():
                if not values:
                    continue
                names = columns[table]
                marks = ",".join("?" * len(names.split(",")))
                fixed = [tuple(map(_sqlite_value, row)) for row in values]
                db.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", fixed)
            db.commit()
        for statement in (*then, "ANALYZE"):
            db.execute(statement)
        db.commit()
    finally:
        db.close()


async def load_postgres(
    settings: Settings, batches: Iterable[Batch], columns: Mapping[str, str]
) -> None:
    """COPY every batch in; VACUUM ANALYZE."""
    db = await asyncpg.connect(settings.asyncpg_dsn)
    try:
        for batch in batches:
            for table, values in batch.items():
                if values:
                    names = [c.strip() for c in columns[table].split(",")]
                    await db.copy_records_to_table(table, records=values, columns=names)
        await db.execute("VACUUM ANALYZE")
    finally:
        await db.close()
