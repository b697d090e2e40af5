"""Live servers forked from a process that has imported convograph already.

A `python -m graph serve` spends about a second of CPU importing convograph, Strawberry,
SQLAlchemy and uvicorn before it serves; the suite starts a few hundred servers. Forked
from a process that imported them once (`python -m tests.fork_server`, one per pytest
worker), a server starts in milliseconds, and is otherwise the same program: `graph`'s
own `main` with the test's arguments, environment, working directory and log file, in a
process of its own (its own session, its own signals).

The forking process has no event loop, thread or connection, and reads nothing of the
environment at import that a server would read later, so a forked server cannot tell it
apart from a fresh one. It reaps its children and writes each one's exit status (as
asyncio reports it: the code, or minus the signal) to the file the test named, which is
how `ForkedProcess` learns it. It waits for a request and for a child's exit in one
select() (the SIGCHLD handler's wakeup fd is in it): blocked in a read of stdin instead, it
handled a SIGCHLD that came between its last look at signals and the read only once the
next request came, which a test waiting for that exit never sent.
CONVOGRAPH_TEST_FORK_SERVER=0 starts every server as a fresh process instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENABLED = os.environ.get("CONVOGRAPH_TEST_FORK_SERVER", "1") != "0"
REAP_TIMEOUT = 10.0  # a killed command's status is written within it
# What `serve` imports, imported once here (serve_forks): the package, and what it imports
# as it starts (its event loop, protocols and database drivers).
PRELOADED = (
    "aiosqlite",
    "asyncpg",
    "concurrent.futures.thread",
    "encodings.idna",
    "sqlalchemy.dialects.postgresql.asyncpg",
    "sqlalchemy.dialects.sqlite.aiosqlite",
    "uvicorn",
    "uvicorn.lifespan.on",
    "uvicorn.loops.uvloop",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
    "uvicorn.protocols.websockets.wsproto_impl",
    "uvloop",
    "graph.__main__",
    "graph.app",
    "graph.server.header_timeout",
    "graph.server.heap",
    "graph.server.logs",
    "graph.server.shutdown",
    "graph.store.migrate",
)


class ForkedProcess:
    """The part of asyncio.subprocess.Process that the live servers use, for a forked one."""

    def __init__(self, pid: int, status_path: Path) -> None:
        self.pid = pid
        self._status_path = status_path

    @property
    def returncode(self) -> int | None:
        try:
            return int(self._status_path.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def send_signal(self, sig: int) -> None:
        # Once reaped, the pid may be another process's: as asyncio does, refuse.
        if self.returncode is not None:
            raise ProcessLookupError(self.pid)
        os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        # Not our child: nothing to await but the status file the fork server writes.
        while (code := self.returncode) is None:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        return code


class _Client:
    """This pytest process's fork server (started on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.fork_server"],
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        return self._process

    def fork(
        self,
        args: list[str],
        *,
        env: dict[str, str],
        log_path: Path,
        err_path: Path | None,
        cwd: Path = ROOT,
    ) -> ForkedProcess:
        status_path = log_path.with_name(log_path.name + ".exit")
        request = {
            "args": args,
            "env": env,
            "cwd": str(cwd),
            "log": str(log_path),
            "err": str(err_path or log_path),
            "status": str(status_path),
        }
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            answer = process.stdout.readline()
        if not answer:
            raise RuntimeError("the fork server exited")
        return ForkedProcess(int(json.loads(answer)["pid"]), status_path)


_client = _Client()


async def fork_graph(
    args: list[str], *, env: dict[str, str], log_path: Path, err_path: Path | None = None
) -> ForkedProcess:
    """`python -m graph ARGS`, forked: its output goes to `log_path` (its stderr to
    `err_path`, when given)."""
    return await asyncio.to_thread(
        _client.fork, args, env=env, log_path=log_path, err_path=err_path
    )


def run_graph_blocking(
    args: list[str], *, env: dict[str, str], limit: float, cwd: Path = ROOT
) -> tuple[int, str, str]:
    """`python -m graph ARGS` to its end, forked, in `cwd`: (exit code, stdout, stderr), as
    tests/commands.py's run_command gives them; a failure when it overruns `limit`."""
    with tempfile.TemporaryDirectory(prefix="graph-command-") as folder:
        out, err = Path(folder) / "out", Path(folder) / "err"
        process = _client.fork(args, env=env, log_path=out, err_path=err, cwd=cwd)
        deadline = time.monotonic() + limit
        while (code := process.returncode) is None:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                # A bounded wait for the reaping: a fork server that never writes the status
                # must fail the test, not hang it.
                reaped_by = time.monotonic() + REAP_TIMEOUT
                while process.returncode is None and time.monotonic() < reaped_by:
                    time.sleep(0.02)
                raise AssertionError(f"`graph {' '.join(args)}` did not finish in {limit:.0f} s")
            time.sleep(0.02)
        return code, out.read_text(errors="replace"), err.read_text(errors="replace")


async def run_graph(args: list[str], *, env: dict[str, str], limit: float) -> tuple[int, str, str]:
    """run_graph_blocking, off the event loop."""
    return await asyncio.to_thread(run_graph_blocking, args, env=env, limit=limit)


# The fork server itself.

_children: dict[int, str] = {}


def _reap(_signum: int, _frame: FrameType | None) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = _children.pop(pid, None)
        if path is not None:
            temporary = f"{path}.tmp"
            Path(temporary).write_text(str(os.waitstatus_to_exitcode(status)))
            os.replace(temporary, path)


def _child(request: dict[str, Any]) -> None:
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        for fd in request["close"]:
            os.close(fd)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["log"]), (2, request["err"])):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [str(ROOT / "graph" / "__main__.py"), *request["args"]]
        from graph.__main__ import main

        code = main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        import logging

        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve_forks() -> None:
    """Read fork requests (JSON lines) on stdin; answer each with the child's pid."""
    for module in PRELOADED:
        importlib.import_module(module)
    from graph.api.schema import build_schema
    from graph.settings import Settings

    # What every server builds before it serves, once: the schema for the default limits
    # (build_schema keeps it; a server with other limits builds its own). Then everything
    # here is frozen, as a server's heap.settle() freezes what exists once its app is built:
    # each child's full collection, at settle() and after, walks only what it made itself,
    # not every module imported here again.
    build_schema(Settings())
    gc.collect()
    gc.freeze()

    # A SIGCHLD writes a byte to `woken`, so that select() returns for it even when it came
    # just before the call; the handler (_reap) then runs as soon as Python code does.
    woken, wake = os.pipe()
    os.set_blocking(woken, False)
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for pytest, which stops us
    stdin = sys.stdin.buffer.fileno()
    pending = b""
    while True:
        readable, _, _ = select.select([stdin, woken], [], [])
        if woken in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(woken, 512):
                    pass
        if stdin not in readable:
            continue
        chunk = os.read(stdin, 1 << 16)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            _fork({**json.loads(line), "close": [woken, wake]})


def _fork(request: dict[str, Any]) -> None:
    """Fork the child `request` asks for, record it, and answer with its pid."""
    sys.stdout.flush()
    # SIGCHLD waits while the child is recorded, so that no exit goes unwritten.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        _child(request)
    _children[pid] = request["status"]
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    sys.stdout.write(json.dumps({"pid": pid}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    serve_forks()
