"""Settings refuse, naming the variable, what an operator may mistype and the server could
not use: an infinite or NaN duration, a timeout PostgreSQL cannot take, a database URL of
a driver convograph does not speak, two master keys."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from graph.settings import LOGGERS, Settings, SettingsError, misspelled

KEY = base64.b64encode(b"k" * 32).decode()


def refusal(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for name, value in env.items():
        monkeypatch.setenv(f"CONVOGRAPH_{name}", value)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    return str(refused.value)


@pytest.mark.parametrize(
    "name",
    [
        "STATEMENT_TIMEOUT_SECONDS",
        "POOL_TIMEOUT_SECONDS",
        "HEADER_TIMEOUT_SECONDS",
        "KEEP_ALIVE_SECONDS",
        "SHUTDOWN_TIMEOUT_SECONDS",
        "SWEEP_INTERVAL_SECONDS",
        "EVENT_RETENTION_SECONDS",
        "POOL_PING_IDLE_SECONDS",
    ],
)
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e12"])
def test_a_duration_must_be_finite_and_bounded(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    assert f"CONVOGRAPH_{name}" in refusal(monkeypatch, **{name: value})


def test_the_statement_timeout_fits_postgresqls(monkeypatch: pytest.MonkeyPatch) -> None:
    # PostgreSQL takes an int of milliseconds: at least 1, at most 2^31 - 1.
    assert "CONVOGRAPH_STATEMENT_TIMEOUT_SECONDS" in refusal(
        monkeypatch, STATEMENT_TIMEOUT_SECONDS="0.0001"
    )
    for fits in ("0.001", "2147483"):
        monkeypatch.setenv("CONVOGRAPH_STATEMENT_TIMEOUT_SECONDS", fits)
        assert Settings.from_env().statement_timeout_seconds == float(fits)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        # A quota is compared in SQL: past 64 bits every growing write failed INTERNAL.
        ("WORKSPACE_MAX_MESSAGES", "99999999999999999999", "at most 9,223,372,036,854,775,807"),
        ("WORKSPACE_MAX_BYTES", str(2**63), "at most 9,223,372,036,854,775,807"),
        ("MAX_PAGE_SIZE", str(2**64), "at most"),
        # SQLite took 2^31 ms or more as 0: no wait at all.
        ("SQLITE_BUSY_TIMEOUT_MS", str(2**31), "2147483647"),
        # 1/rate overflowed to infinity, and the bucket's NaN refused nothing.
        ("RATE_LIMIT_PER_SECOND", "1e-309", "at least 0.001"),
        ("RATE_LIMIT_PER_SECOND", "0.0009", "at least 0.001"),
        # A sweep every millisecond kept an idle server's core 40% busy.
        ("SWEEP_INTERVAL_SECONDS", "0.001", "0 (no sweep) or at least 0.1"),
    ],
)
def test_a_number_the_server_could_not_use_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    said = refusal(monkeypatch, **{name: value})
    assert f"CONVOGRAPH_{name}: " in said and says in said, said
    assert "Value error" not in said


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKSPACE_MAX_MESSAGES", str(2**63 - 1)),
        ("SQLITE_BUSY_TIMEOUT_MS", str(2**31 - 1)),
        ("RATE_LIMIT_PER_SECOND", "0"),
        ("RATE_LIMIT_PER_SECOND", "0.001"),
        ("SWEEP_INTERVAL_SECONDS", "0"),
        ("SWEEP_INTERVAL_SECONDS", "0.1"),
    ],
)
def test_the_largest_and_smallest_usable_numbers_are_taken(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"CONVOGRAPH_{name}", value)
    assert float(getattr(Settings.from_env(), name.lower())) == float(value)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        # A driver convograph does not speak.
        ("garbage", "without a scheme"),
        ("postgres://a:s3cr3tpass@h/db", "postgresql+asyncpg://"),
        ("postgresql+psycopg2://a@h/db", "postgresql+asyncpg://"),
        ("sqlite:///a.db", "sqlite+aiosqlite:///"),
        ("sqlite+aiosqlite://", "sqlite+aiosqlite:///PATH"),
        # Each was taken, then failed where the engine connects, with a traceback.
        ("postgresql+asyncpg://a:s3cr3tpass@h:notaport/db", "is not a URL that can be read"),
        ("postgresql+asyncpg://a:s3cr3tpass@h:99999/db", "a port is 1 to 65535"),
        ("postgresql+asyncpg://a:s3cr3tpass@h/db?sslmode=require", "no query parameters"),
        ("sqlite+aiosqlite://host", "sqlite+aiosqlite:///PATH"),
        # Ignored by the driver, with a warning, and taken into the path of the secret's file.
        ("sqlite+aiosqlite:///data/x.db?mode=ro", "no query parameters (got mode)"),
        # Was a database in memory, lost when the server stops.
        ("sqlite+aiosqlite:///", "sqlite+aiosqlite:///PATH"),
    ],
)
def test_a_database_url_convograph_cannot_use_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, url: str, says: str
) -> None:
    said = refusal(monkeypatch, DATABASE_URL=url)
    assert said.startswith("invalid settings: CONVOGRAPH_DATABASE_URL: ") and says in said, said
    assert "s3cr3tpass" not in said  # a URL may hold a password: never echoed


def test_a_postgresql_socket_directory_may_be_given_as_host() -> None:
    # What both of asyncpg's readers (the engine's keywords, the LISTEN connection's DSN)
    # take alike: PostgreSQL over a Unix socket.
    url = "postgresql+asyncpg://postgres@/convograph?host=/var/run/postgresql"
    assert Settings(database_url=url).database_url == url


def test_the_sqlite_file_is_the_one_the_engines_open() -> None:
    """`%20` is a space to SQLAlchemy, which the migrations open the file with: the server
    opened `a%20b.db` beside the migrated `a b.db`, and `serve` answered 503 for good."""
    settings = Settings(database_url="sqlite+aiosqlite:///data/a%20b/c.db")
    assert str(settings.sqlite_path) == "data/a b/c.db"
    assert Settings(database_url="sqlite+aiosqlite:////srv/ü x.db").sqlite_path == (
        Path("/srv/ü x.db")
    )


@pytest.mark.parametrize(
    "name",
    [
        # Each empty value was taken for an unset one: encryption off, the secret generated
        # into a file, ./data/convograph.db, the key store beside it, port 8000.
        "ENCRYPTION_KEY",
        "ENCRYPTION_KEY_FILE",
        "ENCRYPTION_PREVIOUS_KEY_FILE",
        "SECRET",
        "SECRET_FILE",
        "DATABASE_URL",
        "ENCRYPTION_KEY_STORE_FILE",
        "PORT",
        "MIGRATE_ON_START",
        "WORKSPACE_MAX_MESSAGES",
        # asyncio listens on every interface of the machine for "".
        "HOST",
    ],
)
def test_an_empty_value_is_refused_not_taken_for_the_default(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    said = refusal(monkeypatch, **{name: ""})
    assert said.startswith(f"invalid settings: CONVOGRAPH_{name}: is empty ("), said
    assert said.endswith("; unset it for the default"), said


def test_an_empty_host_flag_is_refused() -> None:
    with pytest.raises(SettingsError, match="--host: is empty"):
        Settings.from_env(host="")


@pytest.mark.parametrize("name", ["ENCRYPTION_KEY", "ENCRYPTION_PREVIOUS_KEY", "SECRET"])
def test_a_value_is_given_once(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    said = refusal(monkeypatch, **{name: KEY, f"{name}_FILE": "/run/secrets/key"})
    assert f"CONVOGRAPH_{name}_FILE: CONVOGRAPH_{name} is set too" in said
    assert "set one of the two" in said and KEY not in said


@pytest.mark.parametrize(
    ("variable", "meant"),
    [
        ("CONVOGRAPH_ENCRYPTON_KEY", "CONVOGRAPH_ENCRYPTION_KEY"),
        ("CONVOGRAPH_LOG_LEVLE", "CONVOGRAPH_LOG_LEVEL"),
        ("CONVOGRAPH_DATABASE_UR", "CONVOGRAPH_DATABASE_URL"),
        ("CONVOGRAPH_PORTS", "CONVOGRAPH_PORT"),
        ("CONVOGRAPH_SECERT", "CONVOGRAPH_SECRET"),
    ],
)
def test_a_variable_a_keystroke_or_two_from_a_setting_is_named_with_it(
    variable: str, meant: str
) -> None:
    assert misspelled({variable: "x", "PATH": "/bin"}) == [(variable, meant)]


@pytest.mark.parametrize(
    "variable",
    [
        "CONVOGRAPH_PORT",  # a setting
        "CONVOGRAPH_port",  # a setting: the names are not case-sensitive
        "CONVOGRAPH_URL",  # the adapters' own
        "CONVOGRAPH_TOKEN",
        "CONVOGRAPH_TEST_DATABASE_URL",  # the test suite's
        "CONVOGRAPH_ENCRYPTION_KEYS_ROTATED_AT",  # far from every setting
        "OTHER_PORTS",
    ],
)
def test_other_variables_are_left_alone(variable: str) -> None:
    assert misspelled({variable: "x"}) == []


def test_a_burst_without_a_rate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    said = refusal(monkeypatch, RATE_LIMIT_BURST="10")
    assert "CONVOGRAPH_RATE_LIMIT_BURST" in said and "RATE_LIMIT_PER_SECOND is 0" in said
    monkeypatch.setenv("CONVOGRAPH_RATE_LIMIT_PER_SECOND", "5")
    assert Settings.from_env().rate_limit_burst_size == 10


def test_a_mistyped_convograph_logger_is_refused_with_the_name_it_likely_meant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`convograph.acess=warning` was taken and set the level of no logger: the access log
    stayed on."""
    said = refusal(monkeypatch, LOG_LEVELS="convograph.acess=warning")
    assert "CONVOGRAPH_LOG_LEVELS: " in said
    assert "no logger convograph.acess: did you mean convograph.access?" in said
    monkeypatch.setenv("CONVOGRAPH_LOG_LEVELS", "convograph.access=warning,uvicorn.error=info")
    assert Settings.from_env().log_levels.startswith("convograph.access")


def test_the_known_loggers_are_the_ones_the_code_makes() -> None:
    graph = Path(__file__).resolve().parents[2] / "graph"
    named = {
        match
        for source in graph.rglob("*.py")
        for match in re.findall(r'getLogger\("(convograph[a-z_.]*)"\)', source.read_text())
    }
    assert named == LOGGERS
