"""The inspector's open conversation when a read or its live stream fails: it says so, tries
again, and listens again only from a read that succeeded, so it never shows a state that
silently misses events; a deleted conversation or a revoked token stops it for good.

The failures are made in the browser: the page's reads of the conversation (the query that
carries `eventCursor`) and of its transcript's latest messages pass through a `page.route`
that fails the next ones as a test says (the server cannot be reached, 503 with
Retry-After, 502 from a proxy), and its WebSocket
through a `route_web_socket` relay that keeps what the page sent, can end the page's stream
as the server would (`next` with errors, then `complete`), answer its next `subscribe` with
an `error`, or cut the socket. The server is a real one, and the writes are made through its
API. Headless Chromium as in test_inspector_browser.py (skipped without it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graph.store.repository.replay import EXPIRED
from tests.browser import PAGE_TESTS
from tests.test_inspector_browser import (
    APPEND,
    CREATE_CONVERSATION,
    LIVE_MS,
    SNAPSHOT,
    TIMEOUT_MS,
    Browser,
    delegate,
    inspector,
    node,
    ok,
    sign_in,
)

with contextlib.suppress(ImportError):  # without Playwright, the chromium fixture skips the test
    from playwright.async_api import expect

if TYPE_CHECKING:
    from playwright.async_api import Browser as Chromium
    from playwright.async_api import Page, Route, WebSocketRoute

    from tests.conftest import GraphQLClient
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server", "tests.browser"]
pytestmark = PAGE_TESTS

GRAPHQL = re.compile(r"/graphql$")
WS_URL = re.compile(r"^ws://127\.0\.0\.1:\d+/graphql$")
# The page's read of the conversation's head, the one with eventCursor (not the list's
# InspectorConversations).
READ = "InspectorConversation("
# The page's read of the latest messages of a transcript (when it opens, and again).
TRANSCRIPT_READ = "InspectorMessagesLast("
# The page's question about what the server can do (eventCursor among it).
CAPABILITIES = "InspectorCapabilities"
# What Chromium and the inspector fixture report about the failures these tests make.
FAILED_LOADS = re.compile(r"HTTP (50[23]|408): |status of (50[23]|408)|net::ERR_CONNECTION_REFUSED")
UNAVAILABLE = {
    "message": "the database is unavailable; retry shortly",
    "extensions": {"code": "DATABASE_UNAVAILABLE"},
}
# How a stream ends when the events after its cursor are no longer kept (the message as a
# test writes it; the server's own is EXPIRED).
CURSOR_GONE = {
    "message": "the event log no longer reaches back to this cursor",
    "extensions": {"code": "CURSOR_EXPIRED"},
    "path": ["conversationEvents"],
}
LABEL = "inspector-recovery"
DELETE = "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }"
RENAME = """mutation($id: ID!, $title: String!) {
  updateConversation(input: {id: $id, title: $title}) { userErrors { code } } }"""
ERROR = ".conversation > .error"
TRANSCRIPT_ERROR = ".tabpanel-transcript .transcript > .error"
# The page's reads of the delegation tree (a level of it), and of the snapshot list.
TREE_READ = "InspectorTree("
TREE_ERROR = ".tabpanel-tree .tree-view > .error"
SNAPSHOTS_READ = "InspectorSnapshots("
SNAPSHOTS_ERROR = ".tabpanel-snapshots > .error"


def shown_script(error: str) -> str:
    """A script for what the page shows: the text of the error `error`, and of its notice."""
    return f"""() => [{json.dumps(error)}, ".conversation > .notice"].map((selector) => {{
  const el = document.querySelector(selector);
  return el && !el.hidden ? el.textContent : "";
}})"""


# From now on, every text the notice shows, in order, into window.noticesSeen ("" when it is
# hidden): a text shown for a moment is not lost between two polls.
RECORD_NOTICES = """() => {
  const notice = document.querySelector(".conversation > .notice");
  const seen = (window.noticesSeen = []);
  const note = () => {
    const text = notice.hidden ? "" : notice.textContent;
    if (seen[seen.length - 1] !== text) seen.push(text);
  };
  note();
  new MutationObserver(note).observe(notice, {
    subtree: true, childList: true, characterData: true, attributes: true,
  });
}"""
# Long enough for a page that re-read at once (as it does after a stream's first failure).
QUIET_S = 3.0

Fail = Callable[["Route"], Awaitable[None]]


async def unreachable(route: Route) -> None:
    await route.abort("connectionrefused")


def unavailable(retry_after: int) -> Fail:
    """The server's 503 while its database is away, with the wait it asks for."""

    async def fail(route: Route) -> None:
        headers = {"Retry-After": str(retry_after)}
        await route.fulfill(status=503, headers=headers, json={"errors": [UNAVAILABLE]})

    return fail


async def too_slow(route: Route) -> None:
    """The server's 408 for a request body that came too slowly (a slow uplink): JSON errors,
    without a code."""
    body = {"errors": [{"message": "request body arrived too slowly"}]}
    await route.fulfill(status=408, headers={"Connection": "close"}, json=body)


async def bad_gateway(route: Route) -> None:
    """A proxy's answer while the server restarts: 502, and no JSON."""
    await route.fulfill(status=502, content_type="text/html", body="<h1>502 Bad Gateway</h1>")


@dataclass
class Reads:
    """The page's reads of the conversation (or, with TRANSCRIPT_READ and TRANSCRIPT_ERROR, of
    its transcript): the next ones fail as `failures` say, in order; the time of each, what
    the page's `error` and notice said when it was asked, and the time and eventCursor (None
    for a transcript) of each that went through."""

    marker: str = READ
    error: str = ERROR
    failures: list[Fail] = field(default_factory=list)
    asked: list[float] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    noticed: list[str] = field(default_factory=list)
    answered: list[tuple[float, str | None]] = field(default_factory=list)

    async def handle(self, route: Route) -> None:
        if self.marker not in (route.request.post_data or ""):
            await route.fallback()
            return
        self.asked.append(time.monotonic())
        # Read now, while the page waits for this answer: a message shown for less than a
        # second between two tries could slip between two polls of an `expect`.
        shown, noticed = await route.request.frame.evaluate(shown_script(self.error))
        self.shown.append(shown)
        self.noticed.append(noticed)
        if self.failures:
            await self.failures.pop(0)(route)
            return
        response = await route.fetch()
        conversation = (await response.json())["data"]["conversation"] or {}
        cursor = conversation.get("eventCursor")
        # Noted before the page has the answer: a subscribe it sends on it comes later.
        self.answered.append((time.monotonic(), cursor))
        await route.fulfill(response=response)


async def no_introspection(route: Route) -> None:
    if CAPABILITIES not in (route.request.post_data or ""):
        await route.fallback()
        return
    body = {"errors": [{"message": "introspection is disabled"}]}
    await route.fulfill(status=200, json=body)


def failing_capabilities(failures: list[Fail]) -> Fail:
    """The page's question of what the server offers fails as `failures` say, then passes."""

    async def handle(route: Route) -> None:
        if failures and CAPABILITIES in (route.request.post_data or ""):
            await failures.pop(0)(route)
            return
        await route.fallback()

    return handle


@dataclass
class Subscribe:
    at: float
    id: str
    after: str | None
    refused: bool = False


@dataclass
class Relay:
    """The page's WebSockets, each passed through to the server, with every `subscribe` the
    page sent; `refuse` holds error payloads to answer the page's next subscribes with
    instead (as a server whose database is away does)."""

    sockets: list[WebSocketRoute] = field(default_factory=list)
    subscribes: list[Subscribe] = field(default_factory=list)
    refuse: list[list[dict[str, Any]]] = field(default_factory=list)

    def through(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        self.sockets.append(ws)

        def from_page(message: str | bytes) -> None:
            parsed = json.loads(message)
            if parsed.get("type") == "subscribe":
                after = parsed["payload"]["variables"].get("after")
                self.subscribes.append(Subscribe(time.monotonic(), parsed["id"], after))
                if self.refuse:
                    self.subscribes[-1].refused = True
                    error = {"id": parsed["id"], "type": "error", "payload": self.refuse.pop(0)}
                    ws.send(json.dumps(error))
                    return
            server.send(message)

        ws.on_message(from_page)

    def end_stream(self, errors: list[dict[str, Any]] | None = None) -> None:
        """End the page's latest stream as the server ends one: with errors (a `next` that
        carries them, then `complete`), or with `complete` only."""
        sub = self.subscribes[-1].id
        if errors:
            payload = {"data": None, "errors": errors}
            self.sockets[-1].send(json.dumps({"id": sub, "type": "next", "payload": payload}))
        self.sockets[-1].send(json.dumps({"id": sub, "type": "complete"}))


@dataclass
class Session:
    browser: Browser
    gql: GraphQLClient
    conversation: str
    token: str
    reads: Reads
    relay: Relay
    transcript_reads: Reads

    @property
    def page(self) -> Page:
        return self.browser.page

    async def write(self, text: str) -> None:
        message = {"role": "user", "content": text}
        await ok(self.gql, APPEND, {"id": self.conversation, "messages": [message]})

    async def shows(self, text: str, within_ms: int = LIVE_MS) -> None:
        messages = self.page.locator(".tabpanel-transcript .messages")
        await expect(messages).to_contain_text(text, timeout=within_ms)


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@asynccontextmanager
async def conversation_open(
    live_server: LiveServer,
    chromium: Chromium,
    screenshot: str,
    failures: list[Fail] | None = None,
    transcript_failures: list[Fail] | None = None,
    introspection: bool = True,
    capability_failures: list[Fail] | None = None,
) -> AsyncIterator[Session]:
    """A conversation of two messages, open in the inspector; its first reads fail as
    `failures` say, and those of its transcript as `transcript_failures` say. Without
    failures, the block starts once the page has read it and subscribed. Without
    `introspection`, the page's question about what the server can do is refused, as a server
    with introspection off refuses it: the page knows no eventCursor then, and subscribes
    before it reads. The question itself fails first as `capability_failures` say."""
    token = await live_server.token(workspace="site:recovery", owner="user:ada", label=LABEL)
    reads = Reads(failures=list(failures or []))
    transcript_reads = Reads(TRANSCRIPT_READ, TRANSCRIPT_ERROR, list(transcript_failures or []))
    relay = Relay()
    async with live_server.client(token) as gql:
        created = await ok(gql, CREATE_CONVERSATION, {"input": {"title": "Recovering"}})
        cid = created["conversation"]["id"]
        messages = [
            {"role": "user", "content": "First"},
            {"role": "assistant", "content": "Second"},
        ]
        await ok(gql, APPEND, {"id": cid, "messages": messages})
        async with inspector(live_server, chromium, screenshot) as browser:
            browser.expected_console.append(FAILED_LOADS)
            page = browser.page
            await page.route(GRAPHQL, reads.handle)
            await page.route(GRAPHQL, transcript_reads.handle)
            if not introspection:
                await page.route(GRAPHQL, no_introspection)
            if capability_failures:
                await page.route(GRAPHQL, failing_capabilities(capability_failures))
            await page.route_web_socket(WS_URL, relay.through)
            await sign_in(page, token)
            await page.goto(f"{live_server.base_url}/ui#/c/{cid}")
            session = Session(browser, gql, cid, token, reads, relay, transcript_reads)
            if not failures and not transcript_failures:
                await expect(page.locator(".tabpanel-transcript .msg")).to_have_count(
                    2, timeout=TIMEOUT_MS
                )
                await until(lambda: len(relay.subscribes) == 1, "the page's subscribe")
            yield session


def error(page: Page) -> Any:
    return page.locator(".conversation > .error")


def notice(page: Page) -> Any:
    return page.locator(".conversation > .notice")


def transcript_error(page: Page) -> Any:
    return page.locator(TRANSCRIPT_ERROR)


async def test_a_failed_first_read_is_shown_and_tried_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The page's first read of the conversation fails four times: the server cannot be
    reached, then it answers 408 (the request came too slowly), then a proxy answers 502,
    then the server answers 503 with Retry-After: 3. The page says what went wrong each time,
    waits the 3 s it was asked to wait, and once a read succeeds subscribes, from that read's
    eventCursor, and goes on live. (It was left with an error, no subscription and no way
    back but a reload; after the 408, whose errors have no code, it still was.)"""
    failures = [unreachable, too_slow, bad_gateway, unavailable(3)]
    async with conversation_open(live_server, chromium, "inspector-first-read.png", failures) as s:
        page = s.page
        await expect(error(page)).to_contain_text(
            "Could not read this conversation (trying again in", timeout=TIMEOUT_MS
        )
        await expect(page.locator("#conv-title")).to_have_text("Recovering", timeout=TIMEOUT_MS)
        await expect(error(page)).to_be_hidden()
        await expect(page.locator(".tabpanel-transcript .msg")).to_have_count(2)
        assert len(s.reads.asked) == 5
        # What the page said before each try after the first.
        retrying = "Could not read this conversation (trying again in "
        assert all(shown.startswith(retrying) for shown in s.reads.shown[1:]), s.reads.shown
        assert "The server cannot be reached" in s.reads.shown[1]
        assert "request body arrived too slowly" in s.reads.shown[2]
        assert "The server answered HTTP 502" in s.reads.shown[3]
        assert "in 3 s): the database is unavailable; retry shortly" in s.reads.shown[4]
        waited = s.reads.asked[4] - s.reads.asked[3]
        assert waited >= 2.9, f"Retry-After: 3 not honoured: tried again after {waited:.1f} s"

        await until(lambda: len(s.relay.subscribes) == 1, "the page's subscribe")
        [(read_at, cursor)] = s.reads.answered
        [subscribe] = s.relay.subscribes
        assert subscribe.after == cursor and subscribe.at > read_at
        await s.write("Written live")
        await s.shows("Written live")


async def test_a_retry_after_of_zero_does_not_make_the_page_ask_at_once(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """A proxy in front of the server answers 503 with Retry-After: 0, three times: the page
    waits as it does when no wait was asked for (from 1 s, doubling), not at once, which
    turned an outage into a loop of reads as fast as the network allowed."""
    failures = [unavailable(0), unavailable(0), unavailable(0)]
    async with conversation_open(live_server, chromium, "inspector-zero.png", failures) as s:
        await expect(s.page.locator("#conv-title")).to_have_text("Recovering", timeout=TIMEOUT_MS)
        gaps = [b - a for a, b in zip(s.reads.asked, s.reads.asked[1:], strict=False)]
        assert len(gaps) == 3 and min(gaps) >= 0.45, gaps


async def test_after_an_expired_cursor_the_page_listens_again_only_from_a_new_read(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The page's stream ends with CURSOR_EXPIRED and its re-reads fail twice (503 with
    Retry-After: 1, then the server cannot be reached). Meanwhile the page says it is out of
    date and does not subscribe; once a read succeeds it subscribes from that read's
    eventCursor, shows what was written meanwhile, and goes on live. (It subscribed at once
    from no cursor, on the state of before, and looked up to date.)"""
    async with conversation_open(live_server, chromium, "inspector-expired.png") as s:
        page = s.page
        s.reads.failures = [unavailable(1), unreachable]
        s.relay.end_stream([CURSOR_GONE])
        await expect(notice(page)).to_contain_text("Out of date", timeout=TIMEOUT_MS)
        await s.write("Written while out of date")
        await expect(error(page)).to_contain_text("Could not read this conversation")
        await until(lambda: len(s.reads.answered) == 2, "a read that goes through")
        await s.shows("Written while out of date", within_ms=TIMEOUT_MS)
        await expect(notice(page)).to_be_hidden()
        await expect(error(page)).to_be_hidden()

        await until(lambda: len(s.relay.subscribes) == 2, "the page's second subscribe")
        assert len(s.reads.asked) == 4
        read_at, cursor = s.reads.answered[1]
        again = s.relay.subscribes[1]
        assert again.after == cursor and again.at > read_at
        await s.write("Written live")
        await s.shows("Written live")
        await expect(page.locator(".tabpanel-transcript .msg")).to_have_count(4)


async def test_while_the_page_waits_to_read_again_its_notice_says_when_it_will(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The page's stream fails, and the server answers its re-read with 503 and Retry-After:
    3. While the page waits those 3 s, its notice says that it will read the conversation
    again and in how long, counted down (in 3 s, then 2 s, then 1 s); it says that it is
    reading the conversation again only while a read is on its way, and goes once one went
    through. (It said "reading the conversation again…" all along, also while it only
    waited.)"""
    async with conversation_open(live_server, chromium, "inspector-wait.png") as s:
        page = s.page
        await page.evaluate(RECORD_NOTICES)
        s.reads.failures = [unavailable(3)]
        s.relay.end_stream([UNAVAILABLE])
        await until(lambda: len(s.relay.subscribes) == 2, "a subscribe after a new read")
        await expect(notice(page)).to_be_hidden()

        out_of_date = (
            "Out of date: live updates stopped (the database is unavailable; retry shortly); "
        )
        reading = f"{out_of_date}reading the conversation again…"
        # What the notice said as each read was asked: the one refused, then the one after
        # the wait.
        assert s.reads.noticed[1:] == [reading, reading], s.reads.noticed
        waited = s.reads.asked[2] - s.reads.asked[1]
        assert waited >= 2.9, f"Retry-After: 3 not honoured: read again after {waited:.1f} s"
        seen: list[str] = await page.evaluate("() => window.noticesSeen")
        # Reading it twice, each time until a read was asked: the one refused, the one after.
        assert [text for text in seen if "reading the conv" in text] == [reading, reading], seen
        # Between the refused read and the next one, the notice counted the wait down (a
        # second of it could go unseen on a loaded machine, not the first or the last).
        start = seen.index(reading)
        end = seen.index(reading, start + 1)
        countdown = re.compile(
            re.escape(f"{out_of_date}will read the conversation again in ") + r"(\d+) s\."
        )
        between = seen[start + 1 : end]
        left = [int(m.group(1)) for m in map(countdown.fullmatch, between) if m]
        assert len(left) == len(between) and left[0] == 3 and left[-1] == 1, seen
        assert left == sorted(set(left), reverse=True), seen


async def test_a_transcript_whose_first_read_fails_is_read_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The conversation's head is read, but the first reads of its transcript fail: 503 with
    Retry-After: 1, then a proxy's 502. The transcript says what went wrong and when it is
    tried again, the notice says that it is read again while it is, and the transcript is
    read again until a read goes through: it shows the messages, and goes on live. (It said
    what went wrong and stayed empty.)"""
    failures = [unavailable(1), bad_gateway]
    async with conversation_open(
        live_server, chromium, "inspector-first-transcript.png", None, failures
    ) as s:
        page = s.page
        await expect(page.locator("#conv-title")).to_have_text("Recovering", timeout=TIMEOUT_MS)
        await expect(page.locator(".tabpanel-transcript .msg")).to_have_count(2, timeout=TIMEOUT_MS)
        await expect(transcript_error(page)).to_be_hidden()
        await expect(notice(page)).to_be_hidden()
        reads = s.transcript_reads
        assert len(reads.asked) == 3 and len(reads.answered) == 1
        retrying = "Could not read the transcript (trying again in "
        assert reads.shown[1] == f"{retrying}1 s): the database is unavailable; retry shortly"
        assert reads.shown[2].startswith(retrying), reads.shown
        assert "The server answered HTTP 502" in reads.shown[2]
        # The first try is no news; the next ones are.
        assert reads.noticed == [
            "",
            "Reading the transcript again…",
            "Reading the transcript again…",
        ], reads.noticed
        waited = reads.asked[1] - reads.asked[0]
        assert waited >= 0.9, f"Retry-After: 1 not honoured: read again after {waited:.1f} s"
        await until(lambda: len(s.relay.subscribes) == 1, "the page's subscribe")
        await s.write("Written live")
        await s.shows("Written live")


async def test_a_transcript_read_again_is_tried_again_before_the_page_listens_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The server ends the page's stream, and a message is written before the page reads the
    conversation again (its first new read is refused with 503). That read goes through, but
    the reads of the transcript fail: 503 with Retry-After: 1, then the server cannot be
    reached. The transcript says each time what went wrong and when it is tried again, the
    page stays out of date and does not subscribe; once a read of the transcript goes
    through, it shows the message written meanwhile, the page is current again, and it
    subscribes from the eventCursor of its read of the conversation and goes on live. (The
    transcript's failure was shown and never tried again, the page subscribed at once, and
    the message, in no event of the new stream, was missing for good.)"""
    async with conversation_open(live_server, chromium, "inspector-transcript-again.png") as s:
        page = s.page

        async def write_then_refuse(route: Route) -> None:
            # Before the read the new stream starts from: the message is in no event of it.
            await s.write("Written while out of date")
            await unavailable(1)(route)

        s.reads.failures = [write_then_refuse]
        s.transcript_reads.failures = [unavailable(1), unreachable]
        s.relay.end_stream()
        await until(
            lambda: len(s.transcript_reads.answered) == 2, "a transcript read that goes through"
        )
        await s.shows("Written while out of date")
        await expect(transcript_error(page)).to_be_hidden()
        await expect(notice(page)).to_be_hidden()

        reads = s.transcript_reads
        assert len(reads.asked) == 4, reads.asked
        retrying = "Could not read the transcript (trying again in "
        assert reads.shown[2] == f"{retrying}1 s): the database is unavailable; retry shortly"
        assert reads.shown[3].startswith(retrying), reads.shown
        assert "The server cannot be reached" in reads.shown[3]
        out_of_date = "Out of date: live updates stopped (the server ended them); "
        reading = f"{out_of_date}reading the transcript again…"
        assert reads.noticed[1:] == [reading] * 3, reads.noticed
        waited = reads.asked[2] - reads.asked[1]
        assert waited >= 0.9, f"Retry-After: 1 not honoured: read again after {waited:.1f} s"
        # No stream while the transcript could not be read: then one from the head's read.
        await until(lambda: len(s.relay.subscribes) == 2, "the page's second subscribe")
        assert len(s.reads.answered) == 2
        _, cursor = s.reads.answered[1]
        transcript_read_at, _ = reads.answered[1]
        again = s.relay.subscribes[1]
        assert again.after == cursor and again.at > transcript_read_at
        await s.write("Written live")
        await s.shows("Written live")
        await expect(page.locator(".tabpanel-transcript .msg")).to_have_count(4)


async def test_a_stream_the_server_ends_is_followed_by_a_new_read_and_stream(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The server ends the page's stream with `complete` (as when it stops): the page reads
    the conversation again and subscribes from that read. (It said that the server had ended
    the live updates, and stayed as it was.)"""
    async with conversation_open(live_server, chromium, "inspector-ended.png") as s:
        s.relay.end_stream()
        await until(lambda: len(s.relay.subscribes) == 2, "the page's second subscribe")
        # From a new read: the first one's cursor is the same (nothing was written between),
        # so that the second subscribe carries it does not say that it was read again.
        assert len(s.reads.answered) == 2
        read_at, cursor = s.reads.answered[1]
        assert s.relay.subscribes[1].after == cursor and s.relay.subscribes[1].at > read_at
        await s.write("Written after the end")
        await s.shows("Written after the end")
        await expect(notice(s.page)).to_be_hidden()


async def test_a_snapshot_saved_while_out_of_date_is_listed_after_the_new_read(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The Snapshots tab was loaded, the reader went back to the transcript, and the stream
    failed; a snapshot saved before the page's new read is in no event the new stream brings.
    The Snapshots tab lists it. (Its count said 1 and its list "No compaction snapshots".)"""
    async with conversation_open(live_server, chromium, "inspector-snaps.png") as s:
        page = s.page
        snapshots = page.get_by_role("tab", name=re.compile("^Snapshots"))
        await snapshots.click()
        await expect(page.locator(".tabpanel-snapshots")).to_contain_text(
            "No compaction snapshots", timeout=TIMEOUT_MS
        )
        await page.get_by_role("tab", name=re.compile("^Transcript")).click()
        s.reads.failures = [unavailable(2)]
        s.relay.end_stream([UNAVAILABLE])
        snapshot = {"id": s.conversation, "messages": [{"role": "user", "content": "Older"}]}
        await ok(s.gql, SNAPSHOT, snapshot)
        saved_at = time.monotonic()
        await until(lambda: len(s.relay.subscribes) == 2, "a subscribe after a new read")
        assert len(s.reads.asked) == 3 and s.reads.asked[2] > saved_at
        await expect(snapshots).to_have_text("Snapshots (1)", timeout=TIMEOUT_MS)
        await snapshots.click()
        await expect(page.locator("details.snapshot")).to_have_count(1, timeout=TIMEOUT_MS)


async def test_a_stream_ended_for_an_expired_cursor_says_so_for_a_person(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The page's stream ends with CURSOR_EXPIRED, whose message tells a client's code what
    to do ("read the state, subscribe anew"): the notice says what happened in words for the
    person reading the page, which reads again and goes on live."""
    async with conversation_open(live_server, chromium, "inspector-behind.png") as s:
        s.reads.failures = [unavailable(2)]  # the notice stays up while the read waits
        s.relay.end_stream([{**CURSOR_GONE, "message": EXPIRED}])
        await expect(notice(s.page)).to_contain_text("no longer kept")
        await expect(notice(s.page)).not_to_contain_text("subscribe anew")
        await until(lambda: len(s.relay.subscribes) == 2, "the page's second subscribe")
        assert s.relay.subscribes[1].after == s.reads.answered[-1][1]
        await expect(notice(s.page)).to_be_hidden()


async def test_a_stream_refused_after_a_reconnect_is_followed_by_a_new_read_and_stream(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The page's WebSocket drops (1012, a restart) and the server, its database not back
    yet, answers the page's subscribe on the new socket with DATABASE_UNAVAILABLE: the page
    reads the conversation again, subscribes from that read, and shows what was written
    meanwhile and after. (It said that live updates were off, and stopped updating.)"""
    async with conversation_open(live_server, chromium, "inspector-refused.png") as s:
        page = s.page
        s.relay.refuse.append([UNAVAILABLE])
        await s.relay.sockets[0].close(code=1012, reason="Service Restart")
        await s.write("Written while away")
        await until(lambda: len(s.relay.subscribes) == 3, "a subscribe after a new read")
        assert len(s.relay.sockets) == 2
        assert s.relay.subscribes[2].after == s.reads.answered[-1][1]
        await s.shows("Written while away", within_ms=TIMEOUT_MS)
        await expect(notice(page)).to_be_hidden()
        await s.write("Written after")
        await s.shows("Written after")
        await expect(page.locator(".tabpanel-transcript .msg")).to_have_count(4)


async def test_a_stream_that_keeps_failing_is_tried_again_less_and_less_often(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The server refuses every subscribe (DATABASE_UNAVAILABLE): the page reads and
    subscribes again at once the first time, then waits longer each time (1 s, 2 s, 4 s at
    most for the first three waits), instead of a loop of reads; once the server takes the
    subscribe, the page is live again."""
    async with conversation_open(live_server, chromium, "inspector-backoff.png") as s:
        s.relay.refuse.extend([[UNAVAILABLE]] * 100)
        s.relay.end_stream([UNAVAILABLE])
        await asyncio.sleep(6)
        tries = len(s.reads.asked) - 1
        assert 3 <= tries <= 5, f"{tries} reads in 6 s"
        gaps = [b - a for a, b in zip(s.reads.asked[1:], s.reads.asked[2:], strict=False)]
        assert gaps[0] >= 0.45 and gaps[1] >= 0.95, gaps
        await expect(notice(s.page)).to_contain_text("Out of date")
        s.relay.refuse.clear()
        # Not "one more read": the last read may be asked before the count above and its
        # subscribe sent after the refusals stopped.
        await until(lambda: not s.relay.subscribes[-1].refused, "a subscribe the server takes")
        taken = s.relay.subscribes[-1]
        read_at, cursor = s.reads.answered[-1]
        assert taken.after == cursor and taken.at > read_at
        await s.write("Written once it took")
        await s.shows("Written once it took", within_ms=TIMEOUT_MS)
        await expect(notice(s.page)).to_be_hidden()


async def test_a_subscribe_refused_for_a_limit_is_sent_again_from_the_same_cursor(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """A `subscribe` refused for a limit (the token's subscriptions, the socket's operations)
    never started: nothing was missed past the page's cursor. The page waits, subscribes
    again from the same cursor, and reads nothing again (it read the conversation and every
    transcript again at each refusal, a loop while the token stayed over its cap)."""
    limit = {
        "message": "too many subscriptions for this token (limit 1)",
        "extensions": {"code": "LIMIT_EXCEEDED"},
    }
    async with conversation_open(live_server, chromium, "inspector-limit.png") as s:
        s.relay.refuse.extend([[limit]] * 2)
        s.relay.end_stream([UNAVAILABLE])  # a new read, then subscribes refused twice
        await expect(notice(s.page)).to_contain_text("Live updates paused: too many")
        await until(lambda: len(s.relay.subscribes) == 4, "a subscribe the server takes")
        assert [sub.refused for sub in s.relay.subscribes[1:]] == [True, True, False]
        _, cursor = s.reads.answered[-1]
        assert len(s.reads.asked) == 2  # the first read, and the one after the stream ended
        assert {sub.after for sub in s.relay.subscribes[1:]} == {cursor}
        await s.write("Written once it took")
        await s.shows("Written once it took", within_ms=TIMEOUT_MS)
        await expect(notice(s.page)).to_be_hidden()


async def test_a_deleted_conversation_or_a_revoked_token_ends_live_updates_for_good(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """What no new read or stream can mend is said, and not tried again: a stream ended with
    NOT_FOUND; a conversation deleted (its CONVERSATION_DELETED event, then `complete`); a
    stream ended with FORBIDDEN; and a token revoked while its stream runs (FORBIDDEN, then the
    server closes the socket with 4403): the page signs out and says why."""

    async def stays_quiet(s: Session) -> None:
        reads, subscribes = len(s.reads.asked), len(s.relay.subscribes)
        await asyncio.sleep(QUIET_S)
        assert (len(s.reads.asked), len(s.relay.subscribes)) == (reads, subscribes)

    async def open_again(s: Session, cid: str, subscribes: int) -> None:
        # By the list: the same address again would open nothing new.
        await s.page.goto(f"{live_server.base_url}/ui#/")
        await s.page.goto(f"{live_server.base_url}/ui#/c/{cid}")
        await expect(s.page.locator(".tabpanel-transcript")).to_be_visible(timeout=TIMEOUT_MS)
        await until(lambda: len(s.relay.subscribes) == subscribes, "the page's subscribe")

    def ended(code: str, message: str) -> list[dict[str, Any]]:
        return [{"message": message, "extensions": {"code": code}, "path": ["conversationEvents"]}]

    async with conversation_open(live_server, chromium, "inspector-final.png") as s:
        page = s.page
        s.relay.end_stream(ended("NOT_FOUND", "conversation not found"))
        await expect(notice(page)).to_have_text(
            "Live updates stopped: this conversation was deleted, or this token may no longer "
            "read it.",
            timeout=TIMEOUT_MS,
        )
        await stays_quiet(s)
        # With nothing to listen to, the page's socket closes: "Live" would say otherwise.
        await expect(page.locator("#live")).to_be_hidden(timeout=TIMEOUT_MS)

        created = await ok(s.gql, CREATE_CONVERSATION, {"input": {"title": "Deleted soon"}})
        doomed = created["conversation"]["id"]
        await open_again(s, doomed, 2)
        await expect(page.locator("#live")).to_have_text("Live", timeout=TIMEOUT_MS)
        # Its stream runs once it brings a write (deleted before, it would end with NOT_FOUND).
        await ok(s.gql, APPEND, {"id": doomed, "messages": [{"role": "user", "content": "Hi"}]})
        await s.shows("Hi")
        await s.gql(DELETE, {"id": doomed})
        await expect(notice(page)).to_have_text(
            "This conversation has just been deleted.", timeout=LIVE_MS
        )
        await stays_quiet(s)

        await open_again(s, s.conversation, 3)
        revoked = "the token of this subscription was revoked or has expired"
        s.relay.end_stream(ended("FORBIDDEN", revoked))
        await expect(notice(page)).to_have_text(
            f"Live updates stopped: {revoked}.", timeout=TIMEOUT_MS
        )
        await stays_quiet(s)

        await open_again(s, s.conversation, 4)
        # The page asks whether the token is still good: the server's 401 is on the console.
        s.browser.expected_console.append(re.compile(r"status of 401"))
        listing = await live_server.cli("token", "list")
        token_id = next(line.split()[0] for line in listing.splitlines() if LABEL in line)
        await live_server.cli("token", "revoke", token_id)
        await expect(page.locator("#signin-error")).to_contain_text(
            "no longer accepts this token", timeout=TIMEOUT_MS
        )
        await stays_quiet(s)


async def test_a_child_transcript_closed_while_it_is_read_again_does_not_hold_the_page_up(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The server ends the page's stream while a child's transcript is open in the side panel
    and its read is on its way; the reader closes the panel, and that read then fails (503,
    Retry-After: 30). The page reads nothing more for the closed panel, never says that it
    will, and listens again at once. (It waited the 30 s out to "read" a transcript no longer
    shown, its notice counting down to that read, and stayed out of date meanwhile, with no
    stream.)"""
    async with conversation_open(live_server, chromium, "inspector-panel.png") as s:
        page = s.page
        await delegate(s.gql, s.conversation, ("root", "researcher"), "Look it up")
        released = asyncio.Event()

        async def held_then_refused(route: Route) -> None:
            await released.wait()
            await unavailable(30)(route)

        s.transcript_reads.failures = [held_then_refused]
        await page.get_by_role("tab", name=re.compile("^Delegations")).click()
        await node(page, "Look it up").locator(".tnode-open").click()
        panel = page.locator(".panel")
        await expect(panel).to_be_visible(timeout=TIMEOUT_MS)
        await until(lambda: len(s.transcript_reads.asked) == 2, "the panel's transcript read")
        await page.evaluate(RECORD_NOTICES)

        s.relay.end_stream()  # the page reads again: the head, then both transcripts
        # At least: the delegation's event may have the page read the head once more, before
        # or after the stream ends. The root's transcript is read only by the new read.
        await until(lambda: len(s.reads.answered) >= 2, "the conversation read again")
        await until(lambda: len(s.transcript_reads.answered) == 2, "the transcript read again")
        await expect(notice(page)).to_contain_text("reading the transcript of researcher again")
        await panel.get_by_role("button", name="Close the transcript panel").click()
        await expect(panel).to_have_count(0)
        released.set()

        await until(lambda: len(s.relay.subscribes) == 2, "the page's second subscribe")
        await expect(notice(page)).to_be_hidden()
        seen: list[str] = await page.evaluate("() => window.noticesSeen")
        assert not [text for text in seen if "will read the transcript of" in text], seen
        assert len(s.transcript_reads.asked) == 3, s.transcript_reads.asked
        await s.write("Written live")
        await s.shows("Written live")


async def test_a_failed_question_of_what_the_server_offers_is_asked_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """At sign-in the page asks the server what it offers (introspection): the server cannot
    be reached, then answers 503 (Retry-After: 1). The page says so, asks again, learns that
    the server has event cursors and subscribes from its read's cursor. (Any failure was taken
    for introspection off: the page went without cursors for the whole session, subscribing
    before it read and reading everything again after each reconnect.)"""
    said: list[str | None] = []

    async def unavailable_once_said(route: Route) -> None:
        # Asked again: what the page said while it waited.
        said.append(await route.request.frame.page.locator("#signin-error").text_content())
        await unavailable(2)(route)

    failures: list[Fail] = [unreachable, unavailable_once_said]
    async with conversation_open(
        live_server,
        chromium,
        "inspector-capabilities-again.png",
        capability_failures=failures,
    ) as s:
        assert failures == [] and said == [
            "Could not ask the server what it offers: The server cannot be reached. (asking "
            "again in 1 s…)"
        ]
        (subscribe,) = s.relay.subscribes
        assert subscribe.after is not None and s.reads.answered[-1][1] == subscribe.after
        await s.write("Written live")
        await s.shows("Written live")


async def test_two_reads_of_the_conversation_at_once_are_one_read_that_is_tried_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """A server with introspection off: the page knows no eventCursor, so it subscribes first
    and then reads, and reads everything again whenever its WebSocket reconnects. Its first
    read is refused (503, Retry-After: 3); while it waits, the WebSocket drops (1012) and
    reconnects, and the next read is refused too (503, Retry-After: 1). The page waits as
    each refusal asked, reads the conversation, shows its transcript and goes on live. (The
    reconnect's read started beside the waiting one, under the same wait: its wait replaced
    the first one's, which was never resumed, so the page showed the conversation's head and
    never its transcript.)"""
    failures = [unavailable(3), unavailable(1)]
    async with conversation_open(
        live_server, chromium, "inspector-two-reads.png", failures, introspection=False
    ) as s:
        page = s.page
        await until(lambda: len(s.relay.subscribes) == 1, "the page's subscribe")
        await expect(error(page)).to_contain_text("(trying again in 3 s)", timeout=TIMEOUT_MS)
        await s.relay.sockets[0].close(code=1012, reason="Service Restart")
        await until(lambda: len(s.relay.subscribes) == 2, "the subscribe on the new socket")
        await expect(page.locator(".tabpanel-transcript .msg")).to_have_count(2, timeout=TIMEOUT_MS)
        await expect(error(page)).to_be_hidden()
        await expect(notice(page)).to_be_hidden()
        gaps = [b - a for a, b in zip(s.reads.asked, s.reads.asked[1:], strict=False)]
        assert gaps[0] >= 2.9 and gaps[1] >= 0.9, f"Retry-After not honoured: {gaps}"
        await s.write("Written live")
        await s.shows("Written live")


async def test_a_read_of_the_conversation_after_an_event_is_tried_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The conversation is renamed, and the page's read of it after that event is refused
    (503, Retry-After: 1): the page says so and when it tries again, reads it again after
    that wait, and shows the new title. (Its failure was shown and nothing read it again
    until the next event: the old title stayed, under the error.)"""
    async with conversation_open(live_server, chromium, "inspector-renamed.png") as s:
        page = s.page
        s.reads.failures = [unavailable(1)]
        await ok(s.gql, RENAME, {"id": s.conversation, "title": "Renamed"})
        await expect(error(page)).to_contain_text(
            "Could not read this conversation (trying again in 1 s)", timeout=TIMEOUT_MS
        )
        await expect(page.locator("#conv-title")).to_have_text("Renamed", timeout=TIMEOUT_MS)
        await expect(error(page)).to_be_hidden()
        assert len(s.reads.asked) == 3, s.reads.asked
        assert s.reads.asked[2] - s.reads.asked[1] >= 0.9, s.reads.asked


async def test_a_stream_that_ends_while_the_page_reads_again_leaves_it_out_of_date(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """A server with introspection off: the page listens, then reads. The server ends the
    page's stream; the page listens again and reads the conversation again, and while that
    read is on its way the new stream ends too, the server asking for 3 s. The notice says
    that the page is out of date until it has read again after that second end, then goes.
    (The first read, once through, cleared the notice's reason: it counted down to a read
    without saying why, and then showed nothing while the page read again.)"""
    async with conversation_open(
        live_server, chromium, "inspector-two-ends.png", introspection=False
    ) as s:
        page = s.page
        released = asyncio.Event()

        async def held(route: Route) -> None:
            await released.wait()
            await route.fallback()

        await page.evaluate(RECORD_NOTICES)
        s.reads.failures = [held]
        s.relay.end_stream()
        await until(lambda: len(s.reads.asked) == 2, "the read after the first end")
        await until(lambda: len(s.relay.subscribes) == 2, "the stream after the first end")
        in_3_s = {"code": "DATABASE_UNAVAILABLE", "retryAfterSeconds": 3}
        s.relay.end_stream([{"message": UNAVAILABLE["message"], "extensions": in_3_s}])
        await expect(notice(page)).to_contain_text("will read the conversation again in 3 s")
        released.set()
        await until(lambda: len(s.relay.subscribes) == 3, "the stream after the second end")
        await expect(notice(page)).to_be_hidden(timeout=TIMEOUT_MS)
        seen: list[str] = await page.evaluate("() => window.noticesSeen")
        assert seen[0] == seen[-1] == "", seen
        assert all(text.startswith("Out of date: ") for text in seen[1:-1]), seen
        await s.write("Written live")
        await s.shows("Written live")


async def test_two_events_in_a_row_leave_the_latest_conversation_shown(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The conversation is renamed twice, the second time while the answer to the page's read
    after the first is held up on its way: the page ends up showing the second title. (Each
    event had a read of its own, and the first one's answer, arriving last, put the first
    title back for good.)"""
    async with conversation_open(live_server, chromium, "inspector-renames.png") as s:
        page = s.page
        released = asyncio.Event()

        async def held(route: Route) -> None:
            response = await route.fetch()  # the conversation as it is now
            await released.wait()
            await route.fulfill(response=response)

        s.reads.failures = [held]
        await ok(s.gql, RENAME, {"id": s.conversation, "title": "First rename"})
        await until(lambda: len(s.reads.asked) == 2, "the read after the first rename")
        await asyncio.sleep(0.2)  # the answer to it is on its way: it has the first title
        await ok(s.gql, RENAME, {"id": s.conversation, "title": "Second rename"})
        await asyncio.sleep(1)  # the second event came, and its read, if any
        released.set()
        await until(lambda: len(s.reads.answered) == 2, "the read after the held one")
        await asyncio.sleep(0.5)  # the answer is shown, whatever it has
        await expect(page.locator("#conv-title")).to_have_text("Second rename")


async def reads_of(page: Page, marker: str, error: str) -> Reads:
    """The page's reads that carry `marker` from now on, failed as the Reads' failures say."""
    reads = Reads(marker, error)
    await page.route(GRAPHQL, reads.handle)
    return reads


def held(released: asyncio.Event) -> Fail:
    """A read answered with what the server has now, once `released` is set."""

    async def hold(route: Route) -> None:
        response = await route.fetch()
        await released.wait()
        await route.fulfill(response=response)

    return hold


async def three_levels(s: Session) -> None:
    """Delegations three levels deep under the conversation, its Delegations tab open and the
    third level unfolded by the reader (the page's first read brings two)."""
    one = await delegate(s.gql, s.conversation, ("root", "planner"), "Level one")
    two = await delegate(s.gql, one["child"], ("planner", "researcher"), "Level two")
    await delegate(s.gql, two["child"], ("researcher", "reader"), "Level three")
    page = s.page
    await page.get_by_role("tab", name=re.compile("^Delegations")).click()
    await expect(node(page, "Level two")).to_be_visible(timeout=TIMEOUT_MS)
    await node(page, "Level two").locator(".tnode-toggle").click()
    await expect(node(page, "Level three")).to_be_visible(timeout=TIMEOUT_MS)


async def test_a_tree_read_again_is_tried_again_until_it_is_read(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The server ends the page's stream while the Delegations tab is open, a delegation is
    made before the page reads the conversation again (so no event of the new stream has
    it), and the page's read of the tree after that is refused (503, Retry-After: 1). The tree
    says so and when it is read again, and then shows the new delegation, without the error.
    (The failure was shown over a tree emptied of its delegations, and nothing read it
    again.)"""
    async with conversation_open(live_server, chromium, "inspector-tree.png") as s:
        page = s.page
        await delegate(s.gql, s.conversation, ("root", "researcher"), "Look it up")
        await page.get_by_role("tab", name=re.compile("^Delegations")).click()
        await expect(node(page, "Look it up")).to_be_visible(timeout=TIMEOUT_MS)
        tree_reads = await reads_of(page, TREE_READ, TREE_ERROR)

        async def delegate_then_read(route: Route) -> None:
            await delegate(s.gql, s.conversation, ("root", "writer"), "Write it down")
            await route.fallback()

        s.reads.failures = [delegate_then_read]
        tree_reads.failures = [unavailable(1)]
        s.relay.end_stream()
        await expect(page.locator(TREE_ERROR)).to_contain_text(
            "Could not read the delegation tree (trying again in 1 s)", timeout=TIMEOUT_MS
        )
        await expect(node(page, "Write it down")).to_be_visible(timeout=TIMEOUT_MS)
        await expect(node(page, "Look it up")).to_be_visible()
        await expect(page.locator(TREE_ERROR)).to_be_hidden()
        await expect(notice(page)).to_be_hidden()
        assert len(tree_reads.asked) == 2, tree_reads.asked
        assert tree_reads.asked[1] - tree_reads.asked[0] >= 0.9, tree_reads.asked


async def test_two_tree_reloads_at_once_keep_what_the_reader_unfolded(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The reader unfolded the tree's third level; the server ends the page's stream twice in
    a row, and the page's read of the tree after the first end is held up until the page has
    asked for the tree again after the second. The tree ends up showing the third level
    still. (The second reload began on the first's tree, not loaded yet, so it saw nothing
    unfolded; the first carried on with the second's tree, and the third level was gone.)"""
    async with conversation_open(live_server, chromium, "inspector-reloads.png") as s:
        page = s.page
        await three_levels(s)
        first, rest = asyncio.Event(), asyncio.Event()
        tree_reads = await reads_of(page, TREE_READ, TREE_ERROR)
        tree_reads.failures = [held(first), held(rest)]
        s.relay.end_stream()
        await until(lambda: len(tree_reads.asked) == 1, "the tree read after the first end")
        await until(lambda: len(s.relay.subscribes) == 2, "the stream after the first end")
        s.relay.end_stream()
        await until(lambda: len(s.relay.subscribes) == 3, "the stream after the second end")
        await asyncio.sleep(1)  # the second reload began, if it does beside the first
        first.set()
        await asyncio.sleep(0.5)
        rest.set()
        await asyncio.sleep(2)  # whatever is still loading is done
        await expect(node(page, "Level three")).to_be_visible(timeout=TIMEOUT_MS)
        toggle = node(page, "Level two").locator(".tnode-toggle")
        await expect(toggle).to_have_attribute("aria-expanded", "true")


async def test_a_tree_reload_stops_when_the_view_is_closed(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The reader unfolded the tree's third level; the server ends the page's stream, and the
    reader leaves the conversation while the page's read of the tree after that is on its
    way. Once that read is answered the page reads nothing more for the closed view. (It
    went on to read the third level again, into a tree no longer shown.)"""
    async with conversation_open(live_server, chromium, "inspector-closed.png") as s:
        page = s.page
        await three_levels(s)
        released = asyncio.Event()
        tree_reads = await reads_of(page, TREE_READ, TREE_ERROR)
        tree_reads.failures = [held(released)]
        s.relay.end_stream()
        await until(lambda: len(tree_reads.asked) == 1, "the tree read after the end")
        await page.goto(f"{live_server.base_url}/ui#/")
        await expect(page.locator(".conversation")).to_have_count(0, timeout=TIMEOUT_MS)
        released.set()
        await asyncio.sleep(QUIET_S)
        assert len(tree_reads.asked) == 1, tree_reads.asked


async def test_a_snapshot_list_whose_read_fails_is_read_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """A snapshot is saved while the Snapshots tab is open, and the page's read of the list
    after that event is refused (503, Retry-After: 1), while its read of the conversation
    goes through. The tab says so and when it reads the list again (the conversation's read
    does not clear that), then shows the snapshot. (The failure went to the conversation's
    error, which the read of the conversation then cleared; the list stayed at "Loading…",
    read never again, and a visit to the tab later did not read it either.)"""
    async with conversation_open(live_server, chromium, "inspector-snap-fail.png") as s:
        page = s.page
        await page.get_by_role("tab", name=re.compile("^Snapshots")).click()
        panel = page.locator(".tabpanel-snapshots")
        await expect(panel).to_contain_text("No compaction snapshots", timeout=TIMEOUT_MS)
        snapshot_reads = await reads_of(page, SNAPSHOTS_READ, SNAPSHOTS_ERROR)
        snapshot_reads.failures = [unavailable(1)]
        snapshot = {"id": s.conversation, "messages": [{"role": "user", "content": "Older"}]}
        await ok(s.gql, SNAPSHOT, snapshot)
        await expect(page.locator(SNAPSHOTS_ERROR)).to_contain_text(
            "Could not read the snapshots (trying again in 1 s)", timeout=TIMEOUT_MS
        )
        await expect(page.locator("details.snapshot")).to_have_count(1, timeout=TIMEOUT_MS)
        await expect(panel).to_contain_text("1 compaction snapshot:")
        await expect(page.locator(SNAPSHOTS_ERROR)).to_be_hidden()
        await expect(error(page)).to_be_hidden()
        assert len(snapshot_reads.asked) == 2, snapshot_reads.asked
        assert snapshot_reads.asked[1] - snapshot_reads.asked[0] >= 0.9, snapshot_reads.asked
        # The notice said it was reading the list again while it was.
        assert snapshot_reads.noticed[1] == "Reading the snapshots again…", snapshot_reads.noticed


async def test_two_snapshots_saved_in_a_row_leave_the_latest_list_shown(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """Two snapshots are saved while the Snapshots tab is open, the second while the answer
    to the page's read after the first is held up on its way: the list ends up with both.
    (Each event had a read of its own, and the first one's answer, arriving last, put the
    list of one snapshot back for good.)"""
    async with conversation_open(live_server, chromium, "inspector-snaps2.png") as s:
        page = s.page
        await page.get_by_role("tab", name=re.compile("^Snapshots")).click()
        panel = page.locator(".tabpanel-snapshots")
        await expect(panel).to_contain_text("No compaction snapshots", timeout=TIMEOUT_MS)
        released = asyncio.Event()
        snapshot_reads = await reads_of(page, SNAPSHOTS_READ, SNAPSHOTS_ERROR)
        snapshot_reads.failures = [held(released)]
        snapshot = {"id": s.conversation, "messages": [{"role": "user", "content": "Older"}]}
        await ok(s.gql, SNAPSHOT, snapshot)
        await until(lambda: len(snapshot_reads.asked) == 1, "the read after the first save")
        await asyncio.sleep(0.2)  # the answer to it is on its way: it has one snapshot
        await ok(s.gql, SNAPSHOT, snapshot)
        await asyncio.sleep(1)  # the second event came, and its read, if any
        released.set()
        # (Held, the first read is not among the answered.)
        await until(lambda: len(snapshot_reads.answered) == 1, "the read after the held one")
        await asyncio.sleep(0.5)  # the answer is shown, whatever it has
        await expect(page.locator("details.snapshot")).to_have_count(2)
        await expect(panel).to_contain_text("2 compaction snapshots:")


LIST_READ = "InspectorConversations("
LIST_ERROR = ".list-pane .error"


async def test_a_list_read_again_that_fails_keeps_its_rows_and_is_tried_again(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """A Refresh while the server was out of reach emptied the list and said so, and nothing
    read it again: once the server was back, the list stayed empty until a person thought to
    press Refresh again."""
    token = await live_server.token(workspace="site:recovery", owner="user:ada", label=LABEL)
    failures: list[Fail] = [unreachable, unavailable(1)]
    asked: list[float] = []

    async def list_reads(route: Route) -> None:
        if LIST_READ not in (route.request.post_data or ""):
            await route.fallback()
            return
        asked.append(time.monotonic())
        if failures:
            await failures.pop(0)(route)
            return
        await route.fallback()

    async with live_server.client(token) as gql:
        for title in ("One", "Two"):
            await ok(gql, CREATE_CONVERSATION, {"input": {"title": title}})
        async with inspector(live_server, chromium, "inspector-list-retry.png") as browser:
            browser.expected_console.append(FAILED_LOADS)
            page = browser.page
            await sign_in(page, token)
            rows = page.locator(".conv-row")
            await expect(rows).to_have_count(2, timeout=TIMEOUT_MS)
            await page.route(GRAPHQL, list_reads)
            await ok(gql, CREATE_CONVERSATION, {"input": {"title": "Three"}})
            await page.locator(".list-pane [data-action=refresh]").click()
            await expect(page.locator(LIST_ERROR)).to_contain_text(
                "Could not read the list again (trying again in", timeout=TIMEOUT_MS
            )
            await expect(rows).to_have_count(2)  # what it read before, meanwhile
            await expect(rows).to_have_count(3, timeout=TIMEOUT_MS)
            await expect(page.locator(LIST_ERROR)).to_be_hidden()
            assert len(asked) == 3, asked


async def test_the_list_follows_a_rename_and_a_delete_of_the_open_conversation(
    live_server: LiveServer, chromium: Chromium
) -> None:
    """The list's rows followed live message counts but kept a renamed conversation's old
    title, and a deleted one's row, a link to "not found"."""
    token = await live_server.token(workspace="site:recovery", owner="user:ada", label=LABEL)
    async with live_server.client(token) as gql:
        kept = (await ok(gql, CREATE_CONVERSATION, {"input": {"title": "Kept"}}))["conversation"]
        made = await ok(gql, CREATE_CONVERSATION, {"input": {"title": "Before"}})
        cid = made["conversation"]["id"]
        async with inspector(live_server, chromium, "inspector-list-follows.png") as browser:
            page = browser.page
            await sign_in(page, token)
            rows = page.locator(".conv-row")
            await expect(rows).to_have_count(2, timeout=TIMEOUT_MS)
            await rows.filter(has_text="Before").click()
            await expect(page.locator("#live")).to_have_text("Live", timeout=TIMEOUT_MS)
            renamed = await gql(RENAME, {"id": cid, "title": "After"})
            assert renamed["updateConversation"]["userErrors"] == []
            await expect(page.locator("#conv-title")).to_have_text("After", timeout=LIVE_MS)
            await expect(rows.filter(has_text="After")).to_have_count(1, timeout=LIVE_MS)
            assert (await gql(DELETE, {"id": cid}))["deleteConversation"]["deleted"]
            await expect(rows).to_have_count(1, timeout=LIVE_MS)
            await expect(rows.first).to_have_attribute("data-id", kept["id"])
