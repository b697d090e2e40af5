"""The durable event log names an append's messages by their seqs instead of copying them
(revision 0013). What takes messages away while their tree's log lives copies them into the
rows that name them first, so a resumed stream replays every event as its subscribers got
it: after a replace that keeps part of a transcript, a child transcript's delete (with the
transcripts below it) and a child transcript's expiry (one set before the API refused it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import delete, event, pool, select, update
from sqlalchemy.ext.asyncio import create_async_engine

from graph.domain.events import EventKind
from graph.store.compression import Compression
from graph.store.tables import conversation, message
from graph.store.tables import event_log as L
from tests.conftest import GraphQLClient
from tests.operations import DELETE, REPLACE, append, create, delegate
from tests.test_event_resume import (
    events,
    live_stream,
    nothing_more,
    refused,
    stream,
    witness_and_lost,
)
from tests.test_retention import TTL, wait_past

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

MESSAGE_EVENTS = [EventKind.MESSAGES_APPENDED, EventKind.TRANSCRIPT_REPLACED]


@pytest.fixture
async def alice(live_server: LiveServer) -> AsyncIterator[GraphQLClient]:
    async with live_server.client(await live_server.token()) as gql:
        yield gql


async def copies(server: LiveServer, root: str) -> dict[str, list[bool]]:
    """For each conversation of the tree, its message events' log rows in order: True for a
    row that holds a copy of its messages, False for one that names them by seq."""
    engine = create_async_engine(server.database_url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            found = await connection.execute(
                select(L.c.conversation_id, L.c.payload, L.c.seq_low)
                .where(L.c.root_id == root, L.c.kind.in_(MESSAGE_EVENTS))
                .order_by(L.c.position)
            )
            rows = found.all()
    finally:
        await engine.dispose()
    by_conversation: dict[str, list[bool]] = {}
    for cid, payload, low in rows:
        by_conversation.setdefault(cid, []).append(low is None and payload is not None)
    return by_conversation


async def test_replayed_appends_keep_their_messages_after_a_replace_a_delete_and_an_expiry(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    kept = (await delegate(alice, root, "kept"))["childConversation"]["id"]
    deleted = (await delegate(alice, root, "deleted"))["childConversation"]["id"]
    below = (await delegate(alice, deleted, "below"))["childConversation"]["id"]
    expiring = (await delegate(alice, root, "expiring"))["childConversation"]["id"]
    async with contextlib.AsyncExitStack() as stack:
        witness, cursor = await witness_and_lost(stack, live_server, alice, root)
        for i in range(3):
            for cid in (root, kept, deleted, below, expiring):
                await append(alice, cid, f"{cid[:6]}-{i}")
        await append(alice, kept, "several", "at once")
        assert await copies(live_server, root) == {
            cid: [False] * (4 if cid == kept else 3)
            for cid in (root, kept, deleted, below, expiring)
        }

        # kept's transcript becomes its first two messages and a new one: the appends of
        # its third to fifth are copied into the log before the replace deletes them.
        first_two = [{"role": "user", "content": f"{kept[:6]}-{i}"} for i in range(2)]
        new = [*first_two, {"role": "user", "content": "replaced"}]
        replaced = await alice(REPLACE, {"id": kept, "m": new})
        assert replaced["replaceTranscript"]["userErrors"] == []
        assert (await alice(DELETE, {"id": deleted}))["deleteConversation"]["deleted"]
        expiry = await expire_alone(live_server, expiring)
        count = 16 + 3  # the appends, the replace, the delete and its parent's update
        missed = await events(witness, count)

        await wait_past(expiry)
        await live_server.cli("sweep")
        logged = await copies(live_server, root)
        assert logged[root] == [False, False, False]
        assert logged[kept] == [False, False, True, True, False]  # the replace's: its own
        assert logged[deleted] == logged[below] == logged[expiring] == [True, True, True]

        async with stream(live_server, alice, root, cursor) as resumed:
            replayed = await events(resumed, count)
            assert replayed == missed
            texts = [m["data"]["content"] for e in replayed for m in e["messages"] or []]
            assert texts.count("several") == 1 and f"{below[:6]}-2" in texts
            # The sweep's delete of the child that expired alone, and its parent's update.
            swept = [await resumed.event(), await resumed.event()]
            assert [(e["kind"], e["conversationId"]) for e in swept] == [
                ("CONVERSATION_DELETED", expiring),
                ("CONVERSATION_UPDATED", root),
            ]
            await nothing_more(resumed)


async def expire_alone(server: LiveServer, child: str) -> datetime:
    """Give a child transcript an expiry of its own, just ahead, as releases before the API
    refused one (a child lives and dies with its root now): the sweep deletes it alone."""
    at = datetime.now(UTC) + TTL
    engine = create_async_engine(server.database_url, poolclass=pool.NullPool)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                update(conversation).where(conversation.c.id == child).values(expires_at=at)
            )
    finally:
        await engine.dispose()
    return at


async def an_append_with_a_message_gone(
    server: LiveServer, alice: GraphQLClient
) -> tuple[str, str]:
    """A root whose append of "one" and "two" has lost "two" as a replica of the release
    before migration 0013 could lose it: deleted without a copy into the log row that names
    it. Returns the root and a cursor from before the append."""
    root = await create(alice)
    async with contextlib.AsyncExitStack() as lost:
        _, cursor = await live_stream(lost, server, alice, root)
    await append(alice, root, "one", "two")
    engine = create_async_engine(server.database_url, poolclass=pool.NullPool)
    if engine.dialect.name == "sqlite":  # the search index's delete trigger calls it
        reads = Compression(Path(str(engine.url.database)), enabled=False)
        event.listen(engine.sync_engine, "connect", lambda conn, _: reads.register(conn))
    try:
        async with engine.begin() as connection:
            await connection.execute(delete(message).where(message.c.seq == 2))
    finally:
        await engine.dispose()
    return root, cursor


async def test_a_replay_that_finds_an_event_s_messages_gone_says_the_cursor_expired(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root, cursor = await an_append_with_a_message_gone(live_server, alice)

    error = await refused(live_server, alice, root, cursor)
    assert error["extensions"]["code"] == "CURSOR_EXPIRED"
    assert error["extensions"]["field"] == ["after"]


async def test_a_replace_copies_no_partial_event_and_its_replay_says_the_cursor_expired(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root, cursor = await an_append_with_a_message_gone(live_server, alice)
    # The replace copies what it drops into the log first: not "one" alone as the event.
    replaced = await alice(REPLACE, {"id": root, "m": [{"role": "user", "content": "new"}]})
    assert replaced["replaceTranscript"]["userErrors"] == []
    assert (await copies(live_server, root))[root] == [False, False]

    error = await refused(live_server, alice, root, cursor)
    assert error["extensions"]["code"] == "CURSOR_EXPIRED"
