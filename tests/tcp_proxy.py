"""A TCP proxy a test can cut and restore: the database "goes away" without stopping it.

It can also refuse new connections while the open ones go on, silence one connection
without closing it, as a firewall that forgets a connection does (no reset: the client
learns nothing until it waits for an answer), and pass a close on late, after what came
before it, as a slow network does.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit


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

    async def cut(self) -> None:
        """Refuse new connections and drop every open one."""
        await self.refuse_new()
        for writer in tuple(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
