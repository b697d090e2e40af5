"""A burst larger than a subscriber's queue: a root's expiry changed, with `--children`
child transcripts below it (one CONVERSATION_UPDATED each, all in one transaction), to
`--subscribers` subscribers of the root.

Two servers side by side on fresh SQLite files, alike but for
CONVOGRAPH_SUBSCRIBER_QUEUE_SIZE: one whose queue holds the whole burst, and one with the
default (1,000), whose subscribers drop their queues and read the burst from the event log.
Each run changes the root's expiry on both, one after the other (which goes first
alternates), and times from the mutation sent until every subscriber has every event of
the burst: the medians, and the ratio log / queue. Every subscriber must get each event
once, in order (consecutive positions), and a live event after it: the bench fails if not.

    .venv/bin/python -m bench.burst [--children 1500] [--subscribers 20] [--runs 5]

Everything talks to 127.0.0.1 only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from graph.domain import cursors

from .report import median
from .servers import Convograph, create_conversation
from .subscribers import open_socket

WATCH = """subscription Watch($id: ID!) {
  conversationEvents(conversationId: $id) { kind conversationId cursor } }"""
DELEGATE = """mutation($parent: ID!) {
  createDelegation(input: {parentConversationId: $parent, delegatingTier: "lead",
                           targetTier: "worker", task: "sub-task"}) {
    delegation { id } userErrors { code message } } }"""
EXPIRE = """mutation($id: ID!, $at: DateTime) {
  updateConversation(input: {id: $id, expiresAt: $at}) { userErrors { code message } } }"""
TOUCH = """mutation($id: ID!) {
  updateConversation(input: {id: $id, markRead: true}) { userErrors { code message } } }"""
TIMEOUT = 60.0
# How long a subscriber waits for a touch's event before it is touched again.
SETTLE = 0.5


class Side:
    """One server, its tree and the sockets of the root's subscribers."""

    def __init__(self, name: str, server: Convograph, root: str) -> None:
        self.name = name
        self.server = server
        self.root = root
        self.sockets: list[Any] = []
        self.seconds: list[float] = []

    async def post(self, http: httpx.AsyncClient, query: str, variables: dict[str, Any]) -> None:
        response = await http.post(
            self.server.url,
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {self.server.token}"},
        )
        answer = response.json()
        errors = answer.get("errors") or next(iter(answer["data"].values()))["userErrors"]
        if response.status_code != 200 or errors:
            raise RuntimeError(f"{self.name}: {response.status_code} {answer}")

    async def subscribe(self, count: int) -> None:
        url = self.server.url.replace("http", "ws", 1)
        for _ in range(count):
            socket = await open_socket(url, self.server.token, self.root, query=WATCH)
            self.sockets.append(socket)

    async def live(self, http: httpx.AsyncClient) -> None:
        """Until every subscriber has an event of a write made after it subscribed (no
        `subscribe` is acknowledged): touches of the root, then what is left of them read."""
        waiting = list(self.sockets)
        while waiting:
            await self.post(http, TOUCH, {"id": self.root})
            got = await asyncio.gather(
                *(_event(s, SETTLE) for s in waiting), return_exceptions=True
            )
            waiting = [s for s, e in zip(waiting, got, strict=True) if isinstance(e, TimeoutError)]
            for error in got:
                if isinstance(error, BaseException) and not isinstance(error, TimeoutError):
                    raise error
        for socket in self.sockets:
            while True:
                try:
                    await _event(socket, SETTLE)
                except TimeoutError:
                    break

    async def burst(self, http: httpx.AsyncClient, children: int, at: datetime) -> None:
        started = time.perf_counter()
        reading = [asyncio.create_task(_events(s, children + 1)) for s in self.sockets]
        await self.post(http, EXPIRE, {"id": self.root, "at": at.isoformat()})
        got = await asyncio.gather(*reading)
        self.seconds.append(time.perf_counter() - started)
        for positions in got:
            if positions != list(range(positions[0], positions[0] + children + 1)):
                raise RuntimeError(f"{self.name}: not every event once, in order")
        await self.live(http)  # still subscribed


async def _message(socket: Any, kind: str, within: float = TIMEOUT) -> dict[str, Any]:
    while True:
        message: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), within))
        if message["type"] == "ping":
            await socket.send(json.dumps({"type": "pong"}))
            continue
        if message["type"] != kind or (message.get("payload") or {}).get("errors"):
            raise RuntimeError(f"expected {kind}, got {message}")
        return message


async def _event(socket: Any, within: float = TIMEOUT) -> int:
    """The log position of the next event of the subscription."""
    event = (await _message(socket, "next", within))["payload"]["data"]["conversationEvents"]
    return cursors.event(event["cursor"], "after")[1]


async def _events(socket: Any, count: int) -> list[int]:
    return [await _event(socket) for _ in range(count)]


def _tree(server: Convograph, children: int) -> str:
    root = create_conversation(server, "burst root")
    for _ in range(children):
        server.gql(DELEGATE, {"parent": root})
    return root


async def _run(sides: list[Side], args: argparse.Namespace) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        for side in sides:
            await side.subscribe(args.subscribers)
            await side.live(http)
        for run in range(args.runs):
            at = datetime.now(UTC) + timedelta(days=1 + run)  # a new expiry: every child moves
            for side in sides if run % 2 == 0 else reversed(sides):
                await side.burst(http, args.children, at)
        for side in sides:
            for socket in side.sockets:
                await socket.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=1500)
    parser.add_argument("--subscribers", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-burst-") as tmp:
        sides: list[Side] = []
        # The queue that holds the burst (its size is the only setting changed) first.
        for name, queue in (("queue", args.children + 2), ("log", None)):
            workdir = Path(tmp) / name
            workdir.mkdir()
            env = {} if queue is None else {"CONVOGRAPH_SUBSCRIBER_QUEUE_SIZE": str(queue)}
            server = Convograph(workdir, max_messages_per_call=100, env=env)
            sides.append(Side(name, server, _tree(server, args.children)))
        try:
            asyncio.run(_run(sides, args))
        finally:
            for side in sides:
                side.server.stop()
    queue, log = (median(side.seconds) for side in sides)
    events = args.children + 1
    print(f"{events} events in one transaction to {args.subscribers} subscribers of the root")
    for side in sides:
        runs = ", ".join(f"{s * 1000:.0f}" for s in side.seconds)
        print(f"  {side.name}: median {median(side.seconds) * 1000:.0f} ms (runs: {runs} ms)")
    print(f"  log / queue: {log / queue:.2f}")


if __name__ == "__main__":
    main()
