"""Settings read from CONVOGRAPH_* environment variables; CLI flags override them."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/convograph.db"


def _env(name: str, default: Any, cast: type = str) -> Any:
    raw = os.environ.get(f"CONVOGRAPH_{name}")
    if raw is None or raw == "":
        return default
    if cast is bool:
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    return cast(raw)


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    # HMAC key for token and owner-key digests. When unset it is read from (or
    # generated into) `secret_file`, beside the SQLite database by default.
    secret: str | None = dataclasses.field(default=None, repr=False)
    secret_file: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    migrate_on_start: bool = True
    log_level: str = "info"
    log_format: str = "json"
    # Per-logger levels over log_level, e.g. "convograph.access=warning,sqlalchemy.engine=info".
    log_levels: str = ""
    # Who may read /metrics: "loopback" (open to 127.0.0.1/::1, an ADMIN token otherwise),
    # "token" (an ADMIN token always), "open" or "closed".
    metrics: str = "loopback"

    max_messages_per_call: int = 1000
    max_message_bytes: int = 1024 * 1024
    max_body_bytes: int = 32 * 1024 * 1024
    max_page_size: int = 100
    max_query_depth: int = 12
    max_aliases: int = 30
    # Selections after expanding fragments: bounds what one document can make the server do.
    # The query text (values belong in variables): characters, then tokens.
    max_query_chars: int = 256 * 1024
    max_query_tokens: int = 5000
    max_selected_fields: int = 2000
    max_directives: int = 200
    # graphql-core's budget for checking that same-named fields can merge (pairwise, so
    # n same-named fields cost about 4·n²). Real documents spend tens; 10,000 is ~15 ms.
    max_merge_checks: int = 10_000
    max_connections: int = 1000
    # A connection whose request headers have not ended by then is closed (slow loris).
    header_timeout_seconds: float = 10.0

    sweep_interval_seconds: float = 60.0
    pool_size: int = 10
    pool_timeout_seconds: float = 10.0
    statement_timeout_seconds: float = 30.0
    sqlite_busy_timeout_ms: int = 10_000
    # Run SQLite calls on the event loop instead of aiosqlite's thread (see sqlite_inline).
    sqlite_inline: bool = True
    # With sqlite_inline: COMMIT (fsync) in a worker thread instead of on the loop.
    sqlite_commit_in_thread: bool = False
    graphiql: bool = True

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Build settings from the environment; `overrides` (e.g. CLI flags) win when not None."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            cast: type = {int: int, float: float, bool: bool}.get(
                type(f.default) if f.default is not None else str, str
            )
            values[f.name] = _env(f.name.upper(), f.default, cast)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def asyncpg_dsn(self) -> str:
        """The URL in the form asyncpg itself accepts (for the LISTEN connection)."""
        return self.database_url.replace("postgresql+asyncpg://", "postgresql://", 1)

    @property
    def sqlite_path(self) -> Path | None:
        if not self.is_sqlite:
            return None
        path = self.database_url.split("///", 1)[1] if "///" in self.database_url else ""
        return Path(path) if path and path != ":memory:" else None

    @property
    def resolved_secret_file(self) -> Path:
        if self.secret_file:
            return Path(self.secret_file)
        db = self.sqlite_path
        return (db.parent if db else Path("data")) / "secret"
