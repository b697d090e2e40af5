"""httpx clients for the tests that talk plain HTTP to a server on 127.0.0.1.

httpx builds a TLS context for every client it makes, and loads the CA bundle into it,
although these clients never speak TLS: for a test that starts a live server, that was a
large share of its CPU. The clients made here share one context, built once per process;
everything else is httpx's default.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

TLS = ssl.create_default_context()


def http_client(**options: Any) -> httpx.AsyncClient:
    """`httpx.AsyncClient(**options)`, with the process's one TLS context."""
    return httpx.AsyncClient(verify=TLS, **options)
