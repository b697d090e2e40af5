"""A graceful stop on SIGTERM or Ctrl-C (SIGINT): uvicorn's, with what it lacks.

What uvicorn does on the signal: it stops listening, closes idle keep-alive connections,
lets each request in flight finish (its connection closes after the answer, so nothing new
runs on it), waits up to `timeout_graceful_shutdown` for them, cancels what is left, then
runs the lifespan's shutdown (where the background tasks stop). What this adds:
- before that, `before_drain` (the open subscriptions are told 1001, going away, instead of
  uvicorn's 1012 at the transport);
- exit status 0: uvicorn raises the signal again once it has shut down, with the previous
  handler back in place, which ends the process as killed by SIGTERM (status 143).
A second Ctrl-C still forces the exit, as in uvicorn.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from socket import socket

import uvicorn
from uvicorn.server import HANDLED_SIGNALS

# uvicorn's exit status when the app did not start.
STARTUP_FAILURE = 3


class GracefulServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, before_drain: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self.before_drain = before_drain

    async def shutdown(self, sockets: list[socket] | None = None) -> None:
        # No new connection first, then the subscriptions' 1001, then uvicorn's drain.
        for server in getattr(self, "servers", []):
            server.close()
        await self.before_drain()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's handlers while serving, without raising the signal again after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def serve(config: uvicorn.Config, before_drain: Callable[[], Awaitable[None]]) -> int:
    """Serve until SIGTERM or Ctrl-C, then shut down gracefully: the exit status."""
    server = GracefulServer(config, before_drain)
    with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C, as uvicorn.run does
        server.run()
    return 0 if server.started else STARTUP_FAILURE
