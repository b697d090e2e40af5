"""An answer's size is bounded as it is built (CONVOGRAPH_MAX_RESULT_VALUES): a query that
walks a tree down and back up reads the same stored records again at each turn, so a
200-byte document over one conversation's hundred delegations built a million objects
(hundreds of megabytes, the server answering nobody for half a minute). Past the bound the
answer is one LIMIT_EXCEEDED error and no data; a real tree, read once, stays far within it.
The bound is lowered here so that a few dozen rows show it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from graph.settings import Settings
from tests.conftest import GraphQLClient
from tests.operations import APPEND, CREATE, DELEGATE, REPLACE
from tests.ws import subscribed

if TYPE_CHECKING:
    from tests.live_server import LiveServers

pytest_plugins = ["tests.live_server"]

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


TASK_WALK = """query($id: ID!) { conversation(id: $id) { delegations(first: 100) { nodes { task
  parentConversation { delegations(first: 100) { nodes { task } } } } } } }"""


async def test_long_texts_count_by_their_size(gql: GraphQLClient) -> None:
    """A task is one field however long: 30 tasks of 10 KiB, each read again under each of
    the 30 (the answer 9 MiB in 1,000 fields), went unbounded."""
    parent = (await gql(CREATE, {"title": "lead"}))["createConversation"]["conversation"]["id"]
    for i in range(FANOUT):
        made = await gql(DELEGATE, {"id": parent, "task": f"{i} " + "x" * 10_240})
        assert made["createDelegation"]["userErrors"] == [], made
    refused((await gql.post(TASK_WALK, {"id": parent})).json())


MARK_READ_AND_WALK = """mutation($id: ID!) { updateConversation(input: {id: $id,
  markRead: true}) { conversation { version delegations(first: 100) { nodes { id
  parentConversation { delegations(first: 100) { nodes { id parentConversation {
  delegations(first: 100) { nodes { id task } } } } } } } } } } }"""


@pytest.mark.parametrize("accept", ["application/graphql-response+json", "application/json"])
async def test_a_mutation_answer_cut_short_says_its_writes_were_made(
    gql: GraphQLClient, accept: str
) -> None:
    """A mutation's writes are made before its answer is built: answered as a request that
    never ran (no data; 400 in graphql-response+json), a client would make them again."""
    parent = await parent_of_many(gql)
    before = (await gql(READ_VERSION, {"id": parent}))["conversation"]["version"]
    response = await gql.http.post(
        "/graphql",
        json={"query": MARK_READ_AND_WALK, "variables": {"id": parent}},
        headers={"Authorization": f"Bearer {gql.token}", "Accept": accept},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "LIMIT_EXCEEDED"
    assert "writes were made" in error["message"] and error["path"][0] == "updateConversation"
    conversation = body["data"]["updateConversation"]["conversation"]
    assert conversation["version"] == before + 1  # what it wrote, as far as it was answered
    after = (await gql(READ_VERSION, {"id": parent}))["conversation"]["version"]
    assert after == before + 1


READ_VERSION = "query($id: ID!) { conversation(id: $id) { version } }"


async def test_an_event_as_large_as_the_server_sends_is_delivered(
    live_servers: LiveServers, database_url: str
) -> None:
    """An event carries every message a replace wrote (up to a hundred calls' worth): its
    answer is bounded by what the largest such event holds, not by a query's bound, or a
    legitimate replace would reach every subscriber as an error they could not act on."""
    server = await live_servers.start(database_url, env={"CONVOGRAPH_MAX_RESULT_VALUES": "2000"})
    async with server.client(await server.token()) as writer:
        cid = (await writer(CREATE, {"title": "t"}))["createConversation"]["conversation"]["id"]
        async with subscribed(server, writer, cid) as socket:
            messages = [{"role": "user", "content": f"m{i}"} for i in range(1_500)]
            replaced = await writer(REPLACE, {"id": cid, "m": messages})
            assert replaced["replaceTranscript"]["userErrors"] == []
            event = await socket.event()
            assert event["kind"] == "TRANSCRIPT_REPLACED"
            assert len(event["messages"]) == 1_500
