"""GraphiQL in a real browser against a real server, with no network beyond this machine.

Debian's Chromium (headless) loads /graphql from a live convograph process through
Playwright, the token goes into the headers editor as a person would type it, a query runs
over HTTP and a subscription over the WebSocket, and the results are read from the page. Any
request to a host that is not this machine fails the test: the page must work offline.
Screenshots are left in test-artifacts/graphiql-*.png (also when a test fails).

Needs Chromium and Playwright: see tests/browser.py. Without them the test is skipped.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.browser import ARTIFACTS, PAGE_TESTS, is_local, keep_local, new_context
from tests.conftest import GraphQLClient
from tests.operations import create, touch

with contextlib.suppress(ImportError):  # without Playwright, the chromium fixture skips the test
    from playwright.async_api import TimeoutError as PlaywrightTimeout

if TYPE_CHECKING:
    from playwright.async_api import Browser as Chromium
    from playwright.async_api import BrowserContext, Page, Request, Response, WebSocket

    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server", "tests.browser"]
pytestmark = PAGE_TESTS

# GraphiQL 3 keeps the headers and variables editors in one tool pane; the visible one.
HEADERS_EDITOR = ".graphiql-editor-tool .graphiql-editor:not(.hidden)"
QUERY_EDITOR = ".graphiql-query-editor"
RESULT = ".result-window"
TIMEOUT_MS = 15_000


async def editor_text(page: Page, selector: str) -> str:
    text: str = await page.eval_on_selector(
        f"{selector} .CodeMirror", "el => el.CodeMirror.getValue()"
    )
    return text


async def set_editor(page: Page, selector: str, text: str) -> None:
    await page.click(f"{selector} .CodeMirror")
    await page.keyboard.press("Control+A")
    await page.keyboard.press("Delete")
    # insert_text rather than type: CodeMirror would auto-close every bracket typed.
    await page.keyboard.insert_text(text)
    await page.keyboard.press("Escape")


async def start(page: Page, query: str) -> None:
    """Put `query` in the editor and press the run button."""
    await set_editor(page, QUERY_EDITOR, query)
    # GraphiQL re-parses the query after a debounce; run too early and it executes the old
    # operation (a subscription would then go over HTTP instead of the WebSocket).
    await page.wait_for_timeout(500)
    await page.click(".graphiql-execute-button")


async def result_contains(page: Page, expected: str, timeout_ms: int = TIMEOUT_MS) -> str:
    """Wait until the result pane shows `expected`; the pane's text."""
    await page.wait_for_function(
        """expected => document.querySelector(".result-window .CodeMirror")
                         ?.CodeMirror.getValue().includes(expected)""",
        arg=expected,
        timeout=timeout_ms,
    )
    return await editor_text(page, RESULT)


@dataclass
class Browser:
    """A GraphiQL page and what it did on the network."""

    page: Page
    problems: list[str] = field(default_factory=list)
    ws_sent: list[str] = field(default_factory=list)
    http_auth: list[str | None] = field(default_factory=list)


@asynccontextmanager
async def graphiql(
    server: LiveServer, chromium: Chromium, screenshot: str
) -> AsyncIterator[Browser]:
    """GraphiQL loaded from `server` in a fresh context of the shared Chromium; fails on any
    non-local request.

    The screenshot is taken when the block ends, also when it fails: the picture usually shows
    what went wrong.
    """
    async with new_context(chromium, viewport={"width": 1400, "height": 850}) as context:
        browser = Browser(await context.new_page())
        await watch(context, browser)
        try:
            await browser.page.goto(server.http_url, wait_until="networkidle")
            await browser.page.wait_for_selector(f"{QUERY_EDITOR} .CodeMirror", timeout=TIMEOUT_MS)
            yield browser
        finally:
            await browser.page.screenshot(path=str(ARTIFACTS / screenshot))
    assert browser.problems == []


async def watch(context: BrowserContext, browser: Browser) -> None:
    problems = browser.problems

    def on_response(response: Response) -> None:
        if response.status >= 400:
            problems.append(f"HTTP {response.status}: {response.url}")

    def on_request(request: Request) -> None:
        if request.method == "POST":
            browser.http_auth.append(request.headers.get("authorization"))

    def on_websocket(ws: WebSocket) -> None:
        # WebSockets do not pass through route(): check their host here.
        if not is_local(ws.url):
            problems.append(f"non-local websocket: {ws.url}")
        ws.on("framesent", lambda payload: browser.ws_sent.append(str(payload)))

    await keep_local(context, problems)
    page = browser.page
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    # The page runs under its Content-Security-Policy: anything it refuses is a problem.
    page.on(
        "console",
        lambda message: (
            problems.append(f"refused by the CSP: {message.text}")
            if "Content Security Policy" in message.text
            else None
        ),
    )
    page.on("response", on_response)
    page.on("request", on_request)
    page.on("websocket", on_websocket)


async def enter_token(page: Page, token: str) -> str:
    """Replace the headers editor's placeholder with the token, as a person would."""
    assert "Bearer <paste your token>" in await editor_text(page, HEADERS_EDITOR)
    authorization = f"Bearer {token}"
    await set_editor(page, HEADERS_EDITOR, json.dumps({"Authorization": authorization}))
    return authorization


async def test_graphiql_runs_a_query_with_the_token_from_the_headers_editor(
    live_server: LiveServer, chromium: Chromium
) -> None:
    token = await live_server.token(workspace="site:graphiql", owner="user:browser")
    async with graphiql(live_server, chromium, "graphiql-query.png") as browser:
        page = browser.page
        assert "viewer" in await editor_text(page, QUERY_EDITOR)

        # Before the token is in, running says what to do (and sends nothing to the server).
        await page.click(".graphiql-execute-button")
        assert "No token yet" in await result_contains(page, "No token yet")
        assert browser.http_auth == []

        authorization = await enter_token(page, token)
        await start(page, "query Me { viewer { workspace { key } ownerType scopes } }")
        result = json.loads(await result_contains(page, '"site:graphiql"'))
        assert result == {
            "data": {
                "viewer": {
                    "workspace": {"key": "site:graphiql"},
                    "ownerType": "USER",
                    "scopes": ["READ", "WRITE"],
                }
            }
        }
        assert authorization in browser.http_auth, browser.http_auth

        # The schema was fetched again with the token: the explorer lists its fields.
        await page.click("button[aria-label='Show GraphiQL Explorer']")
        await page.wait_for_selector(".graphiql-explorer-root >> text=viewer", timeout=TIMEOUT_MS)

        # The history keeps the query, not the token: localStorage outlives the tab and
        # any page of this origin reads it.
        stored = await page.evaluate("JSON.stringify(Object.assign({}, localStorage))")
        assert "Me" in stored and "viewer" in stored, stored
        assert token not in stored, stored
    assert (ARTIFACTS / "graphiql-query.png").stat().st_size > 10_000


async def test_graphiql_runs_a_subscription_over_the_websocket(
    live_server: LiveServer, chromium: Chromium
) -> None:
    token = await live_server.token(workspace="site:graphiql", owner="user:browser")
    async with live_server.client(token) as gql:
        conversation_id = await create(gql, "watched")
        async with graphiql(live_server, chromium, "graphiql-subscription.png") as b:
            authorization = await enter_token(b.page, token)
            await start(
                b.page,
                f'subscription {{ conversationEvents(conversationId: "{conversation_id}") '
                "{ kind version } }",
            )
            # A write over HTTP, outside the page, shows up in the page's result pane.
            await write_until_shown(b.page, gql, conversation_id)
            inits = [json.loads(f) for f in b.ws_sent if '"connection_init"' in f]
            assert inits, f"no connection_init sent; frames: {b.ws_sent}"
            assert inits[0].get("payload") == {"Authorization": authorization}, inits[0]


async def write_until_shown(page: Page, gql: GraphQLClient, conversation_id: str) -> None:
    """Write until the page shows the event: the subscription's start is not acknowledged."""
    for _ in range(30):
        version = await touch(gql, conversation_id)
        try:
            await result_contains(page, f'"version": {version}', timeout_ms=500)
        except PlaywrightTimeout:  # not subscribed yet, unless the page shows an error
            shown = await editor_text(page, RESULT)
            assert '"errors"' not in shown, shown
            continue
        assert "CONVERSATION_UPDATED" in await editor_text(page, RESULT)
        return
    raise AssertionError("the subscription never showed an event in the page")
