"""Real server processes on 127.0.0.1 (convograph and the floor) and a keep-alive HTTP client.

The servers run exactly as an operator would start them (uvicorn, one worker); the client is
http.client, the cheapest Python client, so sequential latencies carry little client cost.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from graph.__main__ import websockets_implementation

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    """One keep-alive connection; `post` returns (status, body, seconds spent on the wire)."""

    # uvicorn closes connections idle for 5 s; reconnecting after a pause (never retrying a
    # request that may have been executed) keeps every timed request on a live connection.
    IDLE_SECONDS = 2.0

    def __init__(self, port: int, headers: dict[str, str] | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.last_used = 0.0

    def _send(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes, float]:
        if time.monotonic() - self.last_used > self.IDLE_SECONDS:
            self.conn.close()
            self.conn.connect()  # before the clock starts: a timed request never pays for it
        start = time.perf_counter()
        self.conn.request(method, path, body, self.headers)
        response = self.conn.getresponse()
        data = response.read()
        seconds = time.perf_counter() - start
        self.last_used = time.monotonic()
        return response.status, data, seconds

    def post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        return self._send("POST", path, body)

    def get(self, path: str) -> int:
        return self._send("GET", path, None)[0]

    def close(self) -> None:
        self.conn.close()


def graphql_body(query: str, variables: dict[str, Any]) -> bytes:
    return orjson.dumps({"query": query, "variables": variables})


def check_data(status: int, body: bytes) -> dict[str, Any]:
    """The `data` of a GraphQL answer; raises on HTTP, GraphQL or user errors."""
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {body[:500]!r}")
    answer = orjson.loads(body)
    if answer.get("errors"):
        raise RuntimeError(f"GraphQL errors: {answer['errors']}")
    for payload in (answer.get("data") or {}).values():
        if isinstance(payload, dict) and payload.get("userErrors"):
            raise RuntimeError(f"userErrors: {payload['userErrors']}")
    return answer["data"]


class Process:
    """A server subprocess whose output goes to a log file (a full pipe would stall it)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, port: int) -> None:
        self.port = port
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_listening(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"server did not listen within {timeout}s:\n{self.log.read_text()}")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (every thread)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def status(self, field: str) -> int:
        """A `VmXXX:` figure of /proc/<pid>/status, in kB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise KeyError(field)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Convograph:
    """`python -m graph migrate`, `token create`, then `serve --no-migrate` on a fresh file."""

    def __init__(
        self, workdir: Path, *, max_messages_per_call: int, env: dict[str, str] | None = None
    ) -> None:
        """`env`: settings a bench changes besides these (each says which, and why)."""
        db = workdir / "db.sqlite"
        self.db_path = db
        self.env = {
            **os.environ,
            "CONVOGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{db}",
            "CONVOGRAPH_SECRET": "bench",
            # Otherwise the defaults an operator gets (the access log on, at info): only the
            # sweep is off, and the per-call cap raised for the 5,000-message saves.
            "CONVOGRAPH_SWEEP_INTERVAL_SECONDS": "0",
            "CONVOGRAPH_MAX_MESSAGES_PER_CALL": str(max_messages_per_call),
            **(env or {}),
        }
        self._cli("migrate")
        created = self._cli(
            "token", "create", "--workspace", "site:1", "--owner", "user:bench", "--scope", "write"
        )
        self.token = created.strip().splitlines()[-1]
        self.port = free_port()
        argv = [PYTHON, "-m", "graph", "serve", "--no-migrate", "--port", str(self.port)]
        self.process = Process(argv, self.env, workdir / "server.log", self.port)
        self.process.wait_listening()
        self.client = Client(self.port, {"Authorization": f"Bearer {self.token}"})
        if self.client.get("/healthz") != 200:
            raise RuntimeError("convograph /healthz is not 200")

    def _cli(self, *args: str) -> str:
        argv = [PYTHON, "-m", "graph", *args]
        done = subprocess.run(argv, env=self.env, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr}")
        return done.stdout

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"

    def gql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        status, body, _ = self.client.post("/graphql", graphql_body(query, variables))
        return check_data(status, body)

    def timed(self, body: bytes) -> float:
        """Seconds for one pre-encoded operation, checked for errors after the clock stops."""
        status, answer, seconds = self.client.post("/graphql", body)
        check_data(status, answer)
        return seconds

    def stop(self) -> None:
        self.client.close()
        self.process.stop()


class Floor:
    """bench/floor.py under uvicorn: one worker, the same event loop and HTTP parser. With
    `dsn`, bench/pg_floor.py over that PostgreSQL database instead."""

    def __init__(self, workdir: Path, *, dsn: str | None = None) -> None:
        self.port = free_port()
        if dsn is None:
            app, env = "bench.floor:app", {**os.environ, "FLOOR_DB": str(workdir / "floor.sqlite")}
        else:
            app, env = "bench.pg_floor:app", {**os.environ, "FLOOR_DSN": dsn}
        argv = [PYTHON, "-m", "uvicorn", app, "--port", str(self.port)]
        argv += ["--log-level", "warning", "--no-access-log"]
        self.process = Process(
            argv, env, workdir / f"{app.split('.')[1].split(':')[0]}.log", self.port
        )
        self.process.wait_listening()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/append"

    @property
    def grouped_url(self) -> str:
        """The same append with commits shared between concurrent requests."""
        return f"http://127.0.0.1:{self.port}/append-grouped"

    def stop(self) -> None:
        self.process.stop()


class WsFloor:
    """bench/ws_floor.py under uvicorn, with the WebSocket options `convograph serve` sets."""

    def __init__(self, workdir: Path, *, max_connections: int) -> None:
        self.port = free_port()
        argv = [PYTHON, "-m", "uvicorn", "bench.ws_floor:app", "--port", str(self.port)]
        argv += ["--log-level", "warning", "--no-access-log", "--lifespan", "off"]
        argv += ["--ws", websockets_implementation(compression=False)]
        argv += ["--ws-per-message-deflate", "false"]
        argv += ["--ws-max-size", str(4 * 256 * 1024)]
        argv += ["--limit-concurrency", str(max_connections)]
        self.process = Process(argv, dict(os.environ), workdir / "ws_floor.log", self.port)
        self.process.wait_listening()

    def stop(self) -> None:
        self.process.stop()


# The operations the HTTP figures send.
CREATE_CONVERSATION = """
mutation($title: String) {
  createConversation(input: {title: $title}) { conversation { id } userErrors { code message } }
}"""
APPEND = """
mutation($input: AppendMessagesInput!) {
  appendMessages(input: $input) {
    messages { seq } conversation { version } userErrors { code message }
  }
}"""
REPLACE = """
mutation($input: ReplaceTranscriptInput!) {
  replaceTranscript(input: $input) {
    conversation { version messageCount } userErrors { code message }
  }
}"""


def create_conversation(server: Convograph, title: str) -> str:
    data = server.gql(CREATE_CONVERSATION, {"title": title})
    return str(data["createConversation"]["conversation"]["id"])


COUNT = "query($id: ID!) { conversation(id: $id) { messageCount version } }"


def message_count(server: Convograph, conversation_id: str) -> int:
    return int(server.gql(COUNT, {"id": conversation_id})["conversation"]["messageCount"])


def append_body(conversation_id: str, messages: list[dict[str, Any]]) -> bytes:
    return graphql_body(
        APPEND, {"input": {"conversationId": conversation_id, "messages": messages}}
    )
