"""The inspector's workspace figures in a real browser: what the token may read, kept current.

The figures at the top of /ui come from `workspaceFigures`: a WRITE token sees its own
records only (and no owner-type filter), an ADMIN token its whole workspace (and the
filter). While a conversation is open, a message appended and a delegation completed through
the API change the figures without a reload. Headless Chromium as in
test_inspector_browser.py (skipped without it).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from tests.browser import PAGE_TESTS
from tests.test_inspector_browser import (
    APPEND,
    COMPLETE,
    CREATE_CONVERSATION,
    LIVE_MS,
    TIMEOUT_MS,
    delegate,
    inspector,
    ok,
    sign_in,
)

with contextlib.suppress(ImportError):  # without Playwright, the chromium fixture skips the test
    from playwright.async_api import expect

if TYPE_CHECKING:
    from playwright.async_api import Browser as Chromium
    from playwright.async_api import Page

    from tests.conftest import GraphQLClient
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server", "tests.browser"]
pytestmark = PAGE_TESTS

WORKSPACE = "site:figures-ui"
# The page asks again 1.5 s after the last live event.
FIGURES_MS = LIVE_MS + 1_500


async def conversation(gql: GraphQLClient, title: str, *tokens: int) -> str:
    created = await ok(gql, CREATE_CONVERSATION, {"input": {"title": title}})
    cid: str = created["conversation"]["id"]
    messages = [
        {"role": "user", "content": f"turn {i}", "token_count": n} for i, n in enumerate(tokens)
    ]
    await ok(gql, APPEND, {"id": cid, "messages": messages})
    return cid


async def shows(page: Page, label: str, value: str, within_ms: int = TIMEOUT_MS) -> None:
    figure = page.locator("#figures .figure", has_text=label).locator("dd")
    await expect(figure).to_have_text(value, timeout=within_ms)


async def test_the_figures_are_the_tokens_own_and_follow_live_writes(
    live_server: LiveServer, chromium: Chromium
) -> None:
    ada = await live_server.token(workspace=WORKSPACE, owner="user:ada")
    bob = await live_server.token(workspace=WORKSPACE, owner="user:bob")
    admin = await live_server.token(workspace=WORKSPACE, owner="system:ops", scope="admin")
    async with live_server.client(bob) as as_bob:
        await conversation(as_bob, "Bob's", 100, 100)
    async with live_server.client(ada) as as_ada:
        root = await conversation(as_ada, "Ada's", 3, 4)
        helper = await delegate(as_ada, root, ("lead", "helper"), "Look it up")
        async with inspector(live_server, chromium, "inspector-figures.png") as b:
            page = b.page
            await sign_in(page, ada)
            # Ada's records only: her conversation and its delegation's child transcript.
            await shows(page, "Conversations", "2")
            await shows(page, "Messages", "2")
            await shows(page, "Tokens", "7")
            delegations = page.locator("#figures .figure", has_text="Delegations")
            await expect(delegations).to_contain_text("Running 1")
            await expect(delegations).to_contain_text("Completed 0")
            # A WRITE token reads only its own records: no owner-type filter to offer.
            await expect(page.get_by_label("Owner type")).to_have_count(0)

            await page.locator(".conv-list .conv-row").filter(has_text="Ada's").click()
            await expect(page.locator("#conv-title")).to_have_text("Ada's")
            await ok(
                as_ada,
                APPEND,
                {"id": root, "messages": [{"role": "user", "content": "more", "token_count": 5}]},
            )
            await ok(as_ada, COMPLETE, {"id": helper["id"], "status": "COMPLETED"})
            await shows(page, "Messages", "3", within_ms=FIGURES_MS)
            await shows(page, "Tokens", "12", within_ms=FIGURES_MS)
            await expect(delegations).to_contain_text("Completed 1", timeout=FIGURES_MS)
            await expect(delegations).to_contain_text("Running 0")

            # An ADMIN token of the workspace: bob's records too, and the filter.
            await page.locator("#sign-out").click()
            await sign_in(page, admin)
            await shows(page, "Conversations", "3")
            await shows(page, "Messages", "5")
            await shows(page, "Tokens", "212")
            owner_type = page.get_by_label("Owner type")
            await expect(owner_type).to_have_count(1)
            await owner_type.select_option("USER")
            await expect(page.locator(".conv-list .conv-row")).to_have_count(3)
