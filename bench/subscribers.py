"""Subscribers (issue 13, item 5): many WebSocket subscribers on one conversation.

A convograph server with its default settings; `--subscribers` graphql-transport-ws clients
(spread over `--processes` client processes, so that the clients' own parsing does not
queue behind one event loop) each subscribe to one conversation's events. Then `--events`
appends are written one after another, `--gap` seconds apart, and every subscriber notes
when each event reached it: delivery is that time minus the time the append was sent, over
every (event, subscriber) pair, p50 and p99. Memory per subscriber is the server's resident
memory with them all subscribed, less before, divided by their number. Then `--idle`
WebSocket connections (initialised, no subscription) are held at once, and the server's
peak resident memory is read against figure 7's target; the same idle connections are then
held by bench/ws_floor.py (uvicorn and a bare ASGI app), for what uvicorn alone holds per
connection. The one setting changed from the defaults is CONVOGRAPH_MAX_CONNECTIONS (1,000
per process by default, nine tenths of them for WebSockets), raised to hold them.

    .venv/bin/python -m bench.subscribers [--subscribers 1000] [--idle 10000]

Everything talks to 127.0.0.1 only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

from .memory import TARGET_MB
from .report import median, p99
from .servers import Convograph, Process, WsFloor, append_body, create_conversation

WATCH = """subscription Watch($id: ID!) {
  conversationEvents(conversationId: $id) { kind version } }"""
PROTOCOL = "graphql-transport-ws"
TIMEOUT = 60.0


async def open_socket(url: str, token: str, subscribe: str | None, *, query: str = WATCH) -> Any:
    """A graphql-transport-ws connection, acknowledged; subscribed to conversation
    `subscribe`'s events with `query`, unless None."""
    socket = await websockets.connect(
        url,
        subprotocols=[websockets.Subprotocol(PROTOCOL)],
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=TIMEOUT,
        max_queue=None,
    )
    await socket.send(json.dumps({"type": "connection_init", "payload": {}}))
    ack = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
    if ack["type"] != "connection_ack":
        raise RuntimeError(f"expected connection_ack, got {ack}")
    if subscribe is not None:
        message = {"query": query, "variables": {"id": subscribe}}
        await socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": message}))
    return socket


async def _clients(
    url: str, token: str, count: int, subscribe: str | None, events: int, ready: Any, go: Any
) -> list[tuple[int, float]]:
    sockets = []
    for start in range(0, count, 100):  # in waves: the server's accept queue is finite
        batch = [open_socket(url, token, subscribe) for _ in range(min(100, count - start))]
        sockets.extend(await asyncio.gather(*batch))
    ready.put(len(sockets))
    received: list[tuple[int, float]] = []

    async def listen(socket: Any) -> None:
        for _ in range(events):
            message = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
            if message["type"] != "next":
                raise RuntimeError(f"expected an event, got {message}")
            version = message["payload"]["data"]["conversationEvents"]["version"]
            received.append((version, time.time()))

    if subscribe is not None:
        await asyncio.gather(*(listen(s) for s in sockets))
    else:
        await asyncio.get_running_loop().run_in_executor(None, go.wait, TIMEOUT * 5)
    for socket in sockets:
        await socket.close()
    return received


def _client_process(
    url: str, token: str, count: int, subscribe: str | None, events: int, ready: Any, go: Any
) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    received = asyncio.run(_clients(url, token, count, subscribe, events, ready, go))
    ready.put(received)


def _spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _active_subscriptions(server: Convograph) -> float:
    text = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("convograph_graphql_active_subscriptions "):
            return float(line.split()[1])
    return 0.0


def _rss_mb(process: Process, field: str = "VmRSS") -> float:
    return process.status(field) / 1024


def _hold_idle(
    context: Any, url: str, token: str, idle: int, processes: int, server: Process
) -> tuple[int, float]:
    """Open `idle` initialised connections at once to `url`; how many were held, and the
    server's resident memory (MB) while they were."""
    ready, go = context.Queue(), context.Event()
    workers = [
        context.Process(target=_client_process, args=(url, token, n, None, 0, ready, go))
        for n in _spread(idle, processes)
    ]
    for worker in workers:
        worker.start()
    held = sum(ready.get(timeout=TIMEOUT * 5) for _ in workers)
    rss = _rss_mb(server)
    go.set()
    for _ in workers:
        ready.get(timeout=TIMEOUT * 2)
    for worker in workers:
        worker.join(TIMEOUT)
    return held, rss


def run(
    workdir: Path, *, subscribers: int, idle: int, events: int, gap: float, processes: int
) -> dict[str, Any]:
    # WebSockets may hold nine tenths of the connections (the rest stays for HTTP).
    os.environ["CONVOGRAPH_MAX_CONNECTIONS"] = str(max(subscribers, idle) * 10 // 9 + 100)
    server = Convograph(workdir, max_messages_per_call=100)
    context = multiprocessing.get_context("spawn")
    try:
        cid = create_conversation(server, "subscribers")
        ws_url = f"ws://127.0.0.1:{server.port}/graphql"
        body = append_body(cid, [{"role": "user", "content": "warm"}])
        for _ in range(20):
            server.timed(body)
        base_rss = _rss_mb(server.process)

        ready, go = context.Queue(), context.Event()
        workers = [
            context.Process(
                target=_client_process, args=(ws_url, server.token, n, cid, events, ready, go)
            )
            for n in _spread(subscribers, processes)
        ]
        for worker in workers:
            worker.start()
        opened = sum(ready.get(timeout=TIMEOUT * 2) for _ in workers)
        deadline = time.monotonic() + TIMEOUT
        while _active_subscriptions(server) < subscribers and time.monotonic() < deadline:
            time.sleep(0.1)
        live = _active_subscriptions(server)
        subscribed_rss = _rss_mb(server.process)
        version = int(
            server.gql("query($id: ID!) { conversation(id: $id) { version } }", {"id": cid})[
                "conversation"
            ]["version"]
        )
        sent: dict[int, float] = {}
        cpu = server.process.cpu_seconds()
        for _ in range(events):
            version += 1
            sent[version] = time.time()
            server.timed(body)
            time.sleep(gap)
        delays = []
        for _ in workers:
            for got_version, at in ready.get(timeout=TIMEOUT * 2):
                delays.append((at - sent[got_version]) * 1000)
        # The server's CPU for the events: each append and its deliveries to every subscriber.
        cpu = server.process.cpu_seconds() - cpu
        for worker in workers:
            worker.join(TIMEOUT)

        before_idle = _rss_mb(server.process)
        held, idle_rss = _hold_idle(context, ws_url, server.token, idle, processes, server.process)
        peak = _rss_mb(server.process, "VmHWM")
    finally:
        server.stop()
    floor = WsFloor(workdir, max_connections=idle + 100)
    try:
        floor_base = _rss_mb(floor.process)
        floor_held, floor_rss = _hold_idle(
            context, f"ws://127.0.0.1:{floor.port}/", "", idle, processes, floor.process
        )
    finally:
        floor.stop()
    expected = subscribers * events
    return {
        "subscribers": subscribers,
        "opened": opened,
        "live": live,
        "deliveries": len(delays),
        "expected_deliveries": expected,
        "delivery_ms_p50": round(median(delays), 1) if delays else None,
        "delivery_ms_p99": round(p99(delays), 1) if delays else None,
        "server_cpu_ms_per_event": round(cpu * 1000 / events, 1),
        "rss_before_mb": round(base_rss, 1),
        "rss_subscribed_mb": round(subscribed_rss, 1),
        "kb_per_subscriber": round((subscribed_rss - base_rss) * 1024 / subscribers, 1),
        "idle_connections": held,
        "rss_with_idle_mb": round(idle_rss, 1),
        "peak_rss_mb": round(peak, 1),
        "peak_rss_target_mb": TARGET_MB,
        "kb_per_idle_connection": round((idle_rss - before_idle) * 1024 / max(held, 1), 1),
        # The same idle connections held by uvicorn alone (bench/ws_floor.py).
        "floor_idle_connections": floor_held,
        "floor_rss_before_mb": round(floor_base, 1),
        "floor_rss_with_idle_mb": round(floor_rss, 1),
        "floor_kb_per_idle_connection": round(
            (floor_rss - floor_base) * 1024 / max(floor_held, 1), 1
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--gap", type=float, default=0.2)
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-subscribers-"))
    try:
        figures = run(
            workdir,
            subscribers=args.subscribers,
            idle=args.idle,
            events=args.events,
            gap=args.gap,
            processes=args.processes,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
