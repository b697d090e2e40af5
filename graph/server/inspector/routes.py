"""The inspector's routes: the page at /ui and its files at /ui/assets, with the headers the
page is written for (its Content-Security-Policy among them)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from graph.server.inspector import ASSETS_DIR, CSP, inspector_html

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # One version of the page's modules at a time: a browser never mixes two.
    "Cache-Control": "no-cache",
}
_RAW_HEADERS = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]


class Assets(StaticFiles):
    """The page's files, with the page's headers."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_RAW_HEADERS]}
            await send(message)

        await super().__call__(scope, receive, send_with_headers)


def routes() -> list[BaseRoute]:
    page = inspector_html()

    async def inspector(request: Request) -> Response:
        return HTMLResponse(page, headers=HEADERS)

    return [
        Route("/ui", inspector, methods=["GET", "HEAD"]),
        Mount("/ui/assets", Assets(directory=ASSETS_DIR), name="inspector-assets"),
    ]
