"""`workspaceFigures`: conversations, messages, delegations by status and tokens, as a
dashboard (and the inspector's header) shows them.

The figures count what the caller may read, as every read does: an owner's token its own
records, an ADMIN token and a SERVICE token in its own name their whole workspace, a SERVICE
token acting for an owner that owner's records; never another workspace's. Tokens are summed
over the messages that carry a `token_count` (a whole number at the message's top level),
and follow the live transcript through appends, replacements, deletes and expiry. The
figures are added up in three aggregate statements that never read a message row.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.conftest import GraphQLClient, Server
from tests.operations import DELETE

WORKSPACE = "site:figures"
FIGURES = """{ workspaceFigures { conversations messages tokenCount
  delegations { status count } } }"""
CREATE = """mutation($input: CreateConversationInput!) { createConversation(input: $input) {
  conversation { id } userErrors { code message } } }"""
APPEND = """mutation($id: ID!, $messages: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $messages}) {
    messages { seq } userErrors { code message } } }"""
REPLACE = """mutation($id: ID!, $messages: [JSON!]!) {
  replaceTranscript(input: {conversationId: $id, messages: $messages}) {
    conversation { messageCount } userErrors { code message } } }"""
DELEGATE = """mutation($id: ID!, $task: String!) { createDelegation(input: {
  parentConversationId: $id, delegatingTier: "lead", targetTier: "helper", task: $task}) {
  delegation { id childConversation { id } } userErrors { code message } } }"""
COMPLETE = """mutation($id: ID!, $status: DelegationStatus!) {
  completeDelegation(input: {delegationId: $id, status: $status, summary: "done"}) {
    delegation { status } userErrors { code message } } }"""
RESUME = """mutation($id: ID!) { resumeDelegation(input: {delegationId: $id, task: "again"}) {
  delegation { id } userErrors { code message } } }"""
EXPIRE = """mutation($id: ID!, $at: DateTime!) { updateConversation(input: {id: $id,
  expiresAt: $at}) { conversation { id } userErrors { code message } } }"""


async def ok(gql: GraphQLClient, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    (payload,) = (await gql(query, variables)).values()
    assert not payload.get("userErrors"), payload
    return payload


async def conversation(gql: GraphQLClient, *messages: dict[str, Any]) -> str:
    created = await ok(gql, CREATE, {"input": {"title": "figures"}})
    cid: str = created["conversation"]["id"]
    if messages:
        await ok(gql, APPEND, {"id": cid, "messages": list(messages)})
    return cid


async def delegate(gql: GraphQLClient, parent: str, task: str = "dig") -> tuple[str, str]:
    d = (await ok(gql, DELEGATE, {"id": parent, "task": task}))["delegation"]
    return d["id"], d["childConversation"]["id"]


async def figures(gql: GraphQLClient) -> dict[str, Any]:
    found: dict[str, Any] = (await gql(FIGURES))["workspaceFigures"]
    found["delegations"] = {d["status"]: d["count"] for d in found.pop("delegations")}
    return found


def by_status(
    pending: int = 0, running: int = 0, completed: int = 0, failed: int = 0
) -> dict[str, int]:
    return {"PENDING": pending, "RUNNING": running, "COMPLETED": completed, "FAILED": failed}


def said(text: str, tokens: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": text}
    if tokens is not None:
        message["token_count"] = tokens
    return message


async def test_an_empty_workspace_has_every_figure_at_zero(gql: GraphQLClient) -> None:
    data = await gql(FIGURES)
    assert data["workspaceFigures"] == {
        "conversations": 0,
        "messages": 0,
        "tokenCount": 0,
        "delegations": [
            {"status": "PENDING", "count": 0},
            {"status": "RUNNING", "count": 0},
            {"status": "COMPLETED", "count": 0},
            {"status": "FAILED", "count": 0},
        ],
    }


async def test_each_reader_counts_what_it_may_read(server: Server, anon: GraphQLClient) -> None:
    alice = anon.as_(await server.token(workspace=WORKSPACE, owner="user:alice"))
    bob = anon.as_(await server.token(workspace=WORKSPACE, owner="user:bob"))
    service = await server.token(workspace=WORKSPACE, owner="system:wp", scope="service")
    for_user_7 = anon.as_(service, acting_for="user:7")
    eve = anon.as_(await server.token(workspace="site:other", owner="user:eve"))

    # alice: a conversation of 2 messages (5 tokens) with a delegation; bob: 1 message
    # (7 tokens); user:7 through the SERVICE token: 3 messages (11 tokens); eve elsewhere.
    root = await conversation(alice, said("hi", 2), said("there", 3))
    await delegate(alice, root)
    await conversation(bob, said("hello", 7))
    await conversation(for_user_7, said("a", 1), said("b", 4), said("c", 6))
    other = await conversation(eve, said("far away", 1000), said("really", 1000))
    await delegate(eve, other)

    assert await figures(alice) == {
        "conversations": 2,  # the root and the delegation's child transcript
        "messages": 2,
        "tokenCount": 5,
        "delegations": by_status(running=1),
    }
    assert await figures(bob) == {
        "conversations": 1,
        "messages": 1,
        "tokenCount": 7,
        "delegations": by_status(),
    }
    assert await figures(for_user_7) == {
        "conversations": 1,
        "messages": 3,
        "tokenCount": 11,
        "delegations": by_status(),
    }
    workspace = {
        "conversations": 4,
        "messages": 6,
        "tokenCount": 23,
        "delegations": by_status(running=1),
    }
    admin = anon.as_(await server.token(workspace=WORKSPACE, owner="system:ops", scope="admin"))
    assert await figures(admin) == workspace
    assert await figures(anon.as_(service)) == workspace
    # A reader with nothing of its own sees nothing, even of its own workspace.
    reader = anon.as_(await server.token(workspace=WORKSPACE, owner="user:carol", scope="read"))
    assert await figures(reader) == {
        "conversations": 0,
        "messages": 0,
        "tokenCount": 0,
        "delegations": by_status(),
    }
    # The other workspace's ADMIN sees eve's records only; this one never sees them.
    other_admin = anon.as_(
        await server.token(workspace="site:other", owner="system:ops", scope="admin")
    )
    assert await figures(other_admin) == {
        "conversations": 2,
        "messages": 2,
        "tokenCount": 2000,
        "delegations": by_status(running=1),
    }


async def test_delegations_are_counted_by_status(server: Server, anon: GraphQLClient) -> None:
    owner = anon.as_(await server.token(workspace=WORKSPACE, owner="runtime:lead"))
    root = await conversation(owner, said("plan"))
    first, first_child = await delegate(owner, root, "one")
    second, _ = await delegate(owner, root, "two")
    third, _ = await delegate(owner, root, "three")
    await delegate(owner, first_child, "deeper")
    assert (await figures(owner))["delegations"] == by_status(running=4)

    await ok(owner, COMPLETE, {"id": first, "status": "COMPLETED"})
    await ok(owner, COMPLETE, {"id": second, "status": "FAILED"})
    assert (await figures(owner))["delegations"] == by_status(running=2, completed=1, failed=1)

    # A resume is a new delegation (running), the failed one stays failed.
    await ok(owner, RESUME, {"id": second})
    await ok(owner, COMPLETE, {"id": third, "status": "COMPLETED"})
    assert (await figures(owner))["delegations"] == by_status(running=2, completed=2, failed=1)
    admin = anon.as_(await server.token(workspace=WORKSPACE, owner="system:ops", scope="admin"))
    assert (await figures(admin))["delegations"] == by_status(running=2, completed=2, failed=1)

    # Deleting the root takes its whole tree, delegations included.
    await owner(DELETE, {"id": root})
    assert await figures(owner) == {
        "conversations": 0,
        "messages": 0,
        "tokenCount": 0,
        "delegations": by_status(),
    }


async def test_tokens_are_summed_only_over_messages_that_carry_a_count(
    gql: GraphQLClient,
) -> None:
    await conversation(
        gql,
        said("counted", 10),
        said("no count"),
        said("zero", 0),
        said("a string is no count", "7"),
        said("nor a fraction", 2.5),
        said("nor a boolean", True),
        said("nor a negative number", -4),
        said("nor one beyond a message's size", 2**31),
        {"role": "assistant", "content": "nested is not top level", "meta": {"token_count": 9}},
        said("counted too", 2**31 - 1),
    )
    found = await figures(gql)
    assert found["messages"] == 10
    assert found["tokenCount"] == 10 + 2**31 - 1


async def test_a_total_beyond_32_bits_is_reported_exactly(gql: GraphQLClient) -> None:
    biggest = 2**31 - 1
    await conversation(gql, *[said(str(i), biggest) for i in range(5)])
    assert (await figures(gql))["tokenCount"] == 5 * biggest


async def test_the_figures_follow_the_live_transcript(gql: GraphQLClient) -> None:
    cid = await conversation(gql, said("a", 1), said("b", 2), said("c", 4))
    await ok(gql, APPEND, {"id": cid, "messages": [said("d", 8)]})
    assert await figures(gql) == {
        "conversations": 1,
        "messages": 4,
        "tokenCount": 15,
        "delegations": by_status(),
    }
    # A compaction keeps the first message and replaces the rest with one summary.
    summary = {"role": "assistant", "content": "summary", "token_count": 20}
    await ok(gql, REPLACE, {"id": cid, "messages": [said("a", 1), summary]})
    found = await figures(gql)
    assert (found["messages"], found["tokenCount"]) == (2, 21)
    await ok(gql, REPLACE, {"id": cid, "messages": [said("only", None)]})
    found = await figures(gql)
    assert (found["messages"], found["tokenCount"]) == (1, 0)

    # A resumed delegation's child starts from the prior child's role/content pairs: those
    # carry no token counts.
    _, child = await delegate(gql, cid)
    await ok(gql, APPEND, {"id": child, "messages": [said("work", 30)]})
    found = await figures(gql)
    assert (found["conversations"], found["messages"], found["tokenCount"]) == (2, 2, 30)


async def test_expired_and_deleted_conversations_are_not_counted(gql: GraphQLClient) -> None:
    kept = await conversation(gql, said("stays", 3))
    done, _ = await delegate(gql, kept)
    await ok(gql, COMPLETE, {"id": done, "status": "COMPLETED"})
    gone = await conversation(gql, said("deleted", 5))
    soon = await conversation(gql, said("expires", 7))
    _, child = await delegate(gql, soon)
    await delegate(gql, child, "below the child")
    finished, _ = await delegate(gql, soon, "finished")
    await ok(gql, COMPLETE, {"id": finished, "status": "COMPLETED"})
    found = await figures(gql)
    assert found["tokenCount"] == 15
    assert found["delegations"] == by_status(running=2, completed=2)
    assert (await gql(DELETE, {"id": gone}))["deleteConversation"]["deleted"] is True
    # The tree below `soon` expires with it, its delegations and child transcripts too.
    at = datetime.now(UTC) + timedelta(seconds=2)  # still ahead on a loaded machine
    await ok(gql, EXPIRE, {"id": soon, "at": at.isoformat()})
    await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()) + 0.2)
    assert await figures(gql) == {
        "conversations": 2,  # `kept` and its delegation's child
        "messages": 1,
        "tokenCount": 3,
        "delegations": by_status(completed=1),
    }


@asynccontextmanager
async def statements(server: Server) -> AsyncIterator[list[str]]:
    """The SQL statements that read records (not the token lookup, not transaction control)."""
    await server.services.search_index.ready()
    records = re.compile(r"\b(conversation|delegation|message)\b")
    async with server.statements(lambda statement: bool(records.search(statement))) as seen:
        yield seen


async def test_the_figures_take_three_statements_and_read_no_message(
    server: Server, anon: GraphQLClient
) -> None:
    admin = anon.as_(await server.token(workspace=WORKSPACE, owner="system:ops", scope="admin"))
    owner = anon.as_(await server.token(workspace=WORKSPACE, owner="user:alice"))
    for i in range(3):
        root = await conversation(owner, *[said(f"{i}.{j}", j) for j in range(5)])
        await delegate(owner, root)
    for gql in (owner, admin):
        async with statements(server) as seen:
            found = await figures(gql)
        assert found["messages"] == 15 and found["tokenCount"] == 30
        assert len(seen) == 3, seen
        for statement in seen:
            assert not re.search(r"\bmessage\b", statement), statement
