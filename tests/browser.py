"""Headless Chromium for the page tests (GraphiQL, the inspector): Debian's browser driven by
Playwright, one browser per pytest process and a fresh context per test, with every request
kept on this machine.

Needs `apt-get install chromium` and the `playwright` package (the `test` extra); the
browser is Debian's, `playwright install` is never run. Without them a test is skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

try:
    from playwright.async_api import async_playwright
except ImportError:  # skip_without_a_browser says so
    async_playwright = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from playwright.async_api import Browser as Chromium
    from playwright.async_api import BrowserContext, Route

CHROMIUM = os.environ.get("CONVOGRAPH_TEST_CHROMIUM", "/usr/bin/chromium")
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
# Screenshots the tests take, for a person to look at.
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


# The page tests run on the pytest session's event loop, where the shared browser lives (its
# driver's pipes belong to that loop): `pytestmark = PAGE_TESTS`, with `tests.browser` among
# the module's pytest_plugins.
PAGE_TESTS = pytest.mark.asyncio(loop_scope="session")


def skip_without_a_browser() -> None:
    if async_playwright is None:
        pytest.skip("Playwright is not installed: pip install playwright (the `test` extra)")
    if not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None:
        pytest.skip(f"Chromium is not at {CHROMIUM}: apt-get install -y chromium")


def is_local(url: str) -> bool:
    return urlsplit(url).hostname in LOCAL_HOSTS


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def chromium() -> AsyncIterator[Chromium]:
    """The pytest process's headless Chromium (and the Playwright driver that drives it);
    the test is skipped without a browser. ARTIFACTS exists from then on.

    One per pytest process: starting the driver and the browser costs more CPU than most page
    tests do. A page test takes a context of its own from it (new_context), with nothing of
    another's: no cookies, storage, cache or routes."""
    skip_without_a_browser()
    assert async_playwright is not None
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def new_context(chromium: Chromium, **options: Any) -> AsyncIterator[BrowserContext]:
    """A fresh context of the shared browser (Playwright's new_context `options`: viewport,
    color scheme...), closed when the block ends."""
    # A browser that crashed in an earlier test would fail every later one with a riddle.
    assert chromium.is_connected(), "the shared Chromium has gone: see an earlier test"
    context = await chromium.new_context(**options)
    try:
        yield context
    finally:
        # A route handler still at work when the test ends (a read it fetches, then
        # fulfills) fails once its page is gone, and Playwright raised that error into the
        # next test's first call on the shared browser: handlers are let go of, errors and all.
        for page in context.pages:
            await page.unroute_all(behavior="ignoreErrors")
        await context.unroute_all(behavior="ignoreErrors")
        await context.close()


async def keep_local(context: BrowserContext, problems: list[str]) -> None:
    """Every HTTP(S) request of the context's pages passes here: one to a host that is not
    this machine is aborted and added to `problems`. (WebSockets do not pass through
    routes: a test checks their hosts with is_local.)"""

    async def guard(route: Route) -> None:
        if is_local(route.request.url):
            await route.continue_()
        else:
            problems.append(f"non-local request: {route.request.url}")
            await route.abort()

    await context.route("**/*", guard)
