"""An answer's size is bounded as it is built (CONVOGRAPH_MAX_RESULT_VALUES): a query that
walks a tree down and back up reads the same stored records again at each turn, so a
200-byte document over one conversation's hundred delegations built a million objects
(hundreds of megabytes, the server answering nobody for half a minute). Past the bound the
answer is one LIMIT_EXCEEDED error and no data; a real tree, read once, stays far within it.
The bound is lowered here so that a few dozen rows show it."""

from __future__ import annotations

from typing import Any

import pytest

from graph.settings import Settings
from tests.conftest import GraphQLClient
from tests.operations import APPEND, CREATE, DELEGATE

LIMIT = 5_000
FANOUT = 30

WALK = """query($id: ID!) { conversation(id: $id) { delegations(first: 100) { nodes { id
  parentConversation { delegations(first: 100) { nodes { id
    parentConversation { delegations(first: 100) { nodes { id task } } } } } } } } } }"""
TREE = """query($id: ID!) { conversation(id: $id) { id title delegations(first: 100) {
  totalCount nodes { id status task childConversation { id title messageCount } } } } }"""
TRANSCRIPT = "query($id: ID!) { conversation(id: $id) { transcript } }"
TRANSCRIPT_WALK = """query($id: ID!) { conversation(id: $id) { delegations(first: 100) {
  nodes { parentConversation { transcript } } } } }"""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.replace(max_result_values=LIMIT)


async def parent_of_many(gql: GraphQLClient) -> str:
    parent: str = (await gql(CREATE, {"title": "lead"}))["createConversation"]["conversation"]["id"]
    for i in range(FANOUT):
        made = await gql(DELEGATE, {"id": parent, "task": f"task {i}"})
        assert made["createDelegation"]["userErrors"] == [], made
    return parent


def refused(body: dict[str, Any]) -> None:
    assert body["data"] is None, str(body)[:300]
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "LIMIT_EXCEEDED", error
    assert f"more than {LIMIT:,} field values" in error["message"], error


async def test_a_walk_down_and_back_up_is_refused_and_the_tree_read_once_is_not(
    gql: GraphQLClient,
) -> None:
    parent = await parent_of_many(gql)
    tree = await gql(TREE, {"id": parent})  # what a dashboard reads: each record once
    assert tree["conversation"]["delegations"]["totalCount"] == FANOUT
    assert len(tree["conversation"]["delegations"]["nodes"]) == FANOUT

    response = await gql.post(WALK, {"id": parent})  # the same 30 records, 27,000 times
    assert response.status_code == 200, response.text
    refused(response.json())


async def test_a_transcript_read_again_at_each_turn_counts_by_its_size(
    gql: GraphQLClient,
) -> None:
    parent = await parent_of_many(gql)
    kilobyte = {"role": "user", "content": "x" * 1024}
    for _ in range(3):
        appended = await gql(APPEND, {"id": parent, "m": [kilobyte] * 100})
        assert appended["appendMessages"]["userErrors"] == []
    # Read once, 300 KiB: well within. Read again under each of the 30 delegations, 9 MiB
    # in four fields a delegation: refused.
    assert len((await gql(TRANSCRIPT, {"id": parent}))["conversation"]["transcript"]) == 300
    refused((await gql.post(TRANSCRIPT_WALK, {"id": parent})).json())
