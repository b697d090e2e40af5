"""Check that convograph's GraphiQL page works with no network access beyond localhost.

Serves `graph.ide.graphiql_html()` and the vendored assets next to a tiny Strawberry schema,
drives Debian's Chromium headless through Playwright, runs a query over HTTP and a subscription
over WebSocket, and fails if the page requests anything from a non-local host.

Usage: .venv/bin/python tools/check_graphiql_offline.py SCREENSHOT.png
Needs: apt-get install chromium; pip install playwright (the browser comes from Debian).
"""

import json
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from urllib.parse import urlsplit

import strawberry
import uvicorn
from playwright.sync_api import Page, Request, Response, Route, WebSocket, sync_playwright
from starlette import requests, routing
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from strawberry.asgi import GraphQL
from strawberry.types import Info

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from graph.ide import ASSETS_DIR, graphiql_html

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
HEADERS_EDITOR = ".graphiql-editor-tool .graphiql-editor:not(.hidden)"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
TOKEN = "Bearer offline-check-token"


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        return "world"


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def authorization(self, info: Info) -> AsyncGenerator[str, None]:
        # Echo what the client sent in connection_init, to prove the token reaches the server.
        yield str(info.context["connection_params"].get("Authorization"))


class IDEGraphQL(GraphQL):
    async def render_graphql_ide(self, request: requests.Request) -> HTMLResponse:
        return HTMLResponse(graphiql_html())


def make_app() -> Starlette:
    graphql = IDEGraphQL(strawberry.Schema(query=Query, subscription=Subscription))
    return Starlette(
        routes=[
            routing.Route("/graphql", graphql, methods=["GET", "POST"]),
            routing.WebSocketRoute("/graphql", graphql),
            routing.Mount("/graphiql-assets", StaticFiles(directory=ASSETS_DIR)),
        ]
    )


def start_server() -> tuple[uvicorn.Server, str]:
    # Bind first and hand the socket to uvicorn, so the random port cannot be taken meanwhile.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(), log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def editor_text(page: Page, selector: str) -> str:
    return page.eval_on_selector(f"{selector} .CodeMirror", "el => el.CodeMirror.getValue()")


def set_editor(page: Page, selector: str, text: str) -> None:
    page.click(f"{selector} .CodeMirror")
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    # insert_text rather than type: CodeMirror would auto-close every bracket typed.
    page.keyboard.insert_text(text)
    page.keyboard.press("Escape")


def run(page: Page, query: str, expected: str) -> str:
    set_editor(page, ".graphiql-query-editor", query)
    # GraphiQL re-parses the query after a debounce; run too early and it executes the old
    # operation facts (a subscription would then go over HTTP instead of the WebSocket).
    page.wait_for_timeout(500)
    page.click(".graphiql-execute-button")
    page.wait_for_function(
        """expected => document.querySelector(".result-window .CodeMirror")
                         ?.CodeMirror.getValue().includes(expected)""",
        arg=expected,
        timeout=15_000,
    )
    return editor_text(page, ".result-window")


def check(screenshot: Path) -> None:
    problems: list[str] = []
    ws_sent: list[str] = []
    http_auth: list[str | None] = []

    def guard(route: Route) -> None:
        # Every HTTP(S) request goes through here: anything not on this machine fails the check.
        if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            problems.append(f"non-local request: {route.request.url}")
            route.abort()

    def on_response(response: Response) -> None:
        if response.status >= 400:
            problems.append(f"HTTP {response.status}: {response.url}")

    def on_request(request: Request) -> None:
        if request.method == "POST":
            http_auth.append(request.headers.get("authorization"))

    def on_websocket(ws: WebSocket) -> None:
        if urlsplit(ws.url).hostname not in LOCAL_HOSTS:
            problems.append(f"non-local websocket: {ws.url}")
        ws.on("framesent", lambda payload: ws_sent.append(str(payload)))

    server, base = start_server()
    try:
        with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1400, "height": 850},
            )
            context.route("**/*", guard)
            page = context.new_page()
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("response", on_response)
            page.on("request", on_request)
            page.on("websocket", on_websocket)

            try:
                page.goto(f"{base}/graphql", wait_until="networkidle")
                page.wait_for_selector(".graphiql-query-editor .CodeMirror", timeout=15_000)
                headers = editor_text(page, HEADERS_EDITOR)
                assert "Bearer <paste your token>" in headers, f"headers editor shows {headers!r}"
                assert "viewer" in editor_text(page, ".graphiql-query-editor")

                set_editor(page, HEADERS_EDITOR, json.dumps({"Authorization": TOKEN}))
                result = run(page, "subscription { authorization }", TOKEN)
                print("subscription result:", " ".join(result.split()))
                inits = [json.loads(f) for f in ws_sent if '"connection_init"' in f]
                assert inits, f"no connection_init sent; frames: {ws_sent}"
                assert inits[0].get("payload") == {"Authorization": TOKEN}, inits[0]

                result = run(page, "query { hello }", '"world"')
                print("query result:", " ".join(result.split()))
                assert TOKEN in http_auth, f"POST Authorization headers seen: {http_auth}"

                page.click("button[aria-label='Show GraphiQL Explorer']")
                page.wait_for_selector(".graphiql-explorer-root >> text=hello", timeout=5_000)
            finally:
                # Also on failure: the picture usually shows what went wrong.
                page.screenshot(path=str(screenshot))
            context.close()
    finally:
        server.should_exit = True

    if problems:
        raise SystemExit("FAILED:\n" + "\n".join(problems))
    print(f"OK: GraphiQL works offline; screenshot at {screenshot}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get update && apt-get install -y chromium")
    check(Path(sys.argv[1]))
