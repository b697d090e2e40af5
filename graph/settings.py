"""Settings: CONVOGRAPH_* environment variables, then CLI flags; every value checked.

`Settings(...)` is the defaults with the given values (what tests and the bench build);
`Settings.from_env()` reads the environment (what `convograph` does). A value that does not
fit its setting (a mistyped boolean, a negative size, an unknown log format) is refused
with a message naming the variable, never silently replaced by a default.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/convograph.db"
ENV_PREFIX = "CONVOGRAPH_"
# Values never echoed back in an error message.
# (A database URL may hold a password.)
_SECRET_SETTINGS = ("secret", "encryption_key", "encryption_previous_key", "database_url")
# The drivers convograph speaks, by URL scheme.
DATABASE_SCHEMES = ("sqlite+aiosqlite", "postgresql+asyncpg")
# PostgreSQL's statement_timeout is an int of milliseconds.
_MAX_STATEMENT_TIMEOUT = 2_147_483
# The longest wait or interval any other duration setting takes: a year.
_YEAR = 366 * 24 * 3600.0
# The largest whole number any setting takes: what a database's 64-bit integer holds (a
# quota is compared in SQL), far past any sensible size or count.
_MAX_INT = 2**63 - 1
# SQLite's busy timeout is a C int of milliseconds (a larger one is silently 0: no wait).
_MAX_BUSY_TIMEOUT_MS = 2**31 - 1
# The least value of a setting that 0 turns off, and what 0 means. The slowest rate limit is
# one request every 1,000 seconds (a smaller positive rate is no limit at all in floating
# point: the bucket's arithmetic gives NaN); a sweep every 0.001 s kept an idle server's
# core 40% busy.
_OFF_OR_AT_LEAST = {
    "rate_limit_per_second": (0.001, "no limit"),
    "sweep_interval_seconds": (0.1, "no sweep"),
}
_URLSAFE = str.maketrans("-_", "+/")
# The settings a file may give instead (a mounted secret), by the file's setting: one of the
# two, never both.
_FILE_OF = {
    "secret_file": "secret",
    "encryption_key_file": "encryption_key",
    "encryption_previous_key_file": "encryption_previous_key",
}
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class SettingsError(ValueError):
    """A setting's value is invalid; the message names the variable and what it accepts."""


Positive = Field(gt=0)


class Settings(BaseModel):
    # No setting is infinite or NaN: `inf` seconds would overflow where a duration becomes
    # an int of milliseconds, and means nothing an operator wants anyway.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    database_url: str = DEFAULT_DATABASE_URL
    # HMAC key for token and owner-key digests. When unset it is read from (or
    # generated into) `secret_file`, beside the SQLite database by default.
    secret: str | None = Field(default=None, repr=False, min_length=1)
    secret_file: str | None = Field(default=None, min_length=1)
    # Encryption at rest (store/encryption.py): off unless a master key is given, as 32
    # random bytes in base64 (`convograph keys generate`), here or in a file of its own.
    encryption_key: str | None = Field(default=None, repr=False)
    encryption_key_file: str | None = Field(default=None, min_length=1)
    # The master key being rotated away from: it still unwraps the data keys that
    # `convograph keys rotate` has not yet wrapped again under `encryption_key`; here or in
    # a file of its own.
    encryption_previous_key: str | None = Field(default=None, repr=False)
    encryption_previous_key_file: str | None = Field(default=None, min_length=1)
    # Where the wrapped data keys live, apart from the data so that the two are backed up
    # apart: on SQLite a file (beside the database by default), on PostgreSQL a schema.
    encryption_key_store_file: str | None = Field(default=None, min_length=1)
    encryption_key_schema: str = Field(
        default="convograph_keys", pattern=r"^[a-z_][a-z0-9_]{0,62}$"
    )
    # Not empty: asyncio takes "" for every interface of the machine.
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8000, ge=0, le=65535)
    migrate_on_start: bool = True
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    log_format: Literal["json", "text"] = "json"
    # Per-logger levels over log_level, e.g. "convograph.access=warning,sqlalchemy.engine=info".
    log_levels: str = ""
    # Who may read /metrics: "loopback" (open to 127.0.0.1/::1, an ADMIN token otherwise),
    # "token" (an ADMIN token always), "open" or "closed".
    metrics: Literal["loopback", "token", "open", "closed"] = "loopback"
    # Origins whose browser pages may call /graphql (CORS), comma-separated, or "*": e.g.
    # "https://dash.example.org,http://localhost:5173". Empty: none but the server's own.
    cors_origins: str = ""

    max_messages_per_call: int = Field(default=1000, gt=0)
    max_message_bytes: int = Field(default=1024 * 1024, gt=0)
    max_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    max_page_size: int = Field(default=100, gt=0)
    max_query_depth: int = Field(default=12, gt=0)
    max_aliases: int = Field(default=30, ge=0)
    # Selections after expanding fragments: bounds what one document can make the server do.
    # The query text (values belong in variables): characters, then tokens.
    max_query_chars: int = Field(default=256 * 1024, gt=0)
    max_query_tokens: int = Field(default=5000, gt=0)
    max_selected_fields: int = Field(default=2000, gt=0)
    max_directives: int = Field(default=200, ge=0)
    # The field values one execution may complete (api/execution/answer_size.py): what
    # bounds a query that walks a tree down and back up.
    max_result_values: int = Field(default=200_000, gt=0)
    # graphql-core's budget for checking that same-named fields can merge (pairwise, so
    # n same-named fields cost about 4·n²). Real documents spend tens.
    max_merge_checks: int = Field(default=10_000, gt=0)
    max_connections: int = Field(default=1000, gt=0)
    # WebSocket compression (permessage-deflate), off by default: each connection that
    # negotiates it holds a zlib compressor and decompressor (about 50 KB), for events of a
    # few hundred bytes.
    ws_compression: bool = False
    # A connection whose request headers have not ended by then is closed (slow loris).
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=_YEAR)
    # How long a kept-alive HTTP connection may sit idle before the server closes it. Above
    # common clients' own idle expiry (httpx 5 s, aiohttp 15 s), so the client drops an idle
    # connection first: a server closing it first races the client's next request, which
    # fails (a POST is not retried). Behind a proxy, set it above the proxy's idle timeout.
    keep_alive_seconds: float = Field(default=20.0, gt=0, le=_YEAR)
    # On SIGTERM or Ctrl-C, how long requests in flight get to finish before they are cancelled.
    shutdown_timeout_seconds: float = Field(default=10.0, gt=0, le=_YEAR)

    # How often the retention sweep runs; 0 turns it off (`convograph sweep` still works).
    sweep_interval_seconds: float = Field(default=60.0, ge=0, le=_YEAR)
    # How long the event log keeps an event for a stream to resume after it (24 hours);
    # a cursor older than that is CURSOR_EXPIRED. The sweep prunes the log.
    event_retention_seconds: float = Field(default=24 * 3600.0, gt=0, le=_YEAR)
    # Unsent events held for a subscriber; past that they are dropped, and its stream reads
    # them from the event log (store/events.py): it bounds memory, and ends no stream.
    subscriber_queue_size: int = Field(default=1000, gt=0)
    pool_size: int = Field(default=10, gt=0)
    pool_timeout_seconds: float = Field(default=10.0, gt=0, le=_YEAR)
    # PostgreSQL: a pooled connection idle this long is pinged before use (0: every time).
    pool_ping_idle_seconds: float = Field(default=5.0, ge=0, le=_YEAR)
    statement_timeout_seconds: float = Field(default=30.0, ge=0.001, le=_MAX_STATEMENT_TIMEOUT)
    # How long a write waits for SQLite's write lock while another process holds it.
    sqlite_busy_timeout_ms: int = Field(default=10_000, ge=0, le=_MAX_BUSY_TIMEOUT_MS)
    # COMMIT (fsync) in a worker thread instead of on the event loop (for slow disks).
    sqlite_commit_in_thread: bool = False
    # Messages stored compressed with a dictionary learnt from the database's own (off:
    # stored as JSON text; those stored compressed before stay readable).
    sqlite_compression: bool = True
    graphiql: bool = True

    # Workspace quotas (store/quotas.py), off when unset: the messages of every live
    # transcript in a workspace, and the bytes of their JSON and of its snapshots' JSON.
    workspace_max_messages: int | None = Field(default=None, gt=0)
    workspace_max_bytes: int | None = Field(default=None, gt=0)
    # `token rotate`: how long the old token keeps working beside its successor (0: not at all).
    token_rotation_grace_seconds: float = Field(default=0.0, ge=0, le=_YEAR)

    # -- per-token limits (all off by default) ----------------------------------------------
    # Requests per second one API token may make to /graphql, HTTP requests and WebSocket
    # operations alike (a token bucket, kept by each process on its own); 0 turns it off.
    rate_limit_per_second: float = Field(default=0.0, ge=0, le=1_000_000)
    # Requests a token may make at once after a quiet spell (the bucket's size); unset, it
    # is twice the rate, rounded up (see `rate_limit_burst_size`).
    rate_limit_burst: int | None = Field(default=None, gt=0)
    # Operations one token may run at once over all of this process's WebSockets; past it a
    # `subscribe` is refused (LIMIT_EXCEEDED), its socket kept. 0 turns the cap off.
    max_subscriptions_per_token: int = Field(default=0, ge=0)

    @property
    def rate_limit_burst_size(self) -> int:
        """The bucket's size: CONVOGRAPH_RATE_LIMIT_BURST, else twice the rate (at least 1)."""
        if self.rate_limit_burst is not None:
            return self.rate_limit_burst
        return max(1, math.ceil(2 * self.rate_limit_per_second))

    @field_validator("*")
    @classmethod
    def _whole_numbers_fit_64_bits(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value > _MAX_INT:
            raise ValueError(f"must be at most {_MAX_INT:,}")
        return value

    @field_validator("rate_limit_per_second", "sweep_interval_seconds")
    @classmethod
    def _off_or_at_least(cls, value: float, info: ValidationInfo) -> float:
        # 0 turns each off; just above 0 it would run as a loop (or 1/rate overflow).
        floor, off = _OFF_OR_AT_LEAST[info.field_name or ""]
        if 0 < value < floor:
            raise ValueError(f"must be 0 ({off}) or at least {floor}")
        return value

    @field_validator("rate_limit_burst")
    @classmethod
    def _burst_of_a_rate(cls, value: int | None, info: ValidationInfo) -> int | None:
        # A burst without a rate limited nothing, and said nothing: an operator who set only
        # the burst believed tokens limited to it.
        if value is not None and not info.data.get("rate_limit_per_second"):
            raise ValueError(
                f"limits nothing while {ENV_PREFIX}RATE_LIMIT_PER_SECOND is 0 (no limit): set "
                "the rate too, or unset the burst"
            )
        return value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if sep and scheme in DATABASE_SCHEMES and rest:
            return _database_url_parts(value)
        hint = ""
        if scheme.split("+")[0] in ("postgresql", "postgres"):
            hint = " (convograph talks to PostgreSQL through asyncpg: postgresql+asyncpg://)"
        elif scheme.split("+")[0] == "sqlite":
            hint = " (convograph opens SQLite through aiosqlite: sqlite+aiosqlite:///PATH)"
        shown = f"a URL of scheme {scheme!r}" if sep else "text without a scheme"
        raise ValueError(
            "must be sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST/DATABASE, "
            f"not {shown}{hint}"
        )

    @field_validator("encryption_key", "encryption_previous_key")
    @classmethod
    def _master_key(cls, value: str | None) -> str | None:
        if value is not None:
            master_key_bytes(value)
        return value

    @field_validator(*_FILE_OF)
    @classmethod
    def _given_once(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Given twice, one of the two would win silently: an operator who moved the secret
        # to a file and left the variable set had tokens checked against the old secret.
        given = _FILE_OF[str(info.field_name)]
        if value is not None and info.data.get(given) is not None:
            raise ValueError(f"{ENV_PREFIX}{given.upper()} is set too: set one of the two")
        return value

    @field_validator("encryption_key_store_file")
    @classmethod
    def _store_apart(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The database's own file took the key store's table beside the data: every backup of
        # the data held the keys too, and a restored copy still opened what was deleted.
        url = info.data.get("database_url")
        if value is None or url is None or not url.startswith("sqlite"):
            return value
        from sqlalchemy.engine import make_url

        database = make_url(url).database
        if database and os.path.realpath(value) == os.path.realpath(database):
            raise ValueError(
                "is the database's own file (CONVOGRAPH_DATABASE_URL): the key store is kept "
                "apart from the data, so that the two are backed up apart"
            )
        return value

    @field_validator("encryption_key_schema")
    @classmethod
    def _schema_apart(cls, value: str) -> str:
        # PostgreSQL refuses a schema named pg_* (a traceback at start); `public` holds the
        # data, which the key store is kept apart from (pg_dump --exclude-schema).
        if value.startswith("pg_") or value in ("public", "information_schema"):
            raise ValueError(
                "must be a schema of the key store's own: not public (the data's, by default) nor "
                "information_schema, nor begin with pg_ (PostgreSQL's own)"
            )
        return value

    @field_validator("log_level", "log_format", "metrics", mode="before")
    @classmethod
    def _lower_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_levels")
    @classmethod
    def _logger_levels(cls, value: str) -> str:
        logger_levels(value)
        return value

    @field_validator("cors_origins")
    @classmethod
    def _cors_origins(cls, value: str) -> str:
        cors_origins(value)
        return value

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Settings from the environment; `overrides` (e.g. CLI flags) win when not None."""
        given = {k: v for k, v in overrides.items() if v is not None}
        try:
            values = _Environment().model_dump(exclude_unset=True)
            return cls(**{**values, **given})
        except ValidationError as exc:
            raise SettingsError(_explain(exc, given)) from None

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes`, checked like any other settings."""
        return type(self)(**{**self.model_dump(), **changes})

    @property
    def quotas_on(self) -> bool:
        return self.workspace_max_messages is not None or self.workspace_max_bytes is not None

    @property
    def encryption_on(self) -> bool:
        return self.encryption_key is not None or self.encryption_key_file is not None

    @property
    def resolved_key_store_file(self) -> Path:
        """SQLite: the key store's file, beside the database unless set."""
        if self.encryption_key_store_file:
            return Path(self.encryption_key_store_file)
        db = self.sqlite_path
        return db.with_name(db.name + ".keys") if db else Path("data") / "convograph.keys"

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
        from sqlalchemy.engine import make_url

        # As SQLAlchemy reads it (`%20` is a space): the file the migrations' engine opens.
        path = make_url(self.database_url).database
        return Path(path) if path and path != ":memory:" else None

    @property
    def resolved_secret_file(self) -> Path:
        if self.secret_file:
            return Path(self.secret_file)
        db = self.sqlite_path
        return (db.parent if db else Path("data")) / "secret"


_PG_QUERY = {"host"}


def _database_url_parts(value: str) -> str:
    """The URL read as SQLAlchemy reads it (the engines do), so that a part they cannot use
    is refused at start, in one line, instead of as a traceback where they connect (a port
    that is no number or past 65535, a parameter asyncpg does not take, a SQLite URL with a
    host), and an empty SQLite path is not taken for a database in memory."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(value)
        port = url.port
    except ValueError as exc:
        raise ValueError(f"is not a URL that can be read ({exc})") from None
    # `host` alone means the same to SQLAlchemy's engine and to asyncpg's own DSN parser (the
    # LISTEN connection): a Unix socket's directory, `?host=/var/run/postgresql`. Any other
    # parameter reaches one of them as something else (`sslmode` a keyword asyncpg's connect()
    # refuses, `ssl` a server setting PostgreSQL refuses).
    sqlite = url.get_backend_name() == "sqlite"
    refused = sorted(set(url.query) - (set() if sqlite else _PG_QUERY))
    if refused:
        but = "" if sqlite else " but `host`, a socket's directory"
        raise ValueError(
            f"takes no query parameters{but} (got {', '.join(refused)}): PostgreSQL's TLS "
            "and other connection options come from libpq's variables (PGSSLMODE, …)"
        )
    if sqlite:
        if url.host or url.username or not url.database:
            raise ValueError(
                "must be sqlite+aiosqlite:///PATH: three slashes, then the file's path (a "
                "fourth slash begins an absolute one)"
            )
    elif port is not None and not 0 < port <= 65535:
        raise ValueError(f"has port {port}: a port is 1 to 65535")
    return value


def master_key_bytes(value: str) -> bytes:
    """A master key's 32 bytes from its base64 text; ValueError saying what is wrong."""
    try:
        raw = base64.b64decode(value.strip().translate(_URLSAFE), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("must be 32 random bytes in base64 (convograph keys generate)") from None
    if len(raw) != 32:
        raise ValueError(
            f"must be 32 random bytes in base64 (convograph keys generate), not {len(raw)} bytes"
        )
    return raw


def misspelled(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(variable, the setting it was likely meant for) for each CONVOGRAPH_* variable that is
    no setting but one or two keystrokes from one (`CONVOGRAPH_ENCRYPTON_KEY` would otherwise
    leave encryption silently off). Variables further from every setting are the clients'
    own (`CONVOGRAPH_URL`, `CONVOGRAPH_TOKEN` of the adapters) and are left alone."""
    known = [name.upper() for name in Settings.model_fields]
    found = []
    for variable in sorted(environ):
        if not variable.startswith(ENV_PREFIX):
            continue
        name = variable[len(ENV_PREFIX) :].upper()
        if name in known:
            continue
        if (meant := _nearest(name, known)) is not None:
            found.append((variable, ENV_PREFIX + meant))
    return found


_MAX_EDITS = 2


def _nearest(name: str, known: Iterable[str]) -> str | None:
    """The first of the names in `known` nearest to `name`, if one or two keystrokes away."""
    # Each distance counted once.
    distance, meant = min(((_edits(name, k), k) for k in known), key=lambda d: d[0])
    return meant if distance <= _MAX_EDITS else None


def _edits(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`."""
    if abs(len(a) - len(b)) > _MAX_EDITS:
        return _MAX_EDITS + 1
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            cost = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                cost = min(cost, before[j - 2] + 1)
            current.append(cost)
        before, row = row, current
    return row[-1]


# convograph's own loggers (tests/unit/test_settings.py holds this to the code's): a name
# under "convograph." that is none of them is a typo, which set the level of nothing.
LOGGERS = frozenset(
    {
        "convograph",
        "convograph.access",
        "convograph.auth",
        "convograph.compression",
        "convograph.db",
        "convograph.encryption",
        "convograph.errors",
        "convograph.events",
        "convograph.http",
        "convograph.limits",
        "convograph.notify",
        "convograph.quotas",
        "convograph.retention",
        "convograph.search_index",
        "convograph.services",
        "convograph.storage",
        "convograph.ws",
    }
)


def cors_origins(spec: str) -> list[str]:
    """`"https://a.example, http://localhost:5173"` -> the origins, as a browser sends them
    (`scheme://host[:port]`, lower case, no path, no default port); `"*"` alone is any."""
    origins = [item.strip() for item in spec.split(",") if item.strip()]
    if origins == ["*"]:
        return origins
    found = []
    for given in origins:
        origin = given.lower()
        scheme, sep, host = origin.partition("://")
        if origin == "*":
            raise ValueError("takes * alone, or a list of origins without it")
        if (
            scheme not in ("http", "https")
            or not sep
            or not host
            or any(c in host for c in "/?#@\\")
            or any(c.isspace() for c in host)
        ):
            raise ValueError(
                f"takes origins as a browser sends them, scheme://host[:port] with no path "
                f"(https://dash.example.org), not {given!r}"
            )
        default = ":443" if scheme == "https" else ":80"
        found.append(origin.removesuffix(default))  # a browser leaves the default port out
    return found


def logger_levels(spec: str) -> dict[str, str]:
    """`"convograph.access=warning, sqlalchemy.engine=info"` -> {logger name: level}."""
    levels: dict[str, str] = {}
    for item in spec.split(","):
        if not item.strip():
            continue
        name, sep, level = item.partition("=")
        name, level = name.strip(), level.strip().lower()
        if not sep or not name:
            raise ValueError(f"takes LOGGER=LEVEL pairs, not {item!r}")
        if level not in LOG_LEVELS:
            raise ValueError(f"the level of {name} must be one of {', '.join(LOG_LEVELS)}")
        if name.startswith("convograph.") and name not in LOGGERS:
            near = _nearest(name, sorted(LOGGERS))
            hint = (
                f": did you mean {near}?"
                if near
                else f" (its loggers: {', '.join(sorted(LOGGERS))})"
            )
            raise ValueError(f"convograph has no logger {name}{hint}")
        levels[name] = level
    return levels


class _Environment(BaseSettings, Settings):
    """The CONVOGRAPH_* variables, as raw values for Settings to check."""

    model_config = SettingsConfigDict(
        # An empty value is checked like any other, not taken for an unset one: an empty
        # CONVOGRAPH_ENCRYPTION_KEY (a secret that did not reach the environment) stored
        # everything unencrypted, an empty CONVOGRAPH_DATABASE_URL used ./data.
        env_prefix=ENV_PREFIX,
        extra="ignore",
        frozen=True,
        env_ignore_empty=False,
    )


def _explain(error: ValidationError, given: dict[str, Any]) -> str:
    lines = []
    for problem in error.errors():
        name = str(problem["loc"][0]) if problem["loc"] else "?"
        source = f"--{name.replace('_', '-')}" if name in given else ENV_PREFIX + name.upper()
        got = problem.get("input")
        shown = "a value that is not shown" if name in _SECRET_SETTINGS else repr(got)
        message = problem["msg"].removeprefix("Value error, ")
        if got == "":
            lines.append(f"{source}: is empty ({message}); unset it for the default")
            continue
        lines.append(f"{source}: {message} (got {shown})")
    return "invalid settings: " + "; ".join(lines)
