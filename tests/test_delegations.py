"""Delegations over GraphQL: create with the child transcript, complete, latest, search, resume,
and the parent/child navigation a dashboard reads in one query."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import GraphQLClient, Server
from tests.operations import COUNT, DELETE, NODE, READ, read

ERRORS = "userErrors { code field message }"
DELEGATION = """
    id delegatingTier targetTier task maxTurns status summary createdAt completedAt
    resumedFrom { id }
    parentConversation { id }
    childConversation { id title messageCount transcript parentDelegation { id } }
"""
CREATE_CONVERSATION = f"""
mutation($input: CreateConversationInput!) {{
  createConversation(input: $input) {{ conversation {{ id }} {ERRORS} }}
}}"""
APPEND = f"""
mutation($id: ID!, $messages: [JSON!]!) {{
  appendMessages(input: {{conversationId: $id, messages: $messages}}) {{
    conversation {{ version messageCount }} {ERRORS}
  }}
}}"""
CREATE_DELEGATION = f"""
mutation($input: CreateDelegationInput!) {{
  createDelegation(input: $input) {{ delegation {{ {DELEGATION} }} {ERRORS} }}
}}"""
COMPLETE_DELEGATION = f"""
mutation($input: CompleteDelegationInput!) {{
  completeDelegation(input: $input) {{ delegation {{ {DELEGATION} }} {ERRORS} }}
}}"""
RESUME_DELEGATION = f"""
mutation($input: ResumeDelegationInput!) {{
  resumeDelegation(input: $input) {{ delegation {{ {DELEGATION} }} {ERRORS} }}
}}"""
GET_DELEGATION = f"query($id: ID!) {{ delegation(id: $id) {{ {DELEGATION} }} }}"
LATEST = "query($tier: String!) { latestDelegation(targetTier: $tier) { id summary } }"
SEARCH = "query($q: String!, $first: Int) { searchDelegations(query: $q, first: $first) { id } }"


async def new_conversation(gql: GraphQLClient, **fields: Any) -> str:
    data = await gql(CREATE_CONVERSATION, {"input": fields})
    payload = data["createConversation"]
    assert payload["userErrors"] == []
    return str(payload["conversation"]["id"])


async def append(gql: GraphQLClient, conversation_id: str, messages: list[Any]) -> None:
    data = await gql(APPEND, {"id": conversation_id, "messages": messages})
    assert data["appendMessages"]["userErrors"] == []


async def delegate_payload(
    gql: GraphQLClient,
    parent: str,
    *,
    target: str = "coder",
    task: str = "write the parser",
    delegating: str = "lead",
    max_turns: int | None = None,
) -> dict[str, Any]:
    variables = {
        "input": {
            "parentConversationId": parent,
            "delegatingTier": delegating,
            "targetTier": target,
            "task": task,
            "maxTurns": max_turns,
        },
    }
    return (await gql(CREATE_DELEGATION, variables))["createDelegation"]


async def delegate(gql: GraphQLClient, parent: str, **kwargs: Any) -> dict[str, Any]:
    payload = await delegate_payload(gql, parent, **kwargs)
    assert payload["userErrors"] == []
    return payload["delegation"]


async def complete_payload(
    gql: GraphQLClient, delegation_id: str, status: str = "COMPLETED", summary: str | None = None
) -> dict[str, Any]:
    variables = {"input": {"delegationId": delegation_id, "status": status, "summary": summary}}
    return (await gql(COMPLETE_DELEGATION, variables))["completeDelegation"]


async def complete(
    gql: GraphQLClient, delegation_id: str, status: str = "COMPLETED", summary: str | None = None
) -> dict[str, Any]:
    payload = await complete_payload(gql, delegation_id, status, summary)
    assert payload["userErrors"] == []
    return payload["delegation"]


async def resume_payload(gql: GraphQLClient, **fields: Any) -> dict[str, Any]:
    return (await gql(RESUME_DELEGATION, {"input": fields}))["resumeDelegation"]


async def get_delegation(gql: GraphQLClient, delegation_id: str) -> dict[str, Any] | None:
    return (await gql(GET_DELEGATION, {"id": delegation_id}))["delegation"]


async def conversation_count(gql: GraphQLClient) -> int:
    return int((await gql(COUNT))["conversations"]["totalCount"])


async def search(gql: GraphQLClient, query: str, first: int | None = None) -> list[str]:
    data = await gql(SEARCH, {"q": query, "first": first})
    return [d["id"] for d in data["searchDelegations"]]


# -- createDelegation -------------------------------------------------------


async def test_create_delegation_creates_running_delegation_and_titled_child(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql, title="session")
    task = "Refactor the tokenizer so that it streams its input in bounded chunks; keep the API."
    made = await delegate(gql, parent, target="coder", delegating="lead", task=task, max_turns=7)

    assert made["status"] == "RUNNING"
    assert (made["delegatingTier"], made["targetTier"], made["task"]) == ("lead", "coder", task)
    assert made["maxTurns"] == 7
    assert made["summary"] is None and made["completedAt"] is None
    assert made["resumedFrom"] is None
    assert made["parentConversation"] == {"id": parent}
    child = made["childConversation"]
    assert child["title"] == f"Delegation: coder — {task[:60]}"
    assert child["transcript"] == [] and child["messageCount"] == 0
    assert child["parentDelegation"] == {"id": made["id"]}
    assert child["id"] != parent

    # Read back through every way in: the delegation, the parent's list, the child.
    stored = await get_delegation(gql, made["id"])
    assert stored == made
    data = await gql(
        """query($p: ID!, $c: ID!) {
             parent: conversation(id: $p) {
               parentDelegation { id } delegations { totalCount nodes { id } }
             }
             child: conversation(id: $c) {
               id title parentDelegation { id parentConversation { id } }
             }
           }""",
        {"p": parent, "c": child["id"]},
    )
    assert data["parent"] == {
        "parentDelegation": None,
        "delegations": {"totalCount": 1, "nodes": [{"id": made["id"]}]},
    }
    assert data["child"]["parentDelegation"] == {
        "id": made["id"],
        "parentConversation": {"id": parent},
    }
    assert await conversation_count(gql) == 2


@pytest.mark.parametrize(("given", "stored"), [(0, None), (-3, None), (None, None), (1, 1)])
async def test_max_turns_of_zero_or_less_is_stored_as_unlimited(
    gql: GraphQLClient, given: int | None, stored: int | None
) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent, max_turns=given)
    assert made["maxTurns"] == stored
    assert (await get_delegation(gql, made["id"]) or {})["maxTurns"] == stored


async def test_child_title_keeps_only_the_first_60_characters_of_the_task(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql)
    task = "é" * 59 + "λ" + "tail that is cut off"
    made = await delegate(gql, parent, target="researcher", task=task)
    assert made["childConversation"]["title"] == "Delegation: researcher — " + "é" * 59 + "λ"
    assert made["task"] == task


@pytest.mark.parametrize("parent", ["missing", "malformed", "other-owner"])
async def test_delegation_to_a_parent_that_is_not_ours_creates_nothing(
    gql: GraphQLClient, server: Server, parent: str
) -> None:
    bob = gql.as_(await server.token(owner="user:bob"))
    bobs = await new_conversation(bob)
    parent_ids = {"missing": str(uuid.uuid4()), "malformed": "not-a-uuid", "other-owner": bobs}
    parent_id = parent_ids[parent]
    await new_conversation(gql)
    before = (await conversation_count(gql), await conversation_count(bob))

    payload = await delegate_payload(gql, parent_id)

    assert payload["delegation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("NOT_FOUND", ["parentConversationId"])
    ]
    assert (await conversation_count(gql), await conversation_count(bob)) == before
    data = await bob(
        "query($id: ID!) { conversation(id: $id) { version delegations { totalCount } } }",
        {"id": bobs},
    )
    assert data["conversation"] == {"version": 1, "delegations": {"totalCount": 0}}


async def test_a_retry_with_the_same_idempotency_key_returns_the_first_delegation(
    gql: GraphQLClient, server: Server
) -> None:
    parent = await new_conversation(gql)
    fields = {
        "parentConversationId": parent,
        "delegatingTier": "lead",
        "targetTier": "coder",
        "task": "write it",
        "idempotencyKey": "call-7",
    }
    first = (await gql(CREATE_DELEGATION, {"input": fields}))["createDelegation"]
    retry = (await gql(CREATE_DELEGATION, {"input": fields}))["createDelegation"]
    other = (await gql(CREATE_DELEGATION, {"input": {**fields, "idempotencyKey": "call-8"}}))[
        "createDelegation"
    ]
    bob = gql.as_(await server.token(owner="user:bob"))
    bobs = (
        await bob(
            CREATE_DELEGATION,
            {"input": {**fields, "parentConversationId": await new_conversation(bob)}},
        )
    )["createDelegation"]

    assert first["userErrors"] == retry["userErrors"] == other["userErrors"] == []
    assert retry["delegation"] == first["delegation"]
    assert other["delegation"]["id"] != first["delegation"]["id"]
    assert bobs["userErrors"] == [] and bobs["delegation"]["id"] != first["delegation"]["id"]
    # One child per key, and the retry wrote nothing: the parent's version moved twice.
    data = await gql(
        "query($id: ID!) { conversation(id: $id) { version delegations { totalCount } } }",
        {"id": parent},
    )
    assert data["conversation"] == {"version": 3, "delegations": {"totalCount": 2}}
    assert await conversation_count(gql) == 3


async def test_concurrent_creates_with_one_idempotency_key_make_one_delegation(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql)
    fields = {
        "parentConversationId": parent,
        "delegatingTier": "lead",
        "targetTier": "coder",
        "task": "once",
        "idempotencyKey": "burst",
    }
    made = await asyncio.gather(*[gql(CREATE_DELEGATION, {"input": fields}) for _ in range(8)])
    ids = {m["createDelegation"]["delegation"]["id"] for m in made}
    assert len(ids) == 1
    assert await conversation_count(gql) == 2
    # One write to the parent: the retries wrote nothing (their version bumps would refuse
    # another writer's expectedVersion).
    assert (await gql(READ, {"id": parent}))["conversation"]["version"] == 2


@pytest.mark.parametrize("key", ["", "   "])
async def test_a_blank_delegation_idempotency_key_is_refused(gql: GraphQLClient, key: str) -> None:
    parent = await new_conversation(gql)
    fields = {
        "parentConversationId": parent,
        "delegatingTier": "lead",
        "targetTier": "coder",
        "task": "do it",
        "idempotencyKey": key,
    }
    payload = (await gql(CREATE_DELEGATION, {"input": fields}))["createDelegation"]
    assert payload["delegation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["idempotencyKey"])
    ]
    assert await conversation_count(gql) == 1


@pytest.mark.parametrize("field", ["delegatingTier", "targetTier", "task"])
async def test_blank_tier_or_task_is_invalid_input_and_creates_nothing(
    gql: GraphQLClient, field: str
) -> None:
    parent = await new_conversation(gql)
    variables = {
        "parentConversationId": parent,
        "delegatingTier": "lead",
        "targetTier": "coder",
        "task": "do it",
        field: "  ",
    }
    data = await gql(CREATE_DELEGATION, {"input": variables})
    payload = data["createDelegation"]
    assert payload["delegation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [("INVALID_INPUT", [field])]
    assert await conversation_count(gql) == 1


async def test_a_read_only_token_cannot_delegate(gql: GraphQLClient, server: Server) -> None:
    parent = await new_conversation(gql)
    reader = gql.as_(await server.token(scope="read"))
    payload = await delegate_payload(reader, parent)
    assert payload["delegation"] is None
    assert [e["code"] for e in payload["userErrors"]] == ["FORBIDDEN"]
    assert await conversation_count(gql) == 1


# -- navigation ---------------------------------------------------------------

PARENT_DELEGATIONS = """
query($id: ID!, $status: DelegationStatus, $first: Int, $after: String) {
  conversation(id: $id) {
    delegations(status: $status, first: $first, after: $after) {
      totalCount
      nodes { id status }
      edges { cursor node { id } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
}"""


async def parent_delegations(gql: GraphQLClient, parent: str, **args: Any) -> dict[str, Any]:
    data = await gql(PARENT_DELEGATIONS, {"id": parent, **args})
    return data["conversation"]["delegations"]


async def test_parent_lists_its_delegations_oldest_first_filtered_by_status(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql)
    ids = [(await delegate(gql, parent, task=f"task {i}"))["id"] for i in range(4)]
    await complete(gql, ids[1], "COMPLETED", "done")
    await complete(gql, ids[2], "FAILED", "broke")
    await complete(gql, ids[3], "COMPLETED", "done too")

    everything = await parent_delegations(gql, parent)
    assert [n["id"] for n in everything["nodes"]] == ids
    assert everything["totalCount"] == 4
    assert [n["status"] for n in everything["nodes"]] == [
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "COMPLETED",
    ]
    completed = await parent_delegations(gql, parent, status="COMPLETED")
    assert [n["id"] for n in completed["nodes"]] == [ids[1], ids[3]]
    assert completed["totalCount"] == 2
    assert [n["id"] for n in (await parent_delegations(gql, parent, status="FAILED"))["nodes"]] == [
        ids[2]
    ]
    assert (await parent_delegations(gql, parent, status="RUNNING"))["nodes"] == [
        {"id": ids[0], "status": "RUNNING"}
    ]
    assert (await parent_delegations(gql, parent, status="PENDING"))["totalCount"] == 0


async def test_parent_delegations_page_with_cursors(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    ids = [(await delegate(gql, parent, task=f"task {i}"))["id"] for i in range(5)]

    first = await parent_delegations(gql, parent, first=2)
    assert [n["id"] for n in first["nodes"]] == ids[:2]
    assert first["pageInfo"]["hasNextPage"] is True
    assert first["pageInfo"]["hasPreviousPage"] is False
    assert first["pageInfo"]["endCursor"] == first["edges"][-1]["cursor"]
    second = await parent_delegations(gql, parent, first=2, after=first["pageInfo"]["endCursor"])
    assert [n["id"] for n in second["nodes"]] == ids[2:4]
    assert second["pageInfo"]["hasPreviousPage"] is True
    last = await parent_delegations(gql, parent, first=2, after=second["pageInfo"]["endCursor"])
    assert [n["id"] for n in last["nodes"]] == ids[4:]
    assert last["pageInfo"]["hasNextPage"] is False
    assert last["totalCount"] == 5


async def test_a_tree_of_depth_three_reads_in_one_query(gql: GraphQLClient) -> None:
    root = await new_conversation(gql, title="session")
    level1 = await delegate(gql, root, delegating="lead", target="planner", task="plan")
    level2 = await delegate(
        gql, level1["childConversation"]["id"], delegating="planner", target="coder", task="code"
    )
    level3 = await delegate(
        gql, level2["childConversation"]["id"], delegating="coder", target="tester", task="test"
    )
    await append(gql, level3["childConversation"]["id"], [{"role": "assistant", "content": "ok"}])
    sibling = await delegate(gql, root, delegating="lead", target="reviewer", task="review")

    node = "id title parentDelegation { id targetTier }"
    data = await gql(
        f"""query($id: ID!) {{ conversation(id: $id) {{ id parentDelegation {{ id }}
              delegations {{ nodes {{ targetTier childConversation {{ {node}
                delegations {{ nodes {{ targetTier childConversation {{ {node}
                  delegations {{ nodes {{ targetTier childConversation {{ {node} transcript
                  }} }} }} }} }} }} }} }} }} }} }}""",
        {"id": root},
    )
    tree = data["conversation"]
    assert tree["parentDelegation"] is None
    first_level = tree["delegations"]["nodes"]
    assert [d["targetTier"] for d in first_level] == ["planner", "reviewer"]
    planner = first_level[0]["childConversation"]
    assert planner["id"] == level1["childConversation"]["id"]
    assert planner["parentDelegation"] == {"id": level1["id"], "targetTier": "planner"}
    assert first_level[1]["childConversation"]["id"] == sibling["childConversation"]["id"]
    assert first_level[1]["childConversation"]["delegations"]["nodes"] == []
    coder = planner["delegations"]["nodes"][0]["childConversation"]
    assert coder["parentDelegation"] == {"id": level2["id"], "targetTier": "coder"}
    tester = coder["delegations"]["nodes"][0]["childConversation"]
    assert tester["parentDelegation"] == {"id": level3["id"], "targetTier": "tester"}
    assert tester["title"] == "Delegation: tester — test"
    assert tester["transcript"] == [{"role": "assistant", "content": "ok"}]


async def test_delegation_is_a_node(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent, target="coder")
    data = await gql(
        """query($id: ID!) { node(id: $id) { __typename id
             ... on Delegation { targetTier childConversation { id } } } }""",
        {"id": made["id"]},
    )
    assert data["node"] == {
        "__typename": "Delegation",
        "id": made["id"],
        "targetTier": "coder",
        "childConversation": {"id": made["childConversation"]["id"]},
    }
    missing = await gql(NODE, {"id": str(uuid.uuid4())})
    assert missing["node"] is None


async def test_another_owner_sees_no_delegation(gql: GraphQLClient, server: Server) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent, target="coder")
    await complete(gql, made["id"], summary="shared secret summary")
    bob = gql.as_(await server.token(owner="user:bob"))

    assert await get_delegation(bob, made["id"]) is None
    assert (await bob(NODE, {"id": made["id"]}))["node"] is None
    assert (await bob(LATEST, {"tier": "coder"}))["latestDelegation"] is None
    assert await search(bob, "secret") == []
    payload = await complete_payload(bob, made["id"], "FAILED", "hijacked")
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("NOT_FOUND", ["delegationId"])
    ]
    resumed = await resume_payload(bob, delegationId=made["id"], task="again")
    assert [e["code"] for e in resumed["userErrors"]] == ["NOT_FOUND"]
    assert await conversation_count(bob) == 0
    assert (await get_delegation(gql, made["id"]) or {})["summary"] == "shared secret summary"


async def test_deleting_the_parent_removes_its_delegations_and_children(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    grandchild = await delegate(gql, made["childConversation"]["id"])
    data = await gql(
        "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }", {"id": parent}
    )
    assert data["deleteConversation"]["deleted"] is True
    assert await get_delegation(gql, made["id"]) is None
    assert await get_delegation(gql, grandchild["id"]) is None
    assert await conversation_count(gql) == 0


async def test_deleting_a_child_transcript_removes_its_delegation(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    kept = await delegate(gql, parent, task="kept")
    dropped = await delegate(gql, parent, task="dropped")
    data = await gql(
        "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }",
        {"id": dropped["childConversation"]["id"]},
    )
    assert data["deleteConversation"]["deleted"] is True
    assert await get_delegation(gql, dropped["id"]) is None
    listed = await parent_delegations(gql, parent)
    assert ([n["id"] for n in listed["nodes"]], listed["totalCount"]) == ([kept["id"]], 1)
    assert await conversation_count(gql) == 2


async def test_deleting_a_child_transcript_moves_its_parent_s_version(gql: GraphQLClient) -> None:
    """A client that caches a conversation by version kept the parent's delegation list with
    the deleted child in it: the delete changed the list and left the version where it was.
    The parent moves, as a new delegation moves it; the conversations above it do not (a
    delegation made under a child does not move the root either)."""
    root = await new_conversation(gql)
    child = (await delegate(gql, root))["childConversation"]["id"]
    grandchild = (await delegate(gql, child))["childConversation"]["id"]
    before = {cid: (await read(gql, cid) or {})["version"] for cid in (root, child)}
    deleted = await gql(DELETE, {"id": grandchild})
    assert deleted["deleteConversation"]["deleted"] is True
    assert (await read(gql, child) or {})["version"] == before[child] + 1
    assert (await read(gql, root) or {})["version"] == before[root]
    assert (await parent_delegations(gql, child))["totalCount"] == 0

    # The child of the root likewise moves the root; deleting it again moves nothing.
    assert (await gql(DELETE, {"id": child}))["deleteConversation"]["deleted"] is True
    assert (await read(gql, root) or {})["version"] == before[root] + 1
    assert (await gql(DELETE, {"id": child}))["deleteConversation"]["deleted"] is False
    assert (await read(gql, root) or {})["version"] == before[root] + 1


async def test_delegations_expire_with_their_parent(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent, target="coder")
    await complete(gql, made["id"], summary="short-lived work")
    assert (await gql(LATEST, {"tier": "coder"}))["latestDelegation"] is not None

    # The expiry is set once the tree exists, so a slow machine cannot expire it early, and
    # far enough ahead that the update still finds it in the future on a loaded machine.
    expires = datetime.now(UTC) + timedelta(seconds=2)
    expire = """mutation($input: UpdateConversationInput!) {
      updateConversation(input: $input) { userErrors { code } } }"""
    updated = await gql(expire, {"input": {"id": parent, "expiresAt": expires.isoformat()}})
    assert updated["updateConversation"]["userErrors"] == []
    await asyncio.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.1)
    assert await get_delegation(gql, made["id"]) is None
    assert (await gql(LATEST, {"tier": "coder"}))["latestDelegation"] is None
    assert await search(gql, "short-lived") == []
    child = await gql(
        "query($id: ID!) { conversation(id: $id) { id } }", {"id": made["childConversation"]["id"]}
    )
    assert child["conversation"] is None
    resumed = await resume_payload(gql, delegationId=made["id"], task="again")
    assert [e["code"] for e in resumed["userErrors"]] == ["NOT_FOUND"]
    orphan = await delegate_payload(gql, parent)
    assert [e["code"] for e in orphan["userErrors"]] == ["NOT_FOUND"]


# -- completeDelegation -------------------------------------------------------


@pytest.mark.parametrize("status", ["COMPLETED", "FAILED"])
async def test_complete_sets_status_summary_and_completed_at_once(
    gql: GraphQLClient, status: str
) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    done = await complete(gql, made["id"], status, "the result")
    assert done["status"] == status
    assert done["summary"] == "the result"
    assert done["completedAt"] is not None and done["completedAt"] >= made["createdAt"]

    again = await complete_payload(gql, made["id"], "COMPLETED", "second result")
    assert again["delegation"] is None
    assert [(e["code"], e["field"]) for e in again["userErrors"]] == [
        ("INVALID_TRANSITION", ["delegationId"])
    ]
    assert await get_delegation(gql, made["id"]) == done


async def test_completing_a_delegation_moves_its_child_s_version_too(gql: GraphQLClient) -> None:
    """The child transcript shows its delegation (`parentDelegation { status summary }`): a
    client caching the child by version kept it RUNNING, the completion moving the parent
    alone. A refused completion moves neither."""
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    child = made["childConversation"]["id"]
    before = {cid: (await read(gql, cid) or {})["version"] for cid in (parent, child)}
    await complete(gql, made["id"], "COMPLETED", "the result")
    after = {cid: (await read(gql, cid) or {})["version"] for cid in (parent, child)}
    assert after == {parent: before[parent] + 1, child: before[child] + 1}
    shown = await gql(
        "query($id: ID!) { conversation(id: $id) { parentDelegation { status summary } } }",
        {"id": child},
    )
    assert shown["conversation"]["parentDelegation"] == {
        "status": "COMPLETED",
        "summary": "the result",
    }
    refused = await complete_payload(gql, made["id"], "FAILED", "again")
    assert [e["code"] for e in refused["userErrors"]] == ["INVALID_TRANSITION"]
    assert {cid: (await read(gql, cid) or {})["version"] for cid in (parent, child)} == after


async def test_a_delegation_whose_child_expired_alone_can_still_be_completed(
    server: Server, gql: GraphQLClient
) -> None:
    """A child transcript with an expiry of its own (set by a release before the API refused
    one) that has passed reads as gone until the sweep deletes it, its delegation with it.
    Meanwhile the delegation is still its parent's, readable and open: completing it was
    refused NOT_FOUND (on `id`, a field the input does not have) since a completion moves the
    child's version too. It completes, moving the parent; the gone child has nothing to move."""
    from sqlalchemy import update

    from graph.store.tables import conversation

    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    child = made["childConversation"]["id"]
    async with server.services.db.write() as connection:
        await connection.execute(
            update(conversation)
            .where(conversation.c.id == child)
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    before = (await read(gql, parent) or {})["version"]
    # Its child is not asked for: it reads as gone (the delegation query's likewise).
    done = await gql(
        f"""mutation($input: CompleteDelegationInput!) {{
          completeDelegation(input: $input) {{ delegation {{ status summary }} {ERRORS} }} }}""",
        {"input": {"delegationId": made["id"], "status": "COMPLETED", "summary": "the result"}},
    )
    payload = done["completeDelegation"]
    assert payload["userErrors"] == []
    assert payload["delegation"] == {"status": "COMPLETED", "summary": "the result"}
    assert (await read(gql, parent) or {})["version"] == before + 1


@pytest.mark.parametrize("status", ["RUNNING", "PENDING"])
async def test_complete_accepts_only_a_final_status(gql: GraphQLClient, status: str) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    payload = await complete_payload(gql, made["id"], status, "nope")
    assert payload["delegation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["status"])
    ]
    stored = await get_delegation(gql, made["id"]) or {}
    assert (stored["status"], stored["summary"], stored["completedAt"]) == ("RUNNING", None, None)


async def test_complete_without_summary_keeps_it_null(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    done = await complete(gql, made["id"], "FAILED")
    assert (done["status"], done["summary"]) == ("FAILED", None)


@pytest.mark.parametrize("delegation_id", ["9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60", "nope"])
async def test_complete_an_unknown_delegation_is_not_found(
    gql: GraphQLClient, delegation_id: str
) -> None:
    payload = await complete_payload(gql, delegation_id)
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("NOT_FOUND", ["delegationId"])
    ]


# -- latestDelegation and searchDelegations ----------------------------------


async def test_latest_delegation_is_the_most_recent_completion(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    older = await delegate(gql, parent, target="coder", task="first")
    newer = await delegate(gql, parent, target="coder", task="second")
    failed = await delegate(gql, parent, target="coder", task="third")
    running = await delegate(gql, parent, target="coder", task="fourth")
    assert (await gql(LATEST, {"tier": "coder"}))["latestDelegation"] is None

    # Completion order, not creation order, decides.
    await complete(gql, newer["id"], summary="newer")
    await complete(gql, older["id"], summary="older")
    await complete(gql, failed["id"], "FAILED", "failed")
    latest = (await gql(LATEST, {"tier": "coder"}))["latestDelegation"]
    assert latest == {"id": older["id"], "summary": "older"}
    assert running["id"] != latest["id"]
    assert (await gql(LATEST, {"tier": "tester"}))["latestDelegation"] is None


async def test_search_finds_completed_summaries_newest_completion_first(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql)
    made = [await delegate(gql, parent, task=f"task {i}") for i in range(5)]
    await complete(gql, made[3]["id"], summary="parser rewritten; tokenizer streams")
    await complete(gql, made[0]["id"], summary="The PARSER now handles unicode")
    await complete(gql, made[1]["id"], "FAILED", "parser crashed")
    await complete(gql, made[2]["id"], summary="docs updated")
    # made[4] stays RUNNING and has no summary.

    assert await search(gql, "parser") == [made[0]["id"], made[3]["id"]]
    assert await search(gql, "parser", first=1) == [made[0]["id"]]
    assert await search(gql, "stream") == [made[3]["id"]]
    assert await search(gql, "nothing like this") == []


async def test_search_treats_like_wildcards_literally(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    percent, underscore, plain, backslash = [
        await delegate(gql, parent, task=f"task {i}") for i in range(4)
    ]
    await complete(gql, percent["id"], summary="coverage at 100% now")
    await complete(gql, underscore["id"], summary="renamed snake_case helpers")
    await complete(gql, plain["id"], summary="100 percent; snakeXcase")
    await complete(gql, backslash["id"], summary=r"fixed C:\temp path")

    assert await search(gql, "%") == [percent["id"]]
    assert await search(gql, "100%") == [percent["id"]]
    assert await search(gql, "e_c") == [underscore["id"]]
    assert await search(gql, "_") == [underscore["id"]]
    assert await search(gql, "\\") == [backslash["id"]]
    assert await search(gql, r"C:\t") == [backslash["id"]]


async def test_search_is_case_insensitive_on_every_backend(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    await complete(gql, made["id"], summary="Migrated The Database")
    assert await search(gql, "the database") == [made["id"]]
    assert await search(gql, "MIGRATED") == [made["id"]]


async def test_search_folds_every_letter_not_only_ascii_alike_on_every_backend(
    gql: GraphQLClient,
) -> None:
    """PostgreSQL's ILIKE folded É and Ü, SQLite's LIKE only A-Z: one follow-up, two answers."""
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    await complete(gql, made["id"], summary="ÜBERPRÜFUNG DER ÉTÉ-DATEN, ΣΥΝΟΨΗ")
    for query in ("überprüfung", "été-daten", "συνοψη", "ÜberPrüfung"):
        assert await search(gql, query) == [made["id"]], query
    assert await search(gql, "uberprufung") == []  # folded, not stripped of accents


async def test_an_empty_query_finds_an_empty_summary_encrypted_or_not(
    gql: GraphQLClient,
) -> None:
    """As LIKE '%%' matches '' in SQL: with encryption on, the opened summaries were matched
    only when not empty, so an empty summary was found without encryption and not with it."""
    parent = await new_conversation(gql)
    empty, said = await delegate(gql, parent), await delegate(gql, parent)
    await complete(gql, empty["id"], summary="")
    await complete(gql, said["id"], summary="said")
    await complete(gql, (await delegate(gql, parent))["id"], summary=None)
    assert await search(gql, "") == [said["id"], empty["id"]]


async def test_search_lowers_letter_by_letter_alike_on_every_backend(gql: GraphQLClient) -> None:
    """Python lowered a word's last capital sigma to the final sigma, and the I with a dot to
    `i` and a combining dot, where PostgreSQL's lower() lowers each to one letter (the sigma,
    `i`): the summary's own words, in its own case, found nothing on PostgreSQL, and
    `istanbul` nothing on SQLite."""
    parent = await new_conversation(gql)
    made = await delegate(gql, parent)
    await complete(gql, made["id"], summary="ΟΔΥΣΣΕΥΣ in İstanbul")
    other = await delegate(gql, parent)
    await complete(gql, other["id"], summary="the οδυσσευς")
    for query in ("ΟΔΥΣΣΕΥΣ", "οδυσσευσ", "οδυσσευς", "ΟδυσσευΣ"):
        assert await search(gql, query) == [other["id"], made["id"]], query
    for query in ("İstanbul", "istanbul", "Σ IN", "ς in"):
        assert await search(gql, query) == [made["id"]], query


# -- resumeDelegation ---------------------------------------------------------


async def test_resume_by_id_seeds_the_new_child_with_the_prior_transcript(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql)
    prior = await delegate(
        gql, parent, delegating="lead", target="coder", task="write it", max_turns=4
    )
    child = prior["childConversation"]["id"]
    await append(
        gql,
        child,
        [
            {"role": "system", "content": "You are the coder.", "identity_tier": "coder"},
            {"role": "user", "content": "write it", "token_count": 3},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "done"}],
                "tool_calls": [{"id": "c1", "name": "write_file"}],
            },
            {
                "role": "tool",
                "content": "ok",
                "tool_results": [{"id": "c1"}],
                "is_compacted": False,
            },
        ],
    )
    await complete(gql, prior["id"], summary="wrote it")

    payload = await resume_payload(gql, delegationId=prior["id"], task="now add tests", maxTurns=2)
    assert payload["userErrors"] == []
    resumed = payload["delegation"]
    assert resumed["id"] != prior["id"]
    assert resumed["resumedFrom"] == {"id": prior["id"]}
    assert (resumed["delegatingTier"], resumed["targetTier"]) == ("lead", "coder")
    assert (resumed["task"], resumed["maxTurns"], resumed["status"]) == (
        "now add tests",
        2,
        "RUNNING",
    )
    assert resumed["parentConversation"] == {"id": parent}
    new_child = resumed["childConversation"]
    assert new_child["id"] != child
    assert new_child["title"] == "Delegation: coder — now add tests"
    expected = [
        {"role": "system", "content": "You are the coder."},
        {"role": "user", "content": "write it"},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "tool", "content": "ok"},
        {"role": "user", "content": "now add tests"},
    ]
    assert new_child["transcript"] == expected
    assert new_child["messageCount"] == 5

    # The prior delegation and its child are untouched; the parent now has both.
    old = await get_delegation(gql, prior["id"]) or {}
    assert (old["status"], old["summary"]) == ("COMPLETED", "wrote it")
    assert len(old["childConversation"]["transcript"]) == 4
    assert old["childConversation"]["transcript"][2]["tool_calls"] == [
        {"id": "c1", "name": "write_file"}
    ]
    assert [n["id"] for n in (await parent_delegations(gql, parent))["nodes"]] == [
        prior["id"],
        resumed["id"],
    ]
    assert (await get_delegation(gql, resumed["id"]) or {})["childConversation"][
        "transcript"
    ] == expected


async def test_resume_by_target_tier_uses_the_latest_completed_delegation(
    gql: GraphQLClient,
) -> None:
    parent = await new_conversation(gql)
    first = await delegate(gql, parent, target="researcher", task="look up A")
    second = await delegate(gql, parent, target="researcher", task="look up B")
    running = await delegate(gql, parent, target="researcher", task="look up C")
    await append(gql, first["childConversation"]["id"], [{"role": "assistant", "content": "A"}])
    await append(gql, second["childConversation"]["id"], [{"role": "assistant", "content": "B"}])
    await append(gql, running["childConversation"]["id"], [{"role": "assistant", "content": "C"}])
    await complete(gql, second["id"], summary="B found")
    await complete(gql, first["id"], summary="A found")

    payload = await resume_payload(gql, targetTier="researcher", task="compare")
    assert payload["userErrors"] == []
    resumed = payload["delegation"]
    assert resumed["resumedFrom"] == {"id": first["id"]}
    assert resumed["targetTier"] == "researcher"
    assert resumed["maxTurns"] is None
    assert resumed["childConversation"]["transcript"] == [
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "compare"},
    ]


async def test_resume_of_an_empty_child_starts_with_the_task(gql: GraphQLClient) -> None:
    parent = await new_conversation(gql)
    prior = await delegate(gql, parent)
    payload = await resume_payload(gql, delegationId=prior["id"], task="try again")
    assert payload["userErrors"] == []
    assert payload["delegation"]["childConversation"]["transcript"] == [
        {"role": "user", "content": "try again"}
    ]


@pytest.mark.parametrize(
    ("fields", "code", "field"),
    [
        ({}, "INVALID_INPUT", "targetTier"),
        ({"delegationId": "PRIOR", "targetTier": "coder"}, "INVALID_INPUT", "delegationId"),
        ({"delegationId": str(uuid.uuid4())}, "NOT_FOUND", "delegationId"),
        ({"delegationId": "not-a-uuid"}, "NOT_FOUND", "delegationId"),
        ({"targetTier": "nobody"}, "NOT_FOUND", "targetTier"),
        # A RUNNING delegation to the tier is not a completed one to resume.
        ({"targetTier": "coder"}, "NOT_FOUND", "targetTier"),
        ({"delegationId": "PRIOR", "task": " "}, "INVALID_INPUT", "task"),
    ],
)
async def test_resume_rejects_ambiguous_or_unknown_targets_and_creates_nothing(
    gql: GraphQLClient, fields: dict[str, Any], code: str, field: str
) -> None:
    parent = await new_conversation(gql)
    prior = await delegate(gql, parent, target="coder")
    fields = {k: prior["id"] if v == "PRIOR" else v for k, v in fields.items()}
    payload = await resume_payload(gql, **{"task": "again", **fields})
    assert payload["delegation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [(code, [field])]
    assert await conversation_count(gql) == 2
    assert (await parent_delegations(gql, parent))["totalCount"] == 1


async def test_an_admin_reads_the_workspace_but_resumes_only_its_own(
    gql: GraphQLClient, server: Server
) -> None:
    parent = await new_conversation(gql)
    made = await delegate(gql, parent, target="coder")
    await complete(gql, made["id"], summary="alice's work")
    admin = gql.as_(await server.token(owner="user:carol", scope="admin"))

    assert (await admin(LATEST, {"tier": "coder"}))["latestDelegation"] == {
        "id": made["id"],
        "summary": "alice's work",
    }
    assert await search(admin, "alice") == [made["id"]]
    by_id = await resume_payload(admin, delegationId=made["id"], task="again")
    by_tier = await resume_payload(admin, targetTier="coder", task="again")
    assert [(e["code"], e["field"]) for e in by_id["userErrors"]] == [
        ("NOT_FOUND", ["delegationId"])
    ]
    assert [(e["code"], e["field"]) for e in by_tier["userErrors"]] == [
        ("NOT_FOUND", ["targetTier"])
    ]
    assert (await parent_delegations(gql, parent))["totalCount"] == 1


@pytest.mark.parametrize(
    "query",
    [
        '{ latestDelegation(targetTier: "co\\u0000der") { id } }',
        '{ searchDelegations(query: "a\\u0000b") { id } }',
    ],
)
async def test_a_nul_in_a_lookup_is_invalid_input_on_every_backend(
    gql: GraphQLClient, query: str
) -> None:
    response = await gql.post(query)
    assert response.status_code == 200
    errors = response.json()["errors"]
    assert [e["extensions"]["code"] for e in errors] == ["INVALID_INPUT"]
