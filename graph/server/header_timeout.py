"""A deadline for a request's headers, which uvicorn does not have.

uvicorn times out idle kept-alive connections, but not a connection that never sends a
request or whose headers never end (slow loris): each would be held for ever. The deadline
starts when a connection opens or a new request starts on it, and is cancelled when the
headers are complete; a body has its own rate rule (graph/http.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def with_header_deadline(seconds: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, closing connections whose headers take over `seconds`."""

    class HeaderDeadline(HttpToolsProtocol):
        headers_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self._arm()  # a request starts (kept-alive connections carry several)
            super().data_received(data)

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self.headers_deadline is None:
                self.headers_deadline = self.loop.call_later(seconds, self._expire)

        def _disarm(self, *_: Any) -> None:
            if self.headers_deadline is not None:
                self.headers_deadline.cancel()
                self.headers_deadline = None

        def _expire(self) -> None:
            self.headers_deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadline
