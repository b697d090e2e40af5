"""Retention: a conversation past its expiresAt reads as gone, and the sweep deletes it with
everything below it (transcript, snapshots, delegations, child conversations)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from graph.store.retention import sweep
from graph.store.tables import conversation
from tests.conftest import GraphQLClient, Server
from tests.operations import CONVERSATION_EVENTS
from tests.test_conversations import (
    CREATE,
    UPDATE,
    append,
    create,
    delegate,
    get,
    list_ids,
    listing,
    save_snapshot,
    stored_rows,
    ts,
)
from tests.ws import connect_app, until_live

TTL = timedelta(seconds=2)  # ahead enough that a loaded machine's request still finds it so


async def tree(gql: GraphQLClient) -> dict[str, str]:
    """A root with a transcript, a snapshot and a delegation whose child has a transcript."""
    root = (await create(gql, title="doomed"))["id"]
    await append(gql, root, [{"role": "user", "content": "ephemeral-word"}])
    snapshot = (await save_snapshot(gql, root, [{"role": "user", "content": "old"}]))["id"]
    delegation = await delegate(gql, root)
    child = delegation["childConversation"]["id"]
    await append(gql, child, [{"role": "assistant", "content": "ephemeral-child"}])
    return {"root": root, "snapshot": snapshot, "delegation": delegation["id"], "child": child}


async def expire_soon(gql: GraphQLClient, cid: str) -> datetime:
    """Set expiresAt just ahead through the API and return it."""
    at = datetime.now(UTC) + TTL
    payload = (await gql(UPDATE, {"input": {"id": cid, "expiresAt": at.isoformat()}}))[
        "updateConversation"
    ]
    assert payload["userErrors"] == []
    return at


async def wait_past(at: datetime) -> None:
    await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()) + 0.05)


async def read_everything(gql: GraphQLClient, ids: dict[str, str]) -> dict[str, Any]:
    return await gql(
        """query($root: ID!, $child: ID!, $snapshot: ID!, $delegation: ID!) {
          root: conversation(id: $root) { id }
          child: conversation(id: $child) { id }
          rootNode: node(id: $root) { id }
          childNode: node(id: $child) { id }
          snapshot: node(id: $snapshot) { id }
          delegationNode: node(id: $delegation) { id }
          delegation: delegation(id: $delegation) { id }
          latest: latestDelegation(targetTier: "researcher") { id }
        }""",
        ids,
    )


async def test_an_expired_conversation_is_hidden_from_every_read(gql: GraphQLClient) -> None:
    ids = await tree(gql)
    survivor = (await create(gql, title="stays"))["id"]
    visible = await read_everything(gql, ids)
    assert all(visible[k] is not None for k in visible if k != "latest")

    await wait_past(await expire_soon(gql, ids["root"]))

    hidden = await read_everything(gql, ids)
    assert hidden == dict.fromkeys(hidden)
    page = await listing(gql)
    assert [e["node"]["id"] for e in page["edges"]] == [survivor]
    assert page["totalCount"] == 1
    assert await list_ids(gql, filter={"search": "ephemeral"}) == []


async def test_an_expired_conversation_cannot_be_written(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    await wait_past(await expire_soon(gql, cid))
    payload = await append(gql, cid, [{"role": "user", "content": "too late"}])
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("NOT_FOUND", ["conversationId"])
    ]
    update = (await gql(UPDATE, {"input": {"id": cid, "expiresAt": None}}))["updateConversation"]
    assert [e["code"] for e in update["userErrors"]] == ["NOT_FOUND"]
    assert await get(gql, cid) is None


async def test_expires_at_reaches_the_delegation_children(gql: GraphQLClient) -> None:
    root = (await create(gql))["id"]
    before = (await delegate(gql, root))["childConversation"]["id"]
    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    await gql(UPDATE, {"input": {"id": root, "expiresAt": at.isoformat()}})
    after = (await delegate(gql, root))["childConversation"]["id"]
    grandchild = (await delegate(gql, after))["childConversation"]["id"]
    for cid in (root, before, after, grandchild):
        stored = await get(gql, cid)
        assert stored is not None and ts(stored["expiresAt"]) == at, cid
    await gql(UPDATE, {"input": {"id": root, "expiresAt": None}})
    for cid in (root, before, after, grandchild):
        stored = await get(gql, cid)
        assert stored is not None and stored["expiresAt"] is None, cid


async def test_a_root_s_expiry_moves_the_version_of_each_child_it_reaches(
    gql: GraphQLClient,
) -> None:
    """A child's expiresAt changed with its root's while its version stayed: a client caching
    the child by version kept the old expiry."""
    root = (await create(gql))["id"]
    child = (await delegate(gql, root))["childConversation"]["id"]
    grandchild = (await delegate(gql, child))["childConversation"]["id"]

    async def versions() -> list[int]:
        return [(await get(gql, cid) or {})["version"] for cid in (root, child, grandchild)]

    start = await versions()
    at = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    await gql(UPDATE, {"input": {"id": root, "expiresAt": at}})
    assert await versions() == [v + 1 for v in start]
    # The same expiry again changes no child: only the root, written to, moves.
    await gql(UPDATE, {"input": {"id": root, "expiresAt": at}})
    assert await versions() == [start[0] + 2, start[1] + 1, start[2] + 1]
    await gql(UPDATE, {"input": {"id": root, "expiresAt": None}})
    assert await versions() == [start[0] + 3, start[1] + 2, start[2] + 2]


async def test_a_root_s_expiry_notifies_every_child_it_reaches_in_one_statement(
    server: Server, gql: GraphQLClient
) -> None:
    """PostgreSQL: a root's expiry has an event for each child transcript it reaches, and
    each event's notification was a statement of its own, every one a round trip while the
    tree's root stays locked: a root with a thousand child transcripts held its tree's
    writers for a thousand. The write's notifications now go in one statement, whatever the
    tree's size."""
    if server.settings.is_sqlite:
        pytest.skip("SQLite has no NOTIFY: events are published in the process")
    root = (await create(gql))["id"]
    for _ in range(3):
        await delegate(gql, root)
    at = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    async with server.statements(lambda statement: "pg_notify" in statement) as seen:
        updated = await gql(UPDATE, {"input": {"id": root, "expiresAt": at}})
    assert updated["updateConversation"]["userErrors"] == []
    assert len(seen) == 1, seen


async def test_a_child_transcripts_own_expiry_is_refused_and_nothing_changes(
    gql: GraphQLClient,
) -> None:
    """A child expiring before its parent left its delegation, still listed under the live
    parent, naming a transcript that was gone: reading it failed as INTERNAL."""
    root = (await create(gql))["id"]
    child = (await delegate(gql, root))["childConversation"]["id"]
    before = await get(gql, child)
    for at in (datetime.now(UTC) + timedelta(seconds=30), None):
        expiry = None if at is None else at.isoformat()
        payload = (await gql(UPDATE, {"input": {"id": child, "expiresAt": expiry}}))[
            "updateConversation"
        ]
        assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
            ("INVALID_INPUT", ["expiresAt"])
        ], payload
    assert await get(gql, child) == before
    # A title is the child's own to change.
    titled = await gql(UPDATE, {"input": {"id": child, "title": "mine"}})
    assert titled["updateConversation"]["userErrors"] == []


async def test_clearing_expires_at_in_time_keeps_the_conversation(
    server: Server, gql: GraphQLClient
) -> None:
    ids = await tree(gql)
    at = await expire_soon(gql, ids["root"])
    await gql(UPDATE, {"input": {"id": ids["root"], "expiresAt": None}})
    await wait_past(at)
    assert await sweep(server.services.uow) == 0
    assert all(v is not None for k, v in (await read_everything(gql, ids)).items() if k != "latest")


async def test_the_sweep_deletes_an_expired_conversation_with_everything_below_it(
    server: Server, gql: GraphQLClient
) -> None:
    ids = await tree(gql)
    survivor = (await create(gql))["id"]
    await append(gql, survivor, [{"role": "user", "content": "kept"}])
    doomed = [ids["root"], ids["child"]]
    assert await stored_rows(server, doomed) == {
        "conversation": 2,
        "message": 2,
        "snapshot": 1,
        "delegation": 1,
    }
    await wait_past(await expire_soon(gql, ids["root"]))

    # The root and its child transcript: counted alike on both backends (SQLite's cascade
    # took the child before the statement reached it, and it counted 1).
    assert await sweep(server.services.uow) == 2

    assert await stored_rows(server, doomed) == {
        "conversation": 0,
        "message": 0,
        "snapshot": 0,
        "delegation": 0,
    }
    assert await stored_rows(server, [survivor]) == {
        "conversation": 1,
        "message": 1,
        "snapshot": 0,
        "delegation": 0,
    }
    assert await list_ids(gql) == [survivor]
    assert await sweep(server.services.uow) == 0


async def test_the_sweep_leaves_conversations_that_have_not_expired(
    server: Server, gql: GraphQLClient
) -> None:
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    expiring = (await create(gql, expiresAt=later))["id"]
    forever = (await create(gql))["id"]
    uow = server.services.uow
    assert await sweep(uow) == 0
    assert set(await list_ids(gql)) == {expiring, forever}
    # The sweep's clock is a parameter: two hours on, the first one is due.
    assert await sweep(uow, now=datetime.now(UTC) + timedelta(hours=2)) == 1
    assert await stored_rows(server, [expiring, forever]) == {
        "conversation": 1,
        "message": 0,
        "snapshot": 0,
        "delegation": 0,
    }
    assert await list_ids(gql) == [forever]


async def test_create_with_an_expires_at_in_the_past_is_invalid(gql: GraphQLClient) -> None:
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    payload = (await gql(CREATE, {"input": {"expiresAt": past}}))["createConversation"]
    assert payload["conversation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["expiresAt"])
    ]
    assert (await listing(gql))["totalCount"] == 0


async def test_an_idempotency_key_of_an_expired_conversation_starts_a_new_one(
    gql: GraphQLClient,
) -> None:
    soon = (datetime.now(UTC) + TTL).isoformat()
    first = await create(gql, idempotencyKey="retry-me", expiresAt=soon)
    assert (await create(gql, idempotencyKey="retry-me"))["id"] == first["id"]
    await wait_past(ts(soon))
    fresh = await create(gql, idempotencyKey="retry-me", title="new life")
    assert fresh["id"] != first["id"]
    stored = await get(gql, fresh["id"])
    assert stored is not None and stored["title"] == "new life"
    assert (await create(gql, idempotencyKey="retry-me"))["id"] == fresh["id"]


async def test_a_backlog_is_swept_whole_trees_at_a_time_and_all_of_it(
    server: Server, gql: GraphQLClient
) -> None:
    """A sweep of more expired conversations than go to one of its transactions deletes
    every one, a tree larger than a transaction's share whole (on its own), and nothing
    that has not expired."""
    later = datetime.now(UTC) + timedelta(hours=1)
    big = (await create(gql, expiresAt=later.isoformat()))["id"]
    child = (await delegate(gql, big))["childConversation"]["id"]
    grandchild = (await delegate(gql, child))["childConversation"]["id"]
    second = (await delegate(gql, big))["childConversation"]["id"]
    await append(gql, grandchild, [{"role": "assistant", "content": "deep"}])
    small = [(await create(gql, expiresAt=later.isoformat()))["id"] for _ in range(5)]
    for cid in small:
        await append(gql, cid, [{"role": "user", "content": cid}])
    kept = (await create(gql))["id"]
    kept_child = (await delegate(gql, kept))["childConversation"]["id"]
    await append(gql, kept_child, [{"role": "assistant", "content": "kept"}])

    removed = await sweep(server.services.uow, now=later + timedelta(seconds=1), batch=2)

    assert removed == 4 + 5
    doomed = [big, child, grandchild, second, *small]
    assert await stored_rows(server, doomed) == dict.fromkeys(
        ("conversation", "message", "snapshot", "delegation"), 0
    )
    assert await stored_rows(server, [kept, kept_child]) == {
        "conversation": 2,
        "message": 1,
        "snapshot": 0,
        "delegation": 1,
    }


async def test_a_backlog_read_a_window_at_a_time_goes_tree_by_tree_each_announced_once(
    server: Server, gql: GraphQLClient
) -> None:
    """The sweep reads a backlog a few expired conversations at a time, the earliest expiries
    first (reading all of it at once held the event loop for as long as it was large). A
    window that holds part of a tree, a child without its root, still deletes the whole tree
    as its root's delete: one CONVERSATION_DELETED, of the root, and nothing before it (a
    child taken for a top of its own would be announced, and its parent updated). Here the
    deepest child of each tree expires a minute before its root, as one could when releases
    let a child transcript have an expiry of its own: the first window holds it alone."""
    later = datetime.now(UTC) + timedelta(hours=1)
    roots, leaves, doomed = [], [], []
    for _ in range(TREES):
        root = (await create(gql, expiresAt=later.isoformat()))["id"]
        levels = [root]
        for _ in range(LEVELS - 1):
            levels.append((await delegate(gql, levels[-1]))["childConversation"]["id"])
        await append(gql, levels[-1], [{"role": "assistant", "content": "deep"}])
        roots.append(root)
        leaves.append(levels[-1])
        doomed += levels
    async with server.services.db.write() as conn:
        await conn.execute(
            update(conversation)
            .where(conversation.c.id.in_(leaves))
            .values(expires_at=later - timedelta(minutes=1))
        )
    kept = (await create(gql))["id"]
    assert gql.token is not None
    async with connect_app(server.app, token=gql.token) as socket:
        await socket.init()
        for op, root in enumerate(roots):
            await socket.subscribe(
                CONVERSATION_EVENTS, {"id": root, "descendants": True}, op=f"{op}"
            )
            await until_live(socket, gql, root, op=f"{op}")

        removed = await sweep(
            server.services.uow, now=later + timedelta(seconds=1), batch=2, window=1
        )

        assert removed == TREES * LEVELS
        # Each stream's messages until its end (the trees go in their roots' order).
        got: dict[str, list[tuple[str, str] | str]] = {f"{op}": [] for op in range(TREES)}
        while any(not said or said[-1] != "complete" for said in got.values()):
            message = await socket.receive()
            if message["type"] == "next":
                event = message["payload"]["data"]["conversationEvents"]
                got[message["id"]].append((event["kind"], event["conversationId"]))
            else:
                got[message["id"]].append(message["type"])
        assert got == {
            f"{op}": [("CONVERSATION_DELETED", root), "complete"] for op, root in enumerate(roots)
        }
    assert await stored_rows(server, doomed) == dict.fromkeys(
        ("conversation", "message", "snapshot", "delegation"), 0
    )
    assert await list_ids(gql) == [kept]


# Trees of a root and three levels below it.
TREES = 3
LEVELS = 4
BACKLOG = 100


async def test_a_write_during_the_sweep_of_a_backlog_is_answered_before_the_sweep_ends(
    server: Server, gql: GraphQLClient
) -> None:
    """The sweep of a backlog (a server that was down, a sweep that was off) deleted it all
    in one transaction: on SQLite every write, and with the inline driver every request of
    the process, waited for all of it (seconds for tens of thousands). Now each of its
    transactions takes a share, and requests go in between."""
    from graph.domain.conversations import new_conversation

    uow = server.services.uow
    live = (await create(gql))["id"]
    principal = await uow.authenticate(await server.token())
    assert principal is not None
    later = datetime.now(UTC) + timedelta(hours=1)
    async with uow.write(principal) as repo:
        for _ in range(BACKLOG):
            made = new_conversation(now=datetime.now(UTC), expires_at=later)
            await repo.conversations.create(made, announce=False)
    swept = asyncio.create_task(sweep(uow, now=later + timedelta(seconds=1), batch=1))
    try:
        while await held(gql) == BACKLOG + 1:  # until the sweep's first share is done
            assert not swept.done()
        payload = await append(gql, live, [{"role": "user", "content": "meanwhile"}])
        assert payload["userErrors"] == []
        # Answered while the sweep had yet to reach the last of them.
        assert await held(gql) > 1
    finally:
        removed = await swept
    assert removed == BACKLOG
    assert await list_ids(gql) == [live]


async def held(gql: GraphQLClient) -> int:
    """How many conversations the token sees."""
    count: int = (await listing(gql))["totalCount"]
    return count


async def test_a_sweep_told_to_stop_ends_after_its_share_in_hand_and_the_next_one_finishes(
    server: Server, gql: GraphQLClient
) -> None:
    """A server shutting down stops its sweep between shares: what was deleted stays deleted,
    the rest waits for the next sweep (before, a backlog's one transaction ran on past the
    shutdown's grace and was cancelled, all of it rolled back)."""
    later = datetime.now(UTC) + timedelta(hours=1)
    backlog = [(await create(gql, expiresAt=later.isoformat()))["id"] for _ in range(6)]
    stopping = asyncio.Event()
    uow = server.services.uow
    swept = asyncio.create_task(
        sweep(uow, now=later + timedelta(seconds=1), batch=1, stopping=stopping)
    )
    while await held(gql) == len(backlog):
        assert not swept.done()
    stopping.set()
    removed = await swept
    assert 1 <= removed < len(backlog)
    assert len(await list_ids(gql)) == len(backlog) - removed
    assert await sweep(uow, now=later + timedelta(seconds=1)) == len(backlog) - removed
    assert await list_ids(gql) == []
