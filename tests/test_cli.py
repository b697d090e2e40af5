"""The convograph command, run as `python -m graph` in a process of its own (forked from one
that imported convograph already: tests/fork_server.py) against a SQLite file.

What the CLI writes is then checked through the API of an app started in-process on the
same database file, the way a deployment uses the two together.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from graph.settings import Settings
from graph.store.encryption import generate_key
from graph.store.keyring import load_secret
from graph.store.migrate import head_revisions
from tests import fork_server
from tests.conftest import GraphQLClient
from tests.http_clients import TLS
from tests.ports import free_port, holds_port
from tests.test_http import serving

REPO = Path(__file__).resolve().parents[1]
SECRET = "cli-test-secret"
TOKEN = re.compile(r"cvg_[A-Za-z0-9_-]{20,}")
VIEWER = "{ viewer { workspace { key } ownerType ownerKey scopes } }"


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without any CONVOGRAPH_* setting, plus `values`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOGRAPH_")}
    return {**env, **values}


def graph(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m graph ARGS` to its end: forked (tests/fork_server.py), the same `main`."""
    if not fork_server.ENABLED:
        command = [sys.executable, "-m", "graph", *args]
        return subprocess.run(
            command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120
        )
    code, out, err = fork_server.run_graph_blocking(list(args), env=env, limit=120, cwd=cwd)
    return subprocess.CompletedProcess(args, code, out, err)


@dataclass
class Cli:
    url: str
    cwd: Path

    @property
    def settings(self) -> Settings:
        return Settings(database_url=self.url, secret=SECRET, sweep_interval_seconds=0)

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        env = clean_env(CONVOGRAPH_DATABASE_URL=self.url, CONVOGRAPH_SECRET=SECRET)
        result = graph(*args, env=env, cwd=self.cwd)
        if ok:
            assert result.returncode == 0, result.stderr
        return result

    def create(self, *args: str) -> str:
        """`token create …` and the token it printed."""
        return self("token", "create", *args).stdout.splitlines()[-1]

    def tokens(self) -> list[list[str]]:
        """`token list`, one list of fields per line."""
        return [line.split("\t") for line in self("token", "list").stdout.splitlines()]


@pytest.fixture
def cli(tmp_path: Path, sqlite_template: Path) -> Cli:
    path = tmp_path / "cli.db"
    shutil.copy(sqlite_template, path)
    return Cli(f"sqlite+aiosqlite:///{path}", tmp_path)


@asynccontextmanager
async def api(settings: Settings, token: str) -> AsyncIterator[GraphQLClient]:
    """A client of an app started in-process on the database the CLI wrote."""
    async with serving(settings) as (_, http):
        yield GraphQLClient(http, token)


async def run(cli: Cli, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(cli, *args, ok=ok)


# -- migrate ---------------------------------------------------------------------------------


async def test_migrate_a_fresh_database(tmp_path: Path) -> None:
    cli = Cli(f"sqlite+aiosqlite:///{tmp_path}/new/fresh.db", tmp_path)
    assert "newest revision" in (await run(cli, "migrate")).stdout
    assert (await run(cli, "migrate")).returncode == 0  # idempotent
    token = await asyncio.to_thread(cli.create, "--workspace", "site:1", "--owner", "user:u")
    async with api(cli.settings, token) as client:
        created = await client(
            'mutation { createConversation(input: {title: "t"}) { conversation { title } } }'
        )
        assert created["createConversation"]["conversation"] == {"title": "t"}


@pytest.mark.parametrize(
    "command",
    [
        ("token", "list"),
        ("token", "create", "--workspace", "site:1", "--owner", "user:u"),
        ("token", "revoke", "tok_x"),
        ("sweep",),
    ],
)
async def test_a_command_on_a_database_behind_this_release_says_to_migrate(
    cli: Cli, command: tuple[str, ...]
) -> None:
    """On a database downgraded (or not yet upgraded) below this release's schema, `token
    list` failed on a missing column ("no such column: api_token.successor_id") and `token
    create` and `sweep` went on writing in the old schema's shape."""
    await run(cli, "migrate", "--downgrade-to", "0012")
    path = Path(cli.url.removeprefix("sqlite+aiosqlite:///"))
    before = _dump(path)
    result = await run(cli, *command, ok=False)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        "error: the database of CONVOGRAPH_DATABASE_URL: its schema is behind this "
        "release's (convograph migrate upgrades it)\n"
    )
    assert _dump(path) == before  # nothing written
    assert "newest revision" in (await run(cli, "migrate")).stdout
    assert "behind" not in (await run(cli, *command, ok=False)).stderr  # then it runs


def _dump(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return list(db.iterdump())


def test_ctrl_c_stops_a_command_in_one_line(tmp_path: Path) -> None:
    """Ctrl-C printed some thirty lines of traceback (a KeyboardInterrupt chained to the
    CancelledError of asyncio's run). Here `token list` is interrupted while it waits for a
    PostgreSQL address that takes its connection and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(60)
        env = clean_env(
            CONVOGRAPH_DATABASE_URL=(
                f"postgresql+asyncpg://nobody@127.0.0.1:{listener.getsockname()[1]}/x"
            ),
            CONVOGRAPH_SECRET=SECRET,
            CONVOGRAPH_POOL_TIMEOUT_SECONDS="60",
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "graph", "token", "list"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            connection, _ = listener.accept()  # past its imports: in the command, waiting
            with connection:
                process.send_signal(signal.SIGINT)
                out, err = process.communicate(timeout=30)
        finally:
            process.kill()
    assert process.returncode == 130, err
    assert err.decode() == "interrupted: what was not committed was rolled back\n"
    assert out == b""


def test_ctrl_c_while_waiting_for_sqlites_write_lock_ends_without_a_traceback(cli: Cli) -> None:
    """The cancelled wait made SQLAlchemy terminate the connection the aiosqlite way, which
    the inline SQLite connection did not offer: a traceback ("terminate_force_close() not
    implemented by this DBAPI shim"), then "database is locked", exit 1. It stops once the
    wait for the lock ends, in one line."""
    path = Path(cli.url.removeprefix("sqlite+aiosqlite:///"))
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=cli.url,
        CONVOGRAPH_SECRET=SECRET,
        CONVOGRAPH_SQLITE_BUSY_TIMEOUT_MS="3000",
    )
    command = [sys.executable, "-m", "graph", "token", "create"]
    command += ["--workspace", "site:1", "--owner", "user:u"]
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        process = subprocess.Popen(
            command, env=env, cwd=cli.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            assert process.stderr is not None
            said = process.stderr.readline().decode()  # it says when it meets the lock
            assert "met a lock" in said, said
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        holder.execute("ROLLBACK")
    assert process.returncode == 130, err.decode()
    assert err.decode() == "interrupted: what was not committed was rolled back\n"
    assert out == b"" and cli.tokens() == []


@pytest.mark.parametrize("revision", ["9999", "", "head", "0017x"])
async def test_a_downgrade_to_no_lower_revision_is_refused_saying_so(
    cli: Cli, revision: str
) -> None:
    result = await run(cli, "migrate", "--downgrade-to", revision, ok=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error:"), (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "newest revision" in (await run(cli, "migrate")).stdout  # nothing changed


async def test_a_downgrade_says_the_revision_the_database_is_at(cli: Cli) -> None:
    """`0016@head` is Alembic's head of 0016's branch, the newest: nothing was done, and the
    command said "database is at revision 0016@head"."""
    (head,) = head_revisions()
    result = await run(cli, "migrate", "--downgrade-to", "0016@head")
    assert result.stdout == f"database is at revision {head}\n"
    result = await run(cli, "migrate", "--downgrade-to", " 0016 ")
    assert result.stdout == "database is at revision 0016\n"
    assert "newest revision" in (await run(cli, "migrate")).stdout


@pytest.mark.parametrize("revision", ["base", "0016@base"])
async def test_a_downgrade_below_the_first_revision_is_refused_and_drops_nothing(
    cli: Cli, revision: str
) -> None:
    # Below 0001 every table is dropped: no release runs on that, and the data went with it.
    token = await asyncio.to_thread(cli.create, "--workspace", "site:1", "--owner", "user:u")
    result = await run(cli, "migrate", f"--downgrade-to={revision}", ok=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error:") and "every table" in result.stderr
    assert "Traceback" not in result.stderr
    async with api(cli.settings, token) as client:
        assert (await client(VIEWER))["viewer"]["ownerKey"] == "u"


async def test_a_downgrade_past_0005_under_another_secret_says_so_and_keeps_the_tokens(
    cli: Cli,
) -> None:
    # 0005's downgrade opens every token's owner key with the server secret.
    token = await asyncio.to_thread(cli.create, "--workspace", "site:1", "--owner", "user:u")
    env = clean_env(CONVOGRAPH_DATABASE_URL=cli.url, CONVOGRAPH_SECRET="another-secret")
    args = ("migrate", "--downgrade-to", "0004")
    result = await asyncio.to_thread(graph, *args, env=env, cwd=cli.cwd)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: CONVOGRAPH_SECRET:"), result.stderr
    assert "Traceback" not in result.stderr
    assert "newest revision" in (await run(cli, "migrate")).stdout
    async with api(cli.settings, token) as client:
        assert (await client(VIEWER))["viewer"]["ownerKey"] == "u"


async def test_migrate_on_a_database_a_later_release_migrated_says_so_in_one_line(
    cli: Cli,
) -> None:
    # What a later release's migration leaves for this one to see: a revision it never had.
    with contextlib.closing(sqlite3.connect(cli.url.split("///", 1)[1])) as db, db:
        db.execute("UPDATE alembic_version SET version_num = '9018'")
    result = await run(cli, "migrate", ok=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: CONVOGRAPH_DATABASE_URL:"), result.stderr
    assert "9018" in result.stderr and "--no-migrate" in result.stderr
    assert "Traceback" not in result.stderr


# -- token create ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "scopes"),
    [
        ([], ["READ", "WRITE"]),
        (["--scope", "read"], ["READ"]),
        (["--scope", "write"], ["READ", "WRITE"]),
        (["--scope", "admin"], ["READ", "WRITE", "ADMIN"]),
    ],
)
async def test_token_create(cli: Cli, flags: list[str], scopes: list[str]) -> None:
    args = ["token", "create", "--workspace", "Site:7", "--owner", "user:a:b", *flags]
    result = await run(cli, *args, "--label", "ci bot")
    token = result.stdout.splitlines()[-1]
    assert TOKEN.fullmatch(token), result.stdout
    # Shown once: the last line of stdout, and nowhere else.
    assert (result.stdout + result.stderr).count(token) == 1
    assert TOKEN.findall(result.stdout + result.stderr) == [token]
    async with api(cli.settings, token) as client:
        assert (await client(VIEWER))["viewer"] == {
            "workspace": {"key": "site:7"},
            "ownerType": "USER",
            "ownerKey": "a:b",
            "scopes": scopes,
        }


@pytest.mark.parametrize(
    ("workspace", "owner", "complaint"),
    [
        ("site", "user:alice", "workspace"),
        ("site:", "user:alice", "workspace"),
        ("1site:2", "user:alice", "workspace"),
        ("si te:2", "user:alice", "workspace"),
        ("site:1", "alice", "owner"),
        ("site:1", "user:", "owner"),
        ("site:1", "robot:alice", "owner"),
        ("site:1", ":alice", "owner"),
    ],
)
async def test_token_create_refuses_invalid_names(
    cli: Cli, workspace: str, owner: str, complaint: str
) -> None:
    args = ["token", "create", "--workspace", workspace, "--owner", owner]
    result = await run(cli, *args, ok=False)
    assert result.returncode != 0
    assert result.stdout == ""
    assert complaint in result.stderr.lower()
    assert "Traceback" not in result.stderr
    assert await asyncio.to_thread(cli.tokens) == []


async def test_token_create_refuses_an_unknown_scope(cli: Cli) -> None:
    args = ["token", "create", "--workspace", "site:1", "--owner", "user:a", "--scope", "root"]
    result = await run(cli, *args, ok=False)
    assert result.returncode != 0
    assert "scope" in result.stderr
    assert await asyncio.to_thread(cli.tokens) == []


@pytest.mark.parametrize(
    ("value", "flag"), [("-1d", "--expires-in"), ("-30m", "--expires"), ("-1.5h", "--exp")]
)
@pytest.mark.parametrize("command", ["create", "rotate"])
async def test_a_negative_expires_in_is_told_what_a_duration_is(
    cli: Cli, command: str, value: str, flag: str
) -> None:
    """argparse took `-1d` for a flag and said only "argument --expires-in: expected one
    argument"; the flag abbreviated (which argparse accepts) as well."""
    where = ["--workspace", "site:1", "--owner", "user:a"] if command == "create" else ["an-id"]
    result = await run(cli, "token", command, *where, flag, value, ok=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"convograph token {command}: error: argument --expires-in: {value!r} is not a "
        "duration: a whole number above 0 and a unit, d, h, m or s (e.g. 30d, 12h)"
    )
    assert result.stdout == "" and await asyncio.to_thread(cli.tokens) == []


# -- token list and revoke -------------------------------------------------------------------


def test_token_list_shows_everything_but_the_token(cli: Cli) -> None:
    labelled = cli.create("--workspace", "site:1", "--owner", "runtime:r:1", "--label", "ci bot")
    plain = cli.create("--workspace", "blog:x y", "--owner", "user:Zoë", "--scope", "read")
    before = datetime.now(UTC)
    rows = {fields[2]: fields for fields in cli.tokens()}
    assert set(rows) == {"runtime:r:1", "user:Zoë"}
    bot, zoe = rows["runtime:r:1"], rows["user:Zoë"]
    assert bot[1:5] == ["site:1", "runtime:r:1", "read,write", "ci bot"]
    assert zoe[1:5] == ["blog:x y", "user:Zoë", "read", "-"]
    for fields in (bot, zoe):
        assert len(fields) == 9  # … created, revoked, expires, state
        assert re.fullmatch(r"[0-9a-f-]{36}", fields[0])
        created = datetime.fromisoformat(fields[5])
        assert before - timedelta(minutes=5) < created <= before
        assert fields[6] == "-"
    cli("token", "revoke", bot[0])
    after = {fields[0]: fields for fields in cli.tokens()}
    assert after[zoe[0]][6] == "-"
    assert datetime.fromisoformat(after[bot[0]][6]) >= datetime.fromisoformat(bot[5])
    listing = cli("token", "list")
    for token in (labelled, plain):
        assert token not in listing.stdout + listing.stderr
    assert TOKEN.search(listing.stdout + listing.stderr) is None


async def test_token_revoke_takes_effect_on_the_next_request(cli: Cli) -> None:
    token = await asyncio.to_thread(cli.create, "--workspace", "site:1", "--owner", "user:alice")
    (token_id,) = [fields[0] for fields in await asyncio.to_thread(cli.tokens)]
    keep = await asyncio.to_thread(cli.create, "--workspace", "site:1", "--owner", "user:alice")
    async with api(cli.settings, token) as client:
        assert (await client.post(VIEWER)).status_code == 200
        result = await run(cli, "token", "revoke", token_id)
        assert token_id in result.stdout
        # The same running app, the very next request.
        response = await client.post(VIEWER)
        assert response.status_code == 401
        assert response.json()["errors"][0]["message"]
        assert (await client.post(VIEWER, token=keep)).status_code == 200
    again = await run(cli, "token", "revoke", token_id, ok=False)
    assert again.returncode == 2
    assert token_id in again.stderr


@pytest.mark.parametrize("command", ["revoke", "rotate"])
async def test_revoke_and_rotate_refuse_an_unknown_id_alike(cli: Cli, command: str) -> None:
    """`token revoke` exited 1 (what a database failure exits) and `token rotate` 2 for the
    same mistake: an ID that names no token."""
    unknown = "00000000-0000-4000-8000-000000000000"
    result = await run(cli, "token", command, unknown, ok=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: no ") and unknown in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
    assert await asyncio.to_thread(cli.tokens) == []


# -- export-schema and sweep -----------------------------------------------------------------


def test_export_schema_prints_schema_graphql(cli: Cli) -> None:
    result = cli("export-schema")
    assert result.stdout == (REPO / "schema.graphql").read_text(), "run `make schema`"


async def test_sweep_removes_only_expired_conversations(cli: Cli) -> None:
    assert "removed 0 " in (await run(cli, "sweep")).stdout
    token = await asyncio.to_thread(cli.create, "--workspace", "site:1", "--owner", "user:u")
    create = """mutation($at: DateTime, $title: String) {
      createConversation(input: {title: $title, expiresAt: $at}) { conversation { id } }
    }"""
    async with api(cli.settings, token) as client:
        soon_at = datetime.now(UTC) + timedelta(seconds=2)  # still ahead on a loaded machine
        soon = soon_at.isoformat()
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        await client(create, {"at": soon, "title": "short-lived"})
        await client(create, {"at": later, "title": "long-lived"})
        await client(create, {"at": None, "title": "forever"})
        await asyncio.sleep(max(0.0, (soon_at - datetime.now(UTC)).total_seconds()) + 0.2)
        assert "removed 1 " in (await run(cli, "sweep")).stdout
        listed = await client("{ conversations { nodes { title } } }")
        titles = {n["title"] for n in listed["conversations"]["nodes"]}
        assert titles == {"long-lived", "forever"}
    assert "removed 0 " in (await run(cli, "sweep")).stdout


# -- serve -----------------------------------------------------------------------------------


class Served:
    """`python -m graph serve` in the background; its stdout is collected as it comes."""

    def __init__(
        self, database_url: str, cwd: Path, *flags: str, env: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.lines: list[str] = []
        self.log = cwd / f"serve-{self.port}.log"
        command = ["serve", "--port", str(self.port), "--database-url", database_url, *flags]
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "graph", *command],
                env=clean_env(**(env or {})),
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        # A reader thread, so that waiting for the server never blocks on the pipe.
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        self.lines.extend(self.process.stdout)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stdout(self) -> str:
        return "".join(self.lines)

    def wait_until_up(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            # Its own log, not an answer on the port, says that this server holds the port.
            held = holds_port(self.log.read_text(), self.port)
            assert held is not False, self.log.read_text()
            try:
                if (
                    held
                    and httpx.get(f"{self.url}/healthz", timeout=1, verify=TLS).status_code == 200
                ):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the server did not come up:\n{self.log.read_text()}")

    def viewer(self, token: str) -> httpx.Response:
        return httpx.post(
            f"{self.url}/graphql",
            json={"query": VIEWER},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
            verify=TLS,
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=5)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start servers in tmp_path; every one still running is stopped after the test."""
    started: list[Served] = []

    def start(database_url: str, *flags: str, env: dict[str, str] | None = None) -> Served:
        started.append(Served(database_url, tmp_path, *flags, env=env))
        started[-1].wait_until_up()
        return started[-1]

    yield start
    for server in started:
        if server.process.poll() is None:
            server.stop()


def test_serve_bootstraps_an_admin_token_once(tmp_path: Path, serve: Callable[..., Served]) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/db.sqlite"
    first = serve(url)
    printed = TOKEN.findall(first.stdout)
    assert len(printed) == 1, first.stdout
    token = printed[0]
    response = first.viewer(token)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["viewer"] == {
        "workspace": {"key": "default:default"},
        "ownerType": "SYSTEM",
        "ownerKey": "admin",
        "scopes": ["READ", "WRITE", "ADMIN"],
    }
    # Without CONVOGRAPH_SECRET, the secret is generated beside the database, owner-only.
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600
    first.stop()

    second = serve(url)
    response = second.viewer(token)
    assert response.status_code == 200, response.text  # the same secret, so the same token
    second.stop()
    assert TOKEN.search(second.stdout) is None, second.stdout
    assert OTHER_SECRET not in second.log.read_text()


OTHER_SECRET = "live API tokens can be accepted"


def test_serve_says_when_every_token_was_made_under_another_secret(
    tmp_path: Path, serve: Callable[..., Served]
) -> None:
    """A secret file lost and made anew (or another CONVOGRAPH_SECRET): every token is then
    refused with 401, and nothing at start said why."""
    url = f"sqlite+aiosqlite:///{tmp_path}/db.sqlite"
    first = serve(url)
    token = TOKEN.findall(first.stdout)[0]
    first.stop()
    (tmp_path / "secret").unlink()  # the next start makes a new one

    second = serve(url)
    assert second.viewer(token).status_code == 401
    second.stop()
    log = second.log.read_text()
    assert f"none of the 1 {OTHER_SECRET}" in log, log
    assert str(tmp_path / "secret") in log and "token create" in log
    assert TOKEN.search(second.stdout) is None  # no second ADMIN token made behind its back


def test_serve_on_a_port_already_taken_says_so_before_it_stores_anything(tmp_path: Path) -> None:
    """uvicorn found the port taken only once the app had started: the database was made and
    migrated, the bootstrap ADMIN token stored and printed by a command that then failed (exit
    3, after a few log lines), and the next `serve` printed no token."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = clean_env(CONVOGRAPH_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/db.sqlite")
        result = graph("serve", "--port", str(port), env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"error: CONVOGRAPH_HOST/--port: cannot listen on 127.0.0.1:{port}: "
        "Address already in use\n"
    )
    assert result.stdout == "" and list(tmp_path.iterdir()) == []


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """`path` (a file or a directory) read-only to this process: by its mode, or for root,
    whom a mode does not stop, by the immutable attribute where the file system has one."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"root writes through any mode, and chattr +i failed: {made.stderr!r}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize(
    "command",
    [
        ("serve", "--no-migrate"),
        ("serve",),
        ("migrate",),
        ("token", "create", "--workspace", "site:1", "--owner", "user:alice"),
        ("sweep",),
    ],
)
@pytest.mark.parametrize("which", ["file", "directory"])
def test_a_sqlite_database_that_cannot_be_written_is_named_before_anything_is_stored(
    tmp_path: Path, sqlite_template: Path, command: tuple[str, ...], which: str
) -> None:
    """SQLite opens a read-only file for reading: `serve` started, then stopped in a
    traceback (exit 3) at its first write, and `migrate` said the database was at the
    newest revision. A read-only directory (for the -wal and -shm) went the same way. The
    other commands that write said only "attempt to write a readonly database"."""
    path = tmp_path / "db" / "convograph.db"
    path.parent.mkdir()
    shutil.copy(sqlite_template, path)
    port = ("--port", str(free_port())) if command[0] == "serve" else ()
    env = clean_env(CONVOGRAPH_DATABASE_URL=f"sqlite+aiosqlite:///{path}")
    if which == "directory":  # else the secret that cannot be made beside it is said first
        env["CONVOGRAPH_SECRET"] = SECRET
    with read_only(path if which == "file" else path.parent):
        result = graph(*command, *port, env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    said = (
        f"the SQLite file {path} is read-only"
        if which == "file"
        else f"the directory {path.parent} is read-only: the SQLite database {path} needs "
        "its -wal and -shm made beside it"
    )
    assert result.stderr == f"error: the database of CONVOGRAPH_DATABASE_URL: {said}\n"
    assert result.stdout == "" and [p.name for p in path.parent.iterdir()] == [path.name]


def test_serve_without_migrating_waits_out_of_rotation_for_the_migration(
    tmp_path: Path, serve: Callable[..., Served]
) -> None:
    """A replica started before the migration (README, Upgrades): up, not ready, no token."""
    server = serve(f"sqlite+aiosqlite:///{tmp_path}/db.sqlite", "--no-migrate")
    ready = httpx.get(f"{server.url}/readyz", timeout=10, verify=TLS)
    assert ready.status_code == 503 and "not migrated" in ready.json()["status"]
    log = server.log.read_text()
    assert "no bootstrap token checked or made" in log and "Traceback" not in log
    assert TOKEN.search(server.stdout) is None


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("garbage", "text without a scheme"),
        ("postgresql://alice:s3cr3tpass@127.0.0.1/db", "through asyncpg"),
        ("sqlite:///./a.db", "through aiosqlite"),
        ("mysql://alice@127.0.0.1/db", "scheme 'mysql'"),
    ],
)
def test_a_database_url_convograph_cannot_use_is_refused_naming_the_variable(
    tmp_path: Path, url: str, says: str
) -> None:
    env = clean_env(CONVOGRAPH_DATABASE_URL=url, CONVOGRAPH_SECRET=SECRET)
    result = graph("migrate", env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "CONVOGRAPH_DATABASE_URL" in result.stderr and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "s3cr3tpass" not in result.stderr


def test_a_misspelled_setting_is_named_not_silently_ignored(tmp_path: Path) -> None:
    """A mistyped CONVOGRAPH_ENCRYPTON_KEY would otherwise store everything unencrypted."""
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}",
        CONVOGRAPH_SECRET=SECRET,
        CONVOGRAPH_ENCRYPTON_KEY="x",
        CONVOGRAPH_URL="http://127.0.0.1:8000/graphql",  # an adapter's: not a typo
    )
    result = graph("migrate", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "did you mean" in line]
    assert len(warned) == 1, result.stderr
    assert "CONVOGRAPH_ENCRYPTON_KEY" in warned[0] and "CONVOGRAPH_ENCRYPTION_KEY" in warned[0]


def test_serve_warns_of_a_misspelled_setting_in_its_log_format(
    tmp_path: Path, serve: Callable[..., Served]
) -> None:
    """The warning went out before the log was set up, in Python's default format: in a JSON
    log, a line no log shipper reads."""
    env = {"CONVOGRAPH_LOG_FORMAT": "json", "CONVOGRAPH_ENCRYPTON_KEY": "x"}
    server = serve(f"sqlite+aiosqlite:///{tmp_path}/db.sqlite", env=env)
    server.stop()
    lines = server.log.read_text().splitlines()
    warned = [line for line in lines if "did you mean" in line]
    assert len(warned) == 1, lines
    record = json.loads(warned[0])
    assert record["level"] == "warning" and "CONVOGRAPH_ENCRYPTION_KEY" in record["message"]


@pytest.mark.parametrize(
    "command",
    [
        ("token", "list"),
        ("token", "create", "--workspace", "site:1", "--owner", "user:a"),
        ("sweep",),
        ("migrate", "--downgrade-to", "0016"),
    ],
)
def test_a_sqlite_file_that_does_not_exist_is_refused_and_nothing_is_created(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A mistyped path made `token list` create the directories, an empty database and a
    secret there, then fail on a missing table; `token create` the same."""
    missing = tmp_path / "typo" / "convograph.db"
    env = clean_env(CONVOGRAPH_DATABASE_URL=f"sqlite+aiosqlite:///{missing}")
    result = graph(*command, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"error: CONVOGRAPH_DATABASE_URL: there is no SQLite database at {missing} "
        "(`convograph migrate` creates one)\n"
    )
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", [("migrate",), ("token", "list"), ("sweep",)])
def test_a_database_that_cannot_be_reached_is_said_in_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`token list` and `sweep` also printed a warning that the key store was unreachable,
    with encryption off."""
    url = f"postgresql+asyncpg://nobody@127.0.0.1:{free_port()}/x"
    env = clean_env(CONVOGRAPH_DATABASE_URL=url, CONVOGRAPH_SECRET=SECRET)
    result = graph(*command, env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: the database of CONVOGRAPH_DATABASE_URL: ")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", [("migrate",), ("serve",), ("token", "list"), ("sweep",)])
def test_a_database_that_never_answers_is_given_up_on_after_the_pool_timeout(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A PostgreSQL address that takes connections and never answers (a firewall that drops,
    a server hung): `migrate`, and `serve` with it, waited asyncpg's own minute whatever
    CONVOGRAPH_POOL_TIMEOUT_SECONDS said, then printed a bare TimeoutError."""
    with socket.socket() as listener:  # the kernel accepts; nobody ever answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"postgresql+asyncpg://nobody@127.0.0.1:{listener.getsockname()[1]}/x"
        env = clean_env(
            CONVOGRAPH_DATABASE_URL=url,
            CONVOGRAPH_SECRET=SECRET,
            CONVOGRAPH_POOL_TIMEOUT_SECONDS="1",
        )
        args = (*command, "--port", str(free_port())) if command == ("serve",) else command
        started = time.monotonic()
        result = graph(*args, env=env, cwd=tmp_path)
        waited = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: the database of CONVOGRAPH_DATABASE_URL: "), result
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert waited < 30, waited  # not asyncpg's minute


@pytest.mark.parametrize(
    ("flag", "args"),
    [
        # A byte that is not UTF-8 (0xff) reaches Python as a lone surrogate (PEP 383).
        ("--owner", ("--workspace", "site:1", "--owner", "user:a\udcff")),
        ("--workspace", ("--workspace", "site:\udcff", "--owner", "user:a")),
        ("--label", ("--workspace", "site:1", "--owner", "user:a", "--label", "l\udcff")),
    ],
)
async def test_an_argument_that_is_not_utf8_is_refused_by_name_and_nothing_is_written(
    cli: Cli, flag: str, args: tuple[str, ...]
) -> None:
    result = await run(cli, "token", "create", *args, ok=False)
    assert result.returncode == 2, result.stderr
    assert f"argument {flag}: not valid UTF-8 text" in result.stderr
    assert "Traceback" not in result.stderr
    assert await asyncio.to_thread(cli.tokens) == []


@pytest.mark.parametrize(
    ("flag", "args"),
    [
        ("--label", ("--workspace", "site:1", "--owner", "user:a", "--label", "a\tb")),
        ("--owner", ("--workspace", "site:1", "--owner", "user:a\nsite:2")),
        ("--workspace", ("--workspace", "site:1\x1b[2J", "--owner", "user:a")),
    ],
)
async def test_a_control_character_that_token_list_could_not_show_is_refused(
    cli: Cli, flag: str, args: tuple[str, ...]
) -> None:
    """A tab or a line break was stored, and `token list` printed the token's fields one
    column off, or over two lines."""
    result = await run(cli, "token", "create", *args, ok=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: argument {flag}: holds a control character")
    assert result.stdout == "" and await asyncio.to_thread(cli.tokens) == []


async def test_a_positional_argument_that_is_not_utf8_is_named_as_such(cli: Cli) -> None:
    result = await run(cli, "token", "revoke", "ab\udcff", ok=False)
    assert result.returncode == 2, result.stderr
    assert "error: argument ID: not valid UTF-8 text" in result.stderr, result.stderr


# -- the secret ------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", ["SECRET", "ENCRYPTION_KEY", "ENCRYPTION_PREVIOUS_KEY"])
def test_a_value_and_its_file_both_set_are_refused(cli: Cli, setting: str) -> None:
    """CONVOGRAPH_SECRET won silently over CONVOGRAPH_SECRET_FILE: an operator who moved the
    secret to a file and left the variable had tokens checked against the other secret. Now
    a value given both ways stops every command, one line naming both, nothing done."""
    value = generate_key()
    path = cli.cwd / "mounted"
    path.write_text(generate_key() + "\n")
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=cli.url,
        **{f"CONVOGRAPH_{setting}": value, f"CONVOGRAPH_{setting}_FILE": str(path)},
    )
    result = graph(
        "token", "create", "--workspace", "site:1", "--owner", "user:u", env=env, cwd=cli.cwd
    )
    assert result.returncode == 2, result
    assert result.stderr.strip() == (
        f"error: invalid settings: CONVOGRAPH_{setting}_FILE: CONVOGRAPH_{setting} is set "
        f"too: set one of the two (got {str(path)!r})"
    ), result.stderr
    assert value not in result.stderr and result.stdout == ""
    assert cli.tokens() == []


def test_a_key_store_in_the_databases_own_file_is_refused(cli: Cli) -> None:
    """CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE naming the database itself put the keys beside
    the data: every backup of the data held them, and a restored copy still opened what had
    been deleted (crypto-shredding undone). Now refused, exit 2, nothing done."""
    database = Path(cli.url.removeprefix("sqlite+aiosqlite:///"))
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=cli.url,
        CONVOGRAPH_SECRET=SECRET,
        CONVOGRAPH_ENCRYPTION_KEY=generate_key(),
        CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE=str(database.parent / "." / database.name),
    )
    result = graph(
        "token", "create", "--workspace", "site:1", "--owner", "user:u", env=env, cwd=cli.cwd
    )
    assert result.returncode == 2, result
    line = result.stderr.strip()
    assert line.startswith(
        "error: invalid settings: CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE: is the database's own file"
    ), line
    assert cli.tokens() == []
    with contextlib.closing(sqlite3.connect(database)) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert "data_key" not in tables


@pytest.mark.parametrize("schema", ["pg_keys", "public", "information_schema"])
def test_a_key_store_schema_that_is_not_its_own_is_refused(cli: Cli, schema: str) -> None:
    """`pg_keys` stopped `serve` in a traceback (PostgreSQL reserves pg_*); `public` put the
    keys among the data, in its backups."""
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=cli.url,
        CONVOGRAPH_SECRET=SECRET,
        CONVOGRAPH_ENCRYPTION_KEY_SCHEMA=schema,
    )
    result = graph("token", "list", env=env, cwd=cli.cwd)
    assert result.returncode == 2, result
    assert result.stderr.strip().startswith(
        "error: invalid settings: CONVOGRAPH_ENCRYPTION_KEY_SCHEMA: must be a schema of the "
        "key store's own"
    ), result.stderr


@pytest.mark.parametrize("setting", ["ENCRYPTION_KEY_FILE", "ENCRYPTION_PREVIOUS_KEY_FILE"])
def test_a_key_file_of_raw_bytes_is_refused_naming_it(cli: Cli, setting: str) -> None:
    """32 random bytes written as they are (`head -c 32 /dev/urandom`), not in base64: was a
    UnicodeDecodeError traceback."""
    path = cli.cwd / "raw.key"
    path.write_bytes(b"\x8a" + bytes(range(31)))
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=cli.url,
        CONVOGRAPH_SECRET=SECRET,
        **{f"CONVOGRAPH_{setting}": str(path)},
    )
    if setting != "ENCRYPTION_KEY_FILE":
        env["CONVOGRAPH_ENCRYPTION_KEY"] = generate_key()
    result = graph("token", "list", env=env, cwd=cli.cwd)
    assert result.returncode == 2, result
    assert result.stderr.strip() == (
        f"error: CONVOGRAPH_{setting}: {path} must be 32 random bytes in base64 "
        "(convograph keys generate)"
    ), result.stderr


def test_postgresql_without_a_shared_secret_is_refused_clearly(tmp_path: Path) -> None:
    """A secret generated beside one replica would make the others refuse its tokens."""
    result = graph(
        *("token", "create", "--workspace", "site:1", "--owner", "user:alice"),
        env=clean_env(CONVOGRAPH_DATABASE_URL="postgresql+asyncpg://nobody@127.0.0.1:1/x"),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "CONVOGRAPH_SECRET" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "data" / "secret").exists()


@pytest.mark.parametrize("given", ["missing", "empty"])
def test_postgresql_with_a_secret_file_that_holds_none_is_refused_clearly(
    tmp_path: Path, given: str
) -> None:
    """The file is the secret every replica was given: one missing or empty is refused, not
    replaced by a new secret under which every token stops working."""
    path = tmp_path / "run" / "secret"
    if given == "empty":
        path.parent.mkdir()
        path.write_text("\n")
    env = clean_env(
        CONVOGRAPH_DATABASE_URL="postgresql+asyncpg://nobody@127.0.0.1:1/x",
        CONVOGRAPH_SECRET_FILE=str(path),
    )
    result = graph("token", "list", env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "CONVOGRAPH_SECRET_FILE" in result.stderr and str(path) in result.stderr
    assert "Traceback" not in result.stderr
    assert path.exists() == (given == "empty")
    assert given == "missing" or path.read_text() == "\n"


@pytest.mark.parametrize("command", [("token", "list"), ("serve", "--no-migrate")])
def test_a_secret_that_cannot_be_created_is_named_not_blamed_on_the_database(
    cli: Cli, command: tuple[str, ...]
) -> None:
    """Said "error: the database of CONVOGRAPH_DATABASE_URL: [Errno 17] File exists" (a
    directory that cannot be written to: "Permission denied: '.secret.1234.abcd'"), and
    `serve` warned that the database was not ready."""
    (cli.cwd / "run").write_text("a file where the secret's directory should be")
    path = cli.cwd / "run" / "secret"
    env = clean_env(CONVOGRAPH_DATABASE_URL=cli.url, CONVOGRAPH_SECRET_FILE=str(path))
    port = ("--port", str(free_port())) if command[0] == "serve" else ()
    result = graph(*command, *port, env=env, cwd=cli.cwd)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        f"error: CONVOGRAPH_SECRET_FILE: cannot create the secret {path}: "
    ), result.stderr
    assert "database" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [("token", "list"), ("serve", "--no-migrate")])
@pytest.mark.parametrize("encrypted", [True, False])
def test_a_key_store_file_that_is_no_key_store_is_named_not_blamed_on_the_database(
    cli: Cli, command: tuple[str, ...], encrypted: bool
) -> None:
    """Said "error: the database of CONVOGRAPH_DATABASE_URL: file is not a database" (exit
    1), and `serve` warned that the database was not ready, then stopped in a traceback. With
    encryption off the key store is still read: one holding keys refuses the start."""
    store = cli.cwd / "keys"
    store.write_bytes(b"not a key store\n")
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=cli.url,
        CONVOGRAPH_SECRET=SECRET,
        CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE=str(store),
    )
    if encrypted:
        env["CONVOGRAPH_ENCRYPTION_KEY"] = generate_key()
    port = ("--port", str(free_port())) if command[0] == "serve" else ()
    result = graph(*command, *port, env=env, cwd=cli.cwd)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE: cannot use the key store {store}: "
        "file is not a database (damaged, or another file than a key store)"
    ), result.stderr
    assert "database of" not in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == "" and store.read_bytes() == b"not a key store\n"


@pytest.mark.parametrize(
    "command",
    [
        ("serve",),
        ("sweep",),
        ("token", "revoke", "x"),
        ("keys", "rotate"),
        ("keys", "encrypt-existing"),
    ],
)
def test_a_read_only_key_store_is_named_before_a_command_that_writes_starts(
    cli: Cli, command: tuple[str, ...]
) -> None:
    """SQLite opens a read-only key store for reading: `serve` started and answered every
    write that needed a new data key (a new conversation) with a masked INTERNAL error. A
    command that only reads still runs."""
    store = cli.cwd / "keys"
    env = clean_env(
        CONVOGRAPH_DATABASE_URL=cli.url,
        CONVOGRAPH_SECRET=SECRET,
        CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE=str(store),
        CONVOGRAPH_ENCRYPTION_KEY=generate_key(),
    )
    assert graph("token", "list", env=env, cwd=cli.cwd).returncode == 0 and store.exists()
    port = ("--port", str(free_port())) if command[0] == "serve" else ()
    with read_only(store):
        result = graph(*command, *port, env=env, cwd=cli.cwd)
        listed = graph("token", "list", env=env, cwd=cli.cwd)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"error: CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE: cannot use the key store {store}: "
        f"the SQLite file {store} is read-only\n"
    )
    assert result.stdout == "" and listed.returncode == 0, listed.stderr


def test_servers_started_together_on_sqlite_share_one_secret(tmp_path: Path) -> None:
    """The secret generated beside a new database: each first process reads the whole of
    the one that was linked into place first."""
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path}/db.sqlite")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        secrets = list(pool.map(lambda _: load_secret(settings), range(16)))
    assert len(set(secrets)) == 1 and len(secrets[0]) == 64
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]
