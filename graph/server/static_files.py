"""Static files served with headers of their own (a page's security headers, nosniff)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send


class StaticFilesWithHeaders(StaticFiles):
    """Starlette's StaticFiles, every response carrying `headers` too."""

    def __init__(self, *, headers: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._raw_headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *self._raw_headers]
                message = {**message, "headers": headers}
            await send(message)

        await super().__call__(scope, receive, send_with_headers)
