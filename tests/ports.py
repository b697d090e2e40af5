"""Ports for the servers tests start as processes, and whether a server got the one it was
given.

A free port is only free when asked: another process (another pytest worker's server) may
bind it before the server does. Then that server fails to bind while the port answers, so
an answer on the port does not say that the server there is the one a test started; its
log does.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A 127.0.0.1 port nobody listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def holds_port(log: str, port: int) -> bool | None:
    """Whether the `serve` process that wrote `log` holds 127.0.0.1:`port`: True once
    uvicorn says it runs there, False once it could not bind the port, None until either.
    uvicorn says so at INFO, the default log level."""
    if f"running on http://127.0.0.1:{port} " in log:
        return True
    if "address already in use" in log.lower():
        return False
    return None
