"""A deadline and a size limit for a request's headers, which uvicorn does not have.

uvicorn times out idle kept-alive connections, but not a connection that never sends a
request or whose headers never end (slow loris): each would be held for ever. The deadline
starts when a connection opens or a new request starts on it, and is cancelled when the
headers are complete; a body has its own rate rule (server/body.py). Nor does its httptools
protocol bound the headers' size: a client could send hundreds of megabytes of one header
within the deadline, all held in memory. Past MAX_HEADER_BYTES the request is answered 431
and the connection closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# The request line and headers of one request, at most: browsers and proxies send a few
# kilobytes; nginx refuses at 32 KiB by default, this leaves room for large tokens.
MAX_HEADER_BYTES = 64 * 1024
_REASON = f"request headers exceed {MAX_HEADER_BYTES} bytes".encode()
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"content-length: " + str(len(_REASON)).encode() + b"\r\n\r\n" + _REASON
)


def with_header_deadline(seconds: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, closing connections whose headers take over `seconds`."""

    class HeaderDeadline(HttpToolsProtocol):
        headers_deadline: asyncio.TimerHandle | None = None
        # Bytes received for the next request's line and headers (not for a body: a client
        # still sending one that was answered early, 413, is not starting a new request),
        # and the last bytes of the read before, where the headers' blank line may begin.
        header_bytes = 0
        reading_body = False
        tail = b""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self._arm()  # a request starts (kept-alive connections carry several)
            if not self.reading_body:
                # Counted up to the blank line that ends them, before any of it is parsed:
                # headers that end in the read that crosses the limit are refused too, and
                # no request past it reaches the app.
                end = (self.tail + data).find(b"\r\n\r\n")
                self.header_bytes += len(data) if end < 0 else end + 4 - len(self.tail)
                self.tail = data[-3:] if end < 0 else b""
                if self.header_bytes > MAX_HEADER_BYTES:
                    self._disarm()
                    if not self.transport.is_closing():
                        self.transport.write(_TOO_LARGE)
                        self.transport.close()
                    return
            super().data_received(data)

        def on_headers_complete(self) -> None:
            self._disarm()
            self.reading_body = True
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self.reading_body = False
            self.header_bytes = 0
            self.tail = b""
            super().on_message_complete()

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
