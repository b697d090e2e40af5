"""A dashboard's delegation-tree query costs a bounded number of SQL statements per level of
the tree, however many conversations each level holds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from graph.store.repository.transcripts import _MOST_RANGES
from tests.conftest import GraphQLClient, Server

DEPTH = 3  # levels of delegation below the root
PER_LEVEL_BUDGET = 3  # delegations, child conversations, transcripts
CONSTANT_BUDGET = 2  # the root conversation, and slack for one more lookup
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")

CREATE = """mutation { createConversation(input: {title: "root"}) {
  conversation { id } userErrors { code } } }"""
APPEND = """mutation($id: ID!, $m: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $m}) { userErrors { code } } }"""
DELEGATE = """mutation($id: ID!, $task: String!) {
  createDelegation(input: {parentConversationId: $id, delegatingTier: "lead",
                           targetTier: "worker", task: $task}) {
    delegation { childConversation { id } } userErrors { code } } }"""


def tree_selection(depth: int, extra: str = "", leaf: str = "id") -> str:
    """Every conversation asks for its transcript and its delegations' child conversations;
    `extra` is added to every conversation and `leaf` to every delegation."""
    selection = f"id transcript {extra} delegations {{ nodes {{ {leaf} }} }}"
    for _ in range(depth):
        child = f"childConversation {{ {selection} }}"
        selection = f"id transcript {extra} delegations {{ nodes {{ {leaf} status {child} }} }}"
    return f"{{ {selection} }}"


def tree_query(depth: int, extra: str = "", leaf: str = "id") -> str:
    return f"query($id: ID!) {{ conversation(id: $id) {tree_selection(depth, extra, leaf)} }}"


async def build_tree(gql: GraphQLClient, fanout: int, depth: int) -> tuple[str, dict[str, str]]:
    """A root and `depth` levels of `fanout` delegations each, every conversation holding one
    message naming it; returns the root's id and each conversation's message."""
    root = (await gql(CREATE))["createConversation"]["conversation"]["id"]
    said: dict[str, str] = {}

    async def say(cid: str, name: str) -> None:
        result = await gql(APPEND, {"id": cid, "m": [{"role": "user", "content": name}]})
        assert result["appendMessages"]["userErrors"] == []
        said[cid] = name

    await say(root, "root")
    level = [(root, "root")]
    for _ in range(depth):
        below = []
        for parent, name in level:
            for i in range(fanout):
                task = f"{name}.{i}"
                made = (await gql(DELEGATE, {"id": parent, "task": task}))["createDelegation"]
                assert made["userErrors"] == []
                child = made["delegation"]["childConversation"]["id"]
                await say(child, task)
                below.append((child, task))
        level = below
    return root, said


@asynccontextmanager
async def statements(server: Server) -> AsyncIterator[list[str]]:
    """Every SQL statement the app's engines run meanwhile, but the token lookup of auth.

    The search index's batch for messages written before runs first, not inside the count.
    """
    await server.services.search_index.ready()
    async with server.statements(lambda statement: "api_token" not in statement) as seen:
        yield seen


def data_statements(seen: list[str]) -> list[str]:
    """Without transaction control, which SQLite spells out and asyncpg does not."""
    return [s for s in seen if not s.lstrip().upper().startswith(TRANSACTION_CONTROL)]


def walk(node: dict[str, Any], depth: int) -> Iterator[tuple[dict[str, Any], int]]:
    yield node, depth
    for delegation in node["delegations"]["nodes"]:
        assert delegation["status"] == "RUNNING"
        yield from walk(delegation["childConversation"], depth + 1)


async def count_tree_query(
    server: Server, gql: GraphQLClient, fanout: int
) -> tuple[list[str], list[str]]:
    root, said = await build_tree(gql, fanout, DEPTH)
    async with statements(server) as seen:
        data = await gql(tree_query(DEPTH), {"id": root})
    # The answer is the whole tree, each conversation with its own transcript.
    nodes = list(walk(data["conversation"], 0))
    assert len(nodes) == sum(fanout**level for level in range(DEPTH + 1))
    assert {n["id"]: [m["content"] for m in n["transcript"]] for n, _ in nodes} == {
        cid: [name] for cid, name in said.items()
    }
    assert all(n["delegations"]["nodes"] == [] for n, depth in nodes if depth == DEPTH)
    return seen, data_statements(seen)


async def test_tree_query_statements_do_not_grow_with_the_tree(
    server: Server, gql: GraphQLClient
) -> None:
    small_all, small = await count_tree_query(server, gql, fanout=2)
    large_all, large = await count_tree_query(server, gql, fanout=5)
    assert len(large) == len(small), (small, large)
    assert len(large_all) == len(small_all)
    # Every level below the root, plus the leaves' (empty) delegations, plus the root.
    assert len(small) <= PER_LEVEL_BUDGET * (DEPTH + 1) + CONSTANT_BUDGET, small


@pytest.mark.parametrize("fanout", [1, 4])
async def test_two_trees_in_one_query_share_the_statements(
    server: Server, gql: GraphQLClient, fanout: int
) -> None:
    """Loaders batch across the whole request, not per tree: two roots cost what one does."""
    first, _ = await build_tree(gql, fanout, 2)
    second, _ = await build_tree(gql, fanout, 2)
    tree = tree_selection(2)
    query = (
        f"query($a: ID!, $b: ID!) {{ a: conversation(id: $a) {tree} "
        f"b: conversation(id: $b) {tree} }}"
    )
    async with statements(server) as both:
        data = await gql(query, {"a": first, "b": second})
    assert data["a"]["id"] == first and data["b"]["id"] == second
    async with statements(server) as one:
        await gql(tree_query(2), {"id": first})
    assert len(data_statements(both)) == len(data_statements(one)), (both, one)


async def test_records_loaded_once_are_not_loaded_again(server: Server, gql: GraphQLClient) -> None:
    """A delegation's parent, a child's parent delegation: already in the request's loaders."""
    root, _ = await build_tree(gql, 3, 2)
    async with statements(server) as plain:
        await gql(tree_query(2), {"id": root})
    back_references = tree_query(
        2, extra="parentDelegation { id task }", leaf="id parentConversation { id title }"
    )
    async with statements(server) as seen:
        data = await gql(back_references, {"id": root})
    assert len(data_statements(seen)) == len(data_statements(plain)), (plain, seen)
    child = data["conversation"]["delegations"]["nodes"][0]["childConversation"]
    assert data["conversation"]["parentDelegation"] is None
    assert child["parentDelegation"]["id"] == data["conversation"]["delegations"]["nodes"][0]["id"]
    assert child["delegations"]["nodes"][0]["parentConversation"]["id"] == child["id"]


async def test_message_pages_in_a_tree_do_not_grow_with_the_tree(
    server: Server, gql: GraphQLClient
) -> None:
    counts = []
    for fanout in (2, 4):
        root, _ = await build_tree(gql, fanout, 2)
        async with statements(server) as seen:
            await gql(tree_query(2, extra="messages(first: 5) { nodes { seq } }"), {"id": root})
        counts.append(len(data_statements(seen)))
    assert counts[0] == counts[1], counts


DASHBOARD = """query($n: Int!) { conversations(first: $n, filter: {rootOnly: true}) {
  nodes { id title
  delegations(first: 10) { nodes { status targetTier summary childConversation { messageCount } } }
  messages(last: 1) { totalCount pageInfo { hasPreviousPage } nodes { seq content } } } } }"""


async def test_a_dashboard_list_with_last_messages_costs_the_same_for_any_page_size(
    server: Server, gql: GraphQLClient
) -> None:
    """`conversations(first: N)` with each one's delegations and its last message: the
    statements do not depend on N, and each conversation gets its own last message."""
    last_said: dict[str, str] = {}
    for i in range(12):
        cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
        turns = [{"role": "user", "content": f"c{i} turn {t}"} for t in range(i % 3 + 1)]
        await gql(APPEND, {"id": cid, "m": turns})
        last_said[cid] = turns[-1]["content"]
        await gql(DELEGATE, {"id": cid, "task": f"task {i}"})
    counts = []
    for n in (3, 12):
        async with statements(server) as seen:
            data = await gql(DASHBOARD, {"n": n})
        counts.append(len(data_statements(seen)))
        nodes = data["conversations"]["nodes"]
        assert len(nodes) == n
        for node in nodes:
            page = node["messages"]
            assert [m["content"] for m in page["nodes"]] == [last_said[node["id"]]]
            assert page["nodes"][0]["seq"] == page["totalCount"]
            assert page["pageInfo"]["hasPreviousPage"] is (page["totalCount"] > 1)
            assert len(node["delegations"]["nodes"]) == 1
    assert counts[0] == counts[1], counts


async def test_a_list_asking_for_many_pages_gets_each_message_once(gql: GraphQLClient) -> None:
    """Each conversation's pages in one list are ranges of seq read in statements of at most
    _MOST_RANGES ranges: before, a conversation whose overlapping ranges fell in two
    statements got the shared messages twice (`messages(first: 2)` gave seq 1, 2, 2)."""
    windows = {"a": ("first: 2", [1, 2]), "b": ("last: 2", [2, 3]), "c": ("first: 1", [1])}
    for _ in range(_MOST_RANGES // len(windows) + 1):  # past one statement's ranges
        cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
        turns = [{"role": "user", "content": t} for t in "xyz"]
        assert (await gql(APPEND, {"id": cid, "m": turns}))["appendMessages"]["userErrors"] == []
    pages = " ".join(
        f"{k}: messages({arg}) {{ nodes {{ seq }} }}" for k, (arg, _) in windows.items()
    )
    data = await gql(f"{{ conversations(first: 100) {{ nodes {{ {pages} }} }} }}")
    for node in data["conversations"]["nodes"]:
        for key, (_, seqs) in windows.items():
            assert [m["seq"] for m in node[key]["nodes"]] == seqs, node
