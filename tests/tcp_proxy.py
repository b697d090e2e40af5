"""A TCP proxy a test can cut and restore: the database "goes away" without stopping it.

It can also refuse new connections while the open ones go on, silence one connection
without closing it, as a firewall that forgets a connection does (no reset: the client
learns nothing until it waits for an answer), pass a close on late, after what came
before it, as a slow network does, and answer new sessions itself with PostgreSQL's refusal
of a session (its connection slots all taken, the server starting up).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from urllib.parse import urlsplit, urlunsplit

# The first four bytes of a client's SSLRequest (its code, 80877103).
SSL_REQUEST = struct.pack("!I", 80877103)


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        # The local port of each upstream connection (PostgreSQL's pg_stat_activity
        # client_port), and those silenced.
        self._silenced: set[int] = set()
        self._marker: bytes | None = None
        self.upstream_ports: set[int] = set()  # of the connections open now
        self._close_delay = 0.0
        self.closed_late = 0  # closes held back so far, once what came before them was passed on
        self._refusal: bytes | None = None  # what a new session is answered, if not passed on

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def refuse_new(self) -> None:
        """Refuse new connections; the open ones go on."""
        if self._server is not None:
            self._server.close()
            self._server = None

    def silence_when(self, marker: bytes) -> None:
        """Silence the next connection whose client sends `marker` (once)."""
        self._marker = marker

    def silence(self, upstream_port: int) -> None:
        """From now on, drop whatever either side of that connection sends, and keep it open."""
        self._silenced.add(upstream_port)

    def close_late(self, seconds: float) -> None:
        """From now on, pass a side's close on to the other `seconds` after what it sent
        before: PostgreSQL's last error (it ends a session) then arrives well before the end
        of the connection."""
        self._close_delay = seconds

    async def refuse_sessions(self, sqlstate: str, message: str) -> None:
        """Drop every open connection and answer each new one as PostgreSQL answers a
        session it will not take: a FATAL error with `sqlstate` and `message` (53300 "sorry,
        too many clients already", 57P03 "the database system is starting up"), then the
        close. `accept_sessions` passes them on again."""
        fields = [(b"S", "FATAL"), (b"V", "FATAL"), (b"C", sqlstate), (b"M", message)]
        body = b"".join(key + value.encode() + b"\0" for key, value in fields) + b"\0"
        self._refusal = b"E" + struct.pack("!I", len(body) + 4) + body
        for writer in tuple(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def accept_sessions(self) -> None:
        self._refusal = None

    async def cut(self) -> None:
        """Refuse new connections and drop every open one."""
        await self.refuse_new()
        for writer in tuple(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusal is not None:
            await self._refuse(reader, writer, self._refusal)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        port = up_writer.get_extra_info("sockname")[1]
        self.upstream_ports.add(port)
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, port), self._pipe(up_reader, writer, port)
            )
        finally:
            self.upstream_ports.discard(port)

    @staticmethod
    async def _refuse(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refusal: bytes
    ) -> None:
        """Read the client's startup packet (after its SSLRequest, declined) and answer it
        with `refusal`, as PostgreSQL does before it closes."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, struct.error):
            for _ in range(2):
                (length,) = struct.unpack("!I", await reader.readexactly(4))
                packet = await reader.readexactly(length - 4)
                if packet[:4] != SSL_REQUEST:
                    break
                writer.write(b"N")  # no TLS here: the startup packet follows in the clear
                await writer.drain()
            writer.write(refusal)
            await writer.drain()
        writer.transport.abort()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                if self._marker is not None and self._marker in chunk:
                    self._marker = None
                    self._silenced.add(port)
                if port in self._silenced:
                    continue
                writer.write(chunk)
                await writer.drain()
        if port in self._silenced:
            return  # not even the close gets through
        if self._close_delay:
            self.closed_late += 1
            await asyncio.sleep(self._close_delay)
        writer.transport.abort()
        self._writers.discard(writer)


async def in_front_of(database_url: str) -> tuple[TcpProxy, str]:
    """A started proxy to the server `database_url` names, and that URL through the proxy."""
    parts = urlsplit(database_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    user = f"{parts.username}@" if parts.username else ""
    return proxy, urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
