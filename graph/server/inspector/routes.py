"""The inspector's routes: the page at /ui and its files at /ui/assets, with the headers the
page is written for (its Content-Security-Policy among them)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from graph.server.inspector import ASSETS_DIR, CSP, inspector_html
from graph.server.static_files import StaticFilesWithHeaders

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # One version of the page's modules at a time: a browser never mixes two.
    "Cache-Control": "no-cache",
}


def routes() -> list[BaseRoute]:
    page = inspector_html()

    async def inspector(request: Request) -> Response:
        return HTMLResponse(page, headers=HEADERS)

    return [
        Route("/ui", inspector, methods=["GET", "HEAD"]),
        Mount(
            "/ui/assets",
            StaticFilesWithHeaders(directory=ASSETS_DIR, headers=HEADERS),
            name="inspector-assets",
        ),
    ]
