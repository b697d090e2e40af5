"""A real convograph server in a child process, for tests that need one (WebSocket
subscriptions, crash recovery, concurrency across processes).

The server is `python -m graph serve` (uvicorn, one worker) on a free 127.0.0.1 port, over
the database URL it is given, with `CONVOGRAPH_SECRET` set; it is ready once `/healthz`
answers. Its stdout and stderr go to a log file that a failing test can print. It is
forked from a process that imported convograph once (fork_server.py), so that a start
costs milliseconds instead of a second of imports.

Use it through the fixtures, registering this module as a plugin of the test module (an
ordinary import before that would keep pytest from rewriting its asserts):

    if TYPE_CHECKING:
        from tests.live_server import LiveServer

    pytest_plugins = ["tests.live_server"]

    async def test_something(live_server: LiveServer) -> None:
        token = await live_server.token(owner="user:alice")
        ...  # talk to live_server.http_url / live_server.ws_url

`live_server` is one server over conftest's fresh per-test `database_url` (SQLite or
PostgreSQL). `live_servers` is a factory, `await live_servers.start(database_url, ...)`,
for several servers (e.g. two replicas on one database), and `await
live_servers.restart(server)` starts a new server on the same database (after `stop()` or a
crash by `kill()`); every server it started is stopped at teardown, and a failing test's
report shows their logs.

The database must be migrated already (conftest's databases are), unless `migrate=True`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests import fork_server
from tests.commands import run_command
from tests.conftest import TEST_ENCRYPTION, TEST_MASTER_KEY, GraphQLClient
from tests.http_clients import http_client
from tests.pg_databases import admin
from tests.ports import free_port, holds_port

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SECRET = "live-server-test-secret"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
CLI_TIMEOUT = 30.0
HTTP_TIMEOUT = 30.0
PORT_ATTEMPTS = 3
_STARTS = itertools.count(1)


class ServerFailed(RuntimeError):
    """The server did not come up, or a CLI command against its database failed."""


@dataclass
class LiveServer:
    """One running server process; `http_url`/`ws_url` point at its GraphQL endpoint."""

    database_url: str
    secret: str
    port: int
    log_path: Path
    env: dict[str, str]
    process: asyncio.subprocess.Process | fork_server.ForkedProcess | None = field(
        default=None, repr=False
    )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        return f"{self.base_url}/graphql"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/graphql"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def logs(self) -> str:
        """Everything the server printed so far (for assertion messages)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    async def cli(self, *args: str) -> str:
        """Run `python -m graph ARGS --database-url URL` with this server's secret; its stdout."""
        return await run_cli(*args, database_url=self.database_url, env=self.env)

    async def token(
        self,
        workspace: str = "site:1",
        owner: str = "user:alice",
        scope: str = "write",
        label: str | None = None,
    ) -> str:
        """A new bearer token, made as `token create` makes it, in this process: the command
        itself is tested in test_cli.py, and a process per token would cost a second each."""
        from graph.domain.principal import SYSTEM, Scope, parse_owner, parse_workspace
        from graph.services import build_services
        from graph.settings import Settings

        services = build_services(
            Settings(
                database_url=self.database_url,
                # The server's own: its file, or else its value (never both).
                secret_file=self.env.get("CONVOGRAPH_SECRET_FILE"),
                secret=None
                if "CONVOGRAPH_SECRET_FILE" in self.env
                else self.env.get("CONVOGRAPH_SECRET", self.secret),
                sweep_interval_seconds=0,
            )
        )
        try:
            async with services.uow.write(SYSTEM) as repo:
                _, token = await repo.tokens.create(
                    workspace=parse_workspace(workspace),
                    owner=parse_owner(owner),
                    scope_=Scope(scope.upper()),
                    label=label,
                )
        finally:
            await services.db.dispose()
        return token

    @contextlib.asynccontextmanager
    async def client(self, token: str | None = None) -> AsyncIterator[GraphQLClient]:
        """conftest's GraphQLClient, talking HTTP to this server with `token`: httpx with its
        defaults, as a user's runtime (test_keep_alive.py says why that is safe), but for the
        TLS context it would build (http_clients.py)."""
        async with http_client(base_url=self.base_url, timeout=HTTP_TIMEOUT) as http:
            yield GraphQLClient(http, token)

    async def stop(self) -> None:
        """Graceful stop (SIGTERM), then SIGKILL if it does not exit in time. Idempotent."""
        await self._end(signal.SIGTERM)

    async def kill(self) -> None:
        """Crash the server (SIGKILL): no shutdown hook runs, as on a power cut."""
        await self._end(signal.SIGKILL)

    async def _end(self, sig: signal.Signals) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def graph_command(*args: str, env: dict[str, str], limit: float) -> tuple[int, str, str]:
    """`python -m graph ARGS` (forked, see fork_server.py): (exit code, stdout, stderr)."""
    if fork_server.ENABLED:
        return await fork_server.run_graph(list(args), env=env, limit=limit)
    return await run_command(sys.executable, "-m", "graph", *args, cwd=ROOT, env=env, limit=limit)


async def run_cli(*args: str, database_url: str, env: dict[str, str]) -> str:
    """Run one `python -m graph` command and return its stdout; ServerFailed when it fails."""
    code, out, err = await graph_command(
        *args, "--database-url", database_url, env=env, limit=CLI_TIMEOUT
    )
    if code != 0:
        raise ServerFailed(f"`graph {' '.join(args)}` exited {code}: {err}")
    return out


def server_env(secret: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ours without CONVOGRAPH_* settings, plus the test's."""
    extra = extra or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOGRAPH_")}
    env.update(
        CONVOGRAPH_LOG_FORMAT="text",
        CONVOGRAPH_SWEEP_INTERVAL_SECONDS="0",
        PYTHONUNBUFFERED="1",
    )
    # A value or its file, never both (the server refuses both): a test that gives the
    # file gets no default value beside it.
    if "CONVOGRAPH_SECRET_FILE" not in extra:
        env["CONVOGRAPH_SECRET"] = secret
    if TEST_ENCRYPTION and "CONVOGRAPH_ENCRYPTION_KEY_FILE" not in extra:
        env["CONVOGRAPH_ENCRYPTION_KEY"] = TEST_MASTER_KEY  # as the in-process servers'
    env.update(extra)
    return env


async def start_server(
    database_url: str,
    *,
    log_dir: Path,
    secret: str = DEFAULT_SECRET,
    env: dict[str, str] | None = None,
    migrate: bool = False,
) -> LiveServer:
    """Start a server over `database_url` and wait until /healthz answers.

    `env` adds CONVOGRAPH_* settings; `migrate` lets `serve` upgrade the database first.
    Another process may take the chosen port between probe and bind: then a new port is tried.
    """
    child_env = server_env(secret, env)
    await asyncio.to_thread(log_dir.mkdir, parents=True, exist_ok=True)
    for attempt in range(PORT_ATTEMPTS):
        port = free_port()
        # Its own file, never another start's: a forked server's exit status is written
        # beside its log, and a start on a port another server holds (tried, refused) shared
        # that server's status, which then said it had exited: its stop did nothing.
        log_path = log_dir / f"server-{port}-{next(_STARTS)}.log"
        server = LiveServer(database_url, secret, port, log_path, child_env)
        args = ["serve", "--host", "127.0.0.1", "--port", str(port)]
        if not migrate:
            args.append("--no-migrate")
        argv = [*args, "--database-url", database_url]
        if fork_server.ENABLED:
            server.process = await fork_server.fork_graph(argv, env=child_env, log_path=log_path)
        else:
            with log_path.open("wb") as log:
                server.process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "graph",
                    *argv,
                    cwd=ROOT,
                    env=child_env,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    stdin=asyncio.subprocess.DEVNULL,
                )
        if await _wait_healthy(server):
            return server
        await server.kill()
        if holds_port(server.logs(), port) is not False or attempt == PORT_ATTEMPTS - 1:
            raise ServerFailed(f"the server did not become healthy:\n{server.logs()}")
    raise AssertionError("unreachable")


async def _wait_healthy(server: LiveServer) -> bool:
    """Whether the server came up on its own port (an answer there alone does not say)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    async with http_client(timeout=2) as http:
        while loop.time() < deadline and server.running:
            held = holds_port(server.logs(), server.port)
            if held is False:
                return False
            if held and await _healthy(http, server):
                return True
            await asyncio.sleep(0.05)
    return False


async def _healthy(http: httpx.AsyncClient, server: LiveServer) -> bool:
    try:
        response = await http.get(f"{server.base_url}/healthz")
    except httpx.TransportError:
        return False
    return response.status_code == 200 and response.json().get("database") == "up"


class LiveServers:
    """Starts servers for one test and stops all of them when it ends."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[LiveServer] = []

    async def start(
        self,
        database_url: str,
        *,
        secret: str = DEFAULT_SECRET,
        env: dict[str, str] | None = None,
        migrate: bool = False,
    ) -> LiveServer:
        server = await start_server(
            database_url, log_dir=self.log_dir, secret=secret, env=env, migrate=migrate
        )
        self.started.append(server)
        return server

    async def restart(self, server: LiveServer) -> LiveServer:
        """Stop `server` (if still running) and start a new one on its database and settings."""
        await server.stop()
        return await self.start(server.database_url, secret=server.secret, env=server.env)

    async def stop_all(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.started))
        # pytest shows a test's captured output only when it fails: then the logs explain it.
        for server in self.started:
            print(f"--- live server on port {server.port} ---\n{server.logs()}")


@pytest.fixture
async def live_servers(database_url: str, tmp_path: Path) -> AsyncIterator[LiveServers]:
    """A factory of live servers, each stopped at teardown.

    It depends on `database_url` so that its servers stop before that database is dropped.
    """
    servers = LiveServers(tmp_path / "live-server-logs")
    try:
        yield servers
    finally:
        await servers.stop_all()


@pytest.fixture
async def key_store_env(database_url: str) -> AsyncIterator[dict[str, str]]:
    """The setting that gives a test's servers and commands a key store of its own, for
    encryption at rest: on PostgreSQL a schema, dropped after (the database's reset between
    tests empties only the data); nothing on SQLite, whose store is beside the test's file."""
    if database_url.startswith("sqlite"):
        yield {}
        return
    schema = f"keys_{uuid.uuid4().hex[:12]}"
    yield {"CONVOGRAPH_ENCRYPTION_KEY_SCHEMA": schema}
    await admin(database_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
async def live_server(database_url: str, live_servers: LiveServers) -> LiveServer:
    """One live server over this test's fresh database."""
    return await live_servers.start(database_url)
