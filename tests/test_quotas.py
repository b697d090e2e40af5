"""Workspace quotas: a runaway agent loop fills its own workspace's quota, not the disk.

With CONVOGRAPH_WORKSPACE_MAX_MESSAGES / _MAX_BYTES, a write that would take a workspace past
a quota is STORAGE_FULL naming the quota, writes nothing, and leaves reads and deletes
working; deleting makes room again. The database decides: concurrent writers, and replicas
over one database, stop exactly at the quota.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from graph.settings import Settings, SettingsError
from graph.store.retention import sweep
from tests.conftest import GraphQLClient, Server
from tests.lock_waits import lock_waiters
from tests.operations import create
from tests.test_http import serving

if TYPE_CHECKING:
    from tests.live_server import LiveServers

pytest_plugins = ["tests.live_server"]

APPEND = """mutation($id: ID!, $messages: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $messages}) {
    conversation { messageCount version } userErrors { code message field } } }"""
REPLACE = """mutation($id: ID!, $messages: [JSON!]!) {
  replaceTranscript(input: {conversationId: $id, messages: $messages}) {
    conversation { messageCount } userErrors { code message } } }"""
SNAPSHOT = """mutation($id: ID!, $messages: [JSON!]!) {
  saveSnapshot(input: {conversationId: $id, messages: $messages}) {
    snapshot { id } userErrors { code message } } }"""
DELETE = """mutation($id: ID!) { deleteConversation(input: {id: $id}) {
  deleted userErrors { code } } }"""
DELEGATE = """mutation($id: ID!) { createDelegation(input: {parentConversationId: $id,
  delegatingTier: "lead", targetTier: "helper", task: "dig"}) {
  delegation { childConversation { id } } userErrors { code } } }"""
EXPIRE = """mutation($id: ID!, $at: DateTime) { updateConversation(input: {id: $id,
  expiresAt: $at}) { userErrors { code } } }"""
READ = """query($id: ID!) { conversation(id: $id) { messageCount version transcript
  snapshots { totalCount } } }"""
FIGURES = "{ workspaceFigures { messages storedBytes } }"


def said(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def size_of(messages: list[dict[str, Any]]) -> int:
    """The bytes a quota counts for these messages: their compact JSON, in UTF-8."""
    return sum(
        len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for m in messages
    )


@asynccontextmanager
async def serving_as(
    settings: Settings, workspace: str = "site:1", owner: str = "user:alice"
) -> AsyncIterator[tuple[Server, GraphQLClient]]:
    """test_http's app over `settings`, and a client holding a WRITE token of `owner`."""
    async with serving(settings) as (server, http):
        yield server, GraphQLClient(http, await server.token(workspace, owner))


async def append(gql: GraphQLClient, cid: str, *texts: str) -> dict[str, Any]:
    payload: dict[str, Any] = (
        await gql(APPEND, {"id": cid, "messages": [said(t) for t in texts]})
    )["appendMessages"]
    return payload


def refused(payload: dict[str, Any]) -> str:
    """The message of the one STORAGE_FULL error in `payload`."""
    (error,) = payload["userErrors"]
    assert error["code"] == "STORAGE_FULL", error
    message: str = error["message"]
    return message


async def test_a_write_past_the_message_quota_writes_nothing_and_a_delete_makes_room(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        serving_as(settings.replace(workspace_max_messages=10)) as (_server, gql),
    ):
        cid = await create(gql)
        assert (await append(gql, cid, *"abcdef"))["userErrors"] == []
        payload = await append(gql, cid, *"ghijk")
        message = refused(payload)
        assert "site:1" in message and "quota of 10 messages" in message, message
        assert "adds 5" in message, message
        # How much the workspace stores is every owner's: not for one owner's token to learn.
        assert "6" not in message and "stored" not in message, message
        assert "quota of 10 messages (6 stored, this write adds 5)" in caplog.text  # operators
        assert payload["conversation"] is None
        # Nothing of the refused write is stored; reads go on.
        read = (await gql(READ, {"id": cid}))["conversation"]
        assert read["messageCount"] == 6 and len(read["transcript"]) == 6
        assert read["version"] == 2
        # Up to the quota exactly, then not one more.
        assert (await append(gql, cid, *"ghij"))["userErrors"] == []
        refused(await append(gql, cid, "k"))
        # A replace that adds messages is refused too; one that keeps the count is not.
        refused(
            (await gql(REPLACE, {"id": cid, "messages": [said(c) for c in "abcdefghijk"]}))[
                "replaceTranscript"
            ]
        )
        kept = [said(c) for c in "abcdefghiZ"]
        assert (await gql(REPLACE, {"id": cid, "messages": kept}))["replaceTranscript"][
            "userErrors"
        ] == []
        # A delegation's child transcript counts in its workspace.
        child = (await gql(DELEGATE, {"id": cid}))["createDelegation"]["delegation"]
        refused(await append(gql, child["childConversation"]["id"], "child"))
        # Deleting makes room again.
        assert (await gql(DELETE, {"id": cid}))["deleteConversation"]["deleted"] is True
        other = await create(gql)
        assert (await append(gql, other, *"0123456789"))["userErrors"] == []
        refused(await append(gql, other, "x"))


# A conversation that stays (one message), and a tree: a root of four messages with a snapshot
# (counted in bytes) and a child transcript of one message.
KEPT, ROOT, CHILD = [said("kept")], [said(f"root {i}") for i in range(4)], [said("c1")]
COMPACTED = [said("compacted")]
TREE_BYTES = size_of(ROOT) + size_of(COMPACTED) + 2 + size_of(CHILD)


def room_for_the_tree(settings: Settings, quota: str) -> Settings:
    """`settings` with a quota that the conversation that stays and the tree fill exactly."""
    if quota == "messages":
        return settings.replace(workspace_max_messages=len(KEPT) + len(ROOT) + len(CHILD))
    return settings.replace(workspace_max_bytes=size_of(KEPT) + TREE_BYTES)


async def fill_with_the_tree(gql: GraphQLClient, quota: str) -> tuple[str, str]:
    """The conversation that stays and the tree's root, the workspace full; their ids."""
    other = await create(gql)
    assert (await gql(APPEND, {"id": other, "messages": KEPT}))["appendMessages"][
        "userErrors"
    ] == []
    cid = await create(gql)
    assert (await gql(APPEND, {"id": cid, "messages": ROOT}))["appendMessages"]["userErrors"] == []
    if quota == "bytes":
        saved = (await gql(SNAPSHOT, {"id": cid, "messages": COMPACTED}))["saveSnapshot"]
        assert saved["userErrors"] == []
    below = (await gql(DELEGATE, {"id": cid}))["createDelegation"]["delegation"]
    below_id = below["childConversation"]["id"]
    assert (await gql(APPEND, {"id": below_id, "messages": CHILD}))["appendMessages"][
        "userErrors"
    ] == []
    refused(await append(gql, other, "x"))  # full
    return other, cid


async def takes_exactly_the_tree_s_room(gql: GraphQLClient, other: str, quota: str) -> None:
    """Once the tree is gone: what it held fits in again, not a message or a byte more."""
    if quota == "messages":
        room = [said(str(i)) for i in range(len(ROOT) + len(CHILD))]
    else:  # one message of exactly the freed bytes ({"role":"user","content":""}: 28)
        room = [said("y" * (TREE_BYTES - 28))]
        assert size_of(room) == TREE_BYTES
    assert (await gql(APPEND, {"id": other, "messages": room}))["appendMessages"][
        "userErrors"
    ] == []
    refused(await append(gql, other, "x"))


@pytest.mark.parametrize("quota", ["messages", "bytes"])
async def test_a_deleted_tree_gives_back_exactly_its_room(settings: Settings, quota: str) -> None:
    """A root with a snapshot and a child transcript with messages of its own: its delete
    frees what the three held, not a message or a byte more or less."""
    async with serving_as(room_for_the_tree(settings, quota)) as (_server, gql):
        other, cid = await fill_with_the_tree(gql, quota)
        assert (await gql(DELETE, {"id": cid}))["deleteConversation"]["deleted"] is True
        await takes_exactly_the_tree_s_room(gql, other, quota)


async def test_the_byte_quota_counts_message_and_snapshot_json_in_utf8(
    settings: Settings,
) -> None:
    first = [said("héllo wörld"), said("naïve café ☕")]
    snapshot = [said("before compaction")]
    snapshot_bytes = size_of(snapshot) + 2  # a JSON array: [ and ]
    quota = size_of(first) + snapshot_bytes + 10
    async with (
        serving_as(settings.replace(workspace_max_bytes=quota)) as (_server, gql),
    ):
        cid = await create(gql)
        assert (await gql(APPEND, {"id": cid, "messages": first}))["appendMessages"][
            "userErrors"
        ] == []
        saved = (await gql(SNAPSHOT, {"id": cid, "messages": snapshot}))["saveSnapshot"]
        assert saved["userErrors"] == []
        stored = size_of(first) + snapshot_bytes
        assert (await gql(FIGURES))["workspaceFigures"] == {
            "messages": 2,
            "storedBytes": stored,
        }
        # 10 bytes left: {"role":"user","content":"x"} is 29.
        message = refused(await append(gql, cid, "x"))
        assert f"quota of {quota:,} bytes" in message, message
        assert "adds 29" in message, message
        refused((await gql(SNAPSHOT, {"id": cid, "messages": snapshot}))["saveSnapshot"])
        # Replacing the transcript with a shorter one frees what it no longer holds.
        shorter = [said("héllo wörld")]
        assert (await gql(REPLACE, {"id": cid, "messages": shorter}))["replaceTranscript"][
            "userErrors"
        ] == []
        freed = size_of(first) - size_of(shorter)
        assert (await gql(FIGURES))["workspaceFigures"]["storedBytes"] == stored - freed
        assert (await append(gql, cid, "x"))["userErrors"] == []


async def test_each_workspace_has_its_own_quota(settings: Settings) -> None:
    quota = settings.replace(workspace_max_messages=3)
    async with serving_as(quota, "site:full") as (server, full):
        other = full.as_(await server.token("site:other"))
        cid = await create(full)
        await append(full, cid, "a", "b", "c")
        refused(await append(full, cid, "d"))
        theirs = await create(other)
        assert (await append(other, theirs, "a", "b", "c"))["userErrors"] == []
        # Another owner of the full workspace shares its quota.
        bob = full.as_(await server.token("site:full", "user:bob"))
        refused(await append(bob, await create(bob), "a"))


async def test_concurrent_writers_stop_exactly_at_the_quota(settings: Settings) -> None:
    async with (
        serving_as(settings.replace(workspace_max_messages=20)) as (_server, gql),
    ):
        conversations = [await create(gql, f"c{i}") for i in range(5)]
        payloads = await asyncio.gather(
            *(append(gql, conversations[i % 5], f"m{i}") for i in range(60))
        )
        accepted = [p for p in payloads if not p["userErrors"]]
        assert len(accepted) == 20
        assert all(refused(p) for p in payloads if p["userErrors"])
        assert (await gql(FIGURES))["workspaceFigures"]["messages"] == 20


async def test_replicas_over_one_database_share_the_quota(
    database_url: str, live_servers: LiveServers
) -> None:
    env = {"CONVOGRAPH_WORKSPACE_MAX_MESSAGES": "30"}
    first = await live_servers.start(database_url, env=env)
    second = await live_servers.start(database_url, env=env)
    token = await first.token(workspace="site:shared", owner="user:ada")
    async with first.client(token) as one, second.client(token) as two:
        conversations = [await create(one, f"c{i}") for i in range(6)]
        writes = [
            append(one if i % 2 else two, conversations[i % 6], f"m{i}", f"n{i}") for i in range(40)
        ]
        payloads = await asyncio.gather(*writes)
        assert sum(1 for p in payloads if not p["userErrors"]) == 15
        for p in payloads:
            if p["userErrors"]:
                refused(p)
        assert (await one(FIGURES))["workspaceFigures"]["messages"] == 30
        assert (await two(FIGURES))["workspaceFigures"]["messages"] == 30


async def test_a_server_started_with_quotas_counts_what_is_already_stored(
    settings: Settings,
) -> None:
    async with serving_as(settings) as (_server, gql):
        cid = await create(gql)
        # Without quotas nothing is refused, and nothing counts: 8 stored.
        await append(gql, cid, *"abcdefgh")
    async with serving_as(settings.replace(workspace_max_messages=5)) as (_server, gql):
        refused(await append(gql, await create(gql), "i"))  # 8 + 1 > 5
        assert (await gql(FIGURES))["workspaceFigures"]["messages"] == 8
        assert (await gql(READ, {"id": cid}))["conversation"]["messageCount"] == 8
        assert (await gql(DELETE, {"id": cid}))["deleteConversation"]["deleted"] is True
        assert (await append(gql, await create(gql), *"abcde"))["userErrors"] == []


async def test_the_sweep_of_expired_conversations_makes_room(settings: Settings) -> None:
    async with serving_as(settings.replace(workspace_max_messages=4)) as (server, gql):
        doomed = await create(gql)
        await append(gql, doomed, "a", "b", "c", "d")
        soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
        assert (await gql(EXPIRE, {"id": doomed, "at": soon}))["updateConversation"][
            "userErrors"
        ] == []
        fresh = await create(gql)
        refused(await append(gql, fresh, "e"))
        removed = await sweep(server.services.uow, now=datetime.now(UTC) + timedelta(hours=1))
        assert removed == 1
        assert (await append(gql, fresh, "e", "f", "g", "h"))["userErrors"] == []


@pytest.mark.parametrize("quota", ["messages", "bytes"])
async def test_the_sweep_gives_back_exactly_what_each_expired_tree_held(
    settings: Settings, quota: str
) -> None:
    """As a delete does: an expired root with a snapshot and a child transcript frees what
    the three held, and the sweep takes it off the workspace's usage without counting the
    whole workspace again (which read every conversation of it, once per share)."""
    async with serving_as(room_for_the_tree(settings, quota)) as (server, gql):
        other, cid = await fill_with_the_tree(gql, quota)
        soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
        assert (await gql(EXPIRE, {"id": cid, "at": soon}))["updateConversation"][
            "userErrors"
        ] == []

        def recount(statement: str) -> bool:
            flat = " ".join(statement.split()).upper()
            return flat.startswith("UPDATE WORKSPACE_USAGE") and "SUM(" in flat

        async with server.statements(recount) as recounts:
            later = datetime.now(UTC) + timedelta(hours=1)
            assert await sweep(server.services.uow, now=later) == 2
        assert recounts == []
        await takes_exactly_the_tree_s_room(gql, other, quota)


KEYED = """mutation($key: String!, $at: DateTime) { createConversation(input: {
  title: "keyed", idempotencyKey: $key, expiresAt: $at}) { conversation { id } } }"""


async def test_an_expired_conversation_whose_key_is_used_again_gives_its_room_back(
    settings: Settings,
) -> None:
    """The key's new conversation deleted the expired holder without its quota: the first
    append into the new one was refused for the old one's messages, sweep or not."""
    async with serving_as(settings.replace(workspace_max_messages=3)) as (_server, gql):
        # Time enough for the append before it expires on a loaded machine (a second was
        # not, once, on PostgreSQL beside the SQLite pass).
        soon = datetime.now(UTC) + timedelta(seconds=3)
        made = await gql(KEYED, {"key": "k-1", "at": soon.isoformat()})
        old = made["createConversation"]["conversation"]["id"]
        assert (await append(gql, old, "a", "b", "c"))["userErrors"] == []
        # Past its expiry; no sweep has run.
        await asyncio.sleep((soon - datetime.now(UTC)).total_seconds() + 0.2)
        again = await gql(KEYED, {"key": "k-1", "at": None})
        new = again["createConversation"]["conversation"]["id"]
        assert new != old
        assert (await gql(FIGURES))["workspaceFigures"]["messages"] == 0
        assert (await append(gql, new, "d", "e", "f"))["userErrors"] == []


async def test_refusals_are_counted_in_the_metrics(settings: Settings) -> None:
    async with serving_as(settings.replace(workspace_max_messages=1)) as (_server, gql):
        cid = await create(gql)
        await append(gql, cid, "a")
        refused(await append(gql, cid, "b"))
        refused(await append(gql, cid, "c"))
        metrics = (await gql.http.get("/metrics")).text
    assert "convograph_quota_refusals_total 2.0" in metrics, metrics


async def test_off_by_default(settings: Settings) -> None:
    assert settings.workspace_max_messages is None and settings.workspace_max_bytes is None
    async with serving_as(settings) as (_server, gql):
        cid = await create(gql)
        for start in range(0, 3000, 1000):
            batch = [f"m{i}" for i in range(start, start + 1000)]
            assert (await append(gql, cid, *batch))["userErrors"] == []


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_bad_quota_setting_names_its_variable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVOGRAPH_WORKSPACE_MAX_BYTES", value)
    with pytest.raises(SettingsError, match="CONVOGRAPH_WORKSPACE_MAX_BYTES"):
        Settings.from_env()


async def test_a_replica_starting_with_quotas_while_another_deletes_neither_deadlocks(
    database_url: str, live_servers: LiveServers
) -> None:
    """A replica starting with quotas counts every workspace again under a table lock; a
    delete through another replica counts its workspace under its usage row's lock, taken
    before the row's update. While a writer held that row, the delete waited for it and the
    start's lock was granted beside the delete's: once the writer committed, each waited for
    the other, and PostgreSQL ended one (the start failed, or the delete was INTERNAL)."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: the start's count waits for the delete")
    from sqlalchemy import pool, text
    from sqlalchemy.ext.asyncio import create_async_engine

    env = {"CONVOGRAPH_WORKSPACE_MAX_MESSAGES": "4"}
    first = await live_servers.start(database_url, env=env)
    token = await first.token(workspace="site:shared", owner="user:ada")
    engine = create_async_engine(database_url, poolclass=pool.NullPool)

    try:
        async with first.client(token) as one:
            kept, doomed = await create(one, "kept"), await create(one, "doomed")
            assert (await append(one, kept, "a", "b"))["userErrors"] == []
            assert (await append(one, doomed, "c"))["userErrors"] == []
            async with engine.connect() as writer:
                # A write through a third replica, between its usage update and its COMMIT.
                await writer.execute(
                    text(
                        "UPDATE workspace_usage SET messages = messages "
                        "WHERE workspace_type = 'site' AND workspace_id = 'shared'"
                    )
                )
                deleting = asyncio.create_task(one(DELETE, {"id": doomed}))
                await lock_waiters(engine, 1)
                starting = asyncio.create_task(live_servers.start(database_url, env=env))
                await lock_waiters(engine, 2)
                await writer.commit()
            assert (await deleting)["deleteConversation"]["deleted"] is True
            second = await starting
        async with second.client(token) as two:
            # Counted right: 2 stored of 4.
            assert (await append(two, kept, "d", "e"))["userErrors"] == []
            refused(await append(two, kept, "f"))
    finally:
        await engine.dispose()


async def test_a_server_started_with_quotas_while_the_database_is_away_counts_once_it_is_back(
    settings: Settings,
) -> None:
    """`serve` starts while the database is away and answers 503 until it is back; with
    quotas on, its start-up count of every workspace stopped it instead ('Application
    startup failed', exit 1), so a replica restarted during a database outage stayed down.
    It now counts before its first write once the database is back."""
    if settings.database_url.startswith("sqlite"):
        pytest.skip("an embedded SQLite file cannot go away: PostgreSQL only")
    from tests.tcp_proxy import in_front_of

    async with serving_as(settings.replace(workspace_max_messages=5)) as (_server, gql):
        cid = await create(gql)
        assert (await append(gql, cid, "a"))["userErrors"] == []
        token = gql.token
    # A process without quotas writes without counting: the stored count says 1 of 4.
    async with serving(settings) as (_server, http):
        assert (await append(GraphQLClient(http, token), cid, "b", "c", "d"))["userErrors"] == []

    proxy, through = await in_front_of(settings.database_url)
    await proxy.cut()
    away = settings.replace(database_url=through, workspace_max_messages=5, pool_timeout_seconds=2)
    try:
        async with serving(away) as (_server, http):
            gql = GraphQLClient(http, token)
            answer = await gql.post(APPEND, {"id": cid, "messages": [said("e")]})
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "1"
            await proxy.start()
            assert (await append(gql, cid, "e"))["userErrors"] == []  # 5 of 5
            refused(await append(gql, cid, "f"))
    finally:
        await proxy.cut()
