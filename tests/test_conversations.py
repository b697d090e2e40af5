"""Conversations over GraphQL: create, update, read, list (filters, paging, search), delete."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, or_, select

from graph.domain.conversations import MAX_SEARCH_WORDS
from graph.store import event_log
from graph.store.tables import conversation, delegation, message, snapshot
from tests import operations
from tests.conftest import GraphQLClient, Server
from tests.test_tree_queries import statements

FIELDS = """
    id title agentSlug context interactive metadata provider model providerResponseId
    version messageCount createdAt updatedAt lastReadAt expiresAt
"""

CREATE = f"""
mutation($input: CreateConversationInput!) {{
  createConversation(input: $input) {{
    conversation {{ {FIELDS} }}
    userErrors {{ code field message }}
  }}
}}"""

UPDATE = f"""
mutation($input: UpdateConversationInput!) {{
  updateConversation(input: $input) {{
    conversation {{ {FIELDS} }}
    userErrors {{ code field message }}
  }}
}}"""

GET = f"query($id: ID!) {{ conversation(id: $id) {{ {FIELDS} transcript }} }}"

LIST = """
query($filter: ConversationFilter, $first: Int, $after: String) {
  conversations(filter: $filter, first: $first, after: $after) {
    edges { cursor node { id title } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    totalCount
  }
}"""

APPEND = """
mutation($id: ID!, $m: [JSON!]!, $v: Int) {
  appendMessages(input: {conversationId: $id, messages: $m, expectedVersion: $v}) {
    conversation { id version messageCount }
    messages { seq role content data createdAt }
    userErrors { code field message }
  }
}"""

REPLACE = """
mutation($input: ReplaceTranscriptInput!) {
  replaceTranscript(input: $input) {
    conversation { id version messageCount metadata provider model providerResponseId transcript }
    userErrors { code field message }
  }
}"""

DELETE = """
mutation($id: ID!) {
  deleteConversation(input: {id: $id}) { deleted userErrors { code field message } }
}"""

DELEGATE = """
mutation($parent: ID!, $task: String!) {
  createDelegation(input: {parentConversationId: $parent, delegatingTier: "lead",
                           targetTier: "researcher", task: $task}) {
    delegation { id childConversation { id } }
    userErrors { code field message }
  }
}"""

SNAPSHOT = """
mutation($id: ID!, $m: [JSON!]!) {
  saveSnapshot(input: {conversationId: $id, messages: $m}) {
    snapshot { id messageCount messages createdAt conversation { id } }
    userErrors { code field message }
  }
}"""


# -- helpers shared with the transcript and retention tests -----------------------------------


async def create(gql: GraphQLClient, **fields: Any) -> dict[str, Any]:
    """Create a conversation through the API and return it, failing on userErrors."""
    payload = (await gql(CREATE, {"input": fields}))["createConversation"]
    assert payload["userErrors"] == [], payload["userErrors"]
    return payload["conversation"]


async def append(
    gql: GraphQLClient, cid: str, messages: list[Any], expected_version: int | None = None
) -> dict[str, Any]:
    """The appendMessages payload (userErrors included, not checked)."""
    data = await gql(APPEND, {"id": cid, "m": messages, "v": expected_version})
    return data["appendMessages"]


async def replace(
    gql: GraphQLClient, cid: str, messages: list[Any], **extra: Any
) -> dict[str, Any]:
    """The replaceTranscript payload (userErrors included, not checked)."""
    data = await gql(REPLACE, {"input": {"conversationId": cid, "messages": messages, **extra}})
    return data["replaceTranscript"]


async def get(gql: GraphQLClient, cid: str) -> dict[str, Any] | None:
    return (await gql(GET, {"id": cid}))["conversation"]


async def delegate(gql: GraphQLClient, parent: str, task: str = "dig") -> dict[str, Any]:
    payload = (await gql(DELEGATE, {"parent": parent, "task": task}))["createDelegation"]
    assert payload["userErrors"] == [], payload["userErrors"]
    return payload["delegation"]


async def save_snapshot(gql: GraphQLClient, cid: str, messages: list[Any]) -> dict[str, Any]:
    payload = (await gql(SNAPSHOT, {"id": cid, "m": messages}))["saveSnapshot"]
    assert payload["userErrors"] == [], payload["userErrors"]
    return payload["snapshot"]


async def listing(gql: GraphQLClient, **variables: Any) -> dict[str, Any]:
    return (await gql(LIST, variables))["conversations"]


async def list_ids(gql: GraphQLClient, **variables: Any) -> list[str]:
    return [edge["node"]["id"] for edge in (await listing(gql, **variables))["edges"]]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def other_owner(server: Server, gql: GraphQLClient, owner: str = "user:bob") -> GraphQLClient:
    return gql.as_(await server.token(owner=owner))


async def stored_rows(server: Server, ids: list[str]) -> dict[str, int]:
    """Rows the given conversations hold in the database: a delete must remove them, not hide them.

    The API cannot tell a deleted row from a hidden one, so this reads the tables directly.
    """
    where = {
        conversation: conversation.c.id.in_(ids),
        message: message.c.conversation_id.in_(ids),
        snapshot: snapshot.c.conversation_id.in_(ids),
        delegation: or_(
            delegation.c.parent_conversation_id.in_(ids),
            delegation.c.child_conversation_id.in_(ids),
        ),
    }
    counts = {}
    async with server.services.db.read() as conn:
        for table, clause in where.items():
            query = select(func.count()).select_from(table).where(clause)
            counts[table.name] = int((await conn.execute(query)).scalar_one())
    return counts


def error_codes(response_body: dict[str, Any]) -> list[str | None]:
    return [e.get("extensions", {}).get("code") for e in response_body.get("errors") or []]


# -- createConversation -----------------------------------------------------------------------


async def test_create_conversation_applies_the_documented_defaults(gql: GraphQLClient) -> None:
    created = await create(gql)
    assert uuid.UUID(created["id"]).version == 4
    assert created["title"] is None
    assert created["agentSlug"] == ""
    assert created["context"] == "chat"
    assert created["interactive"] is True
    assert created["metadata"] == {}
    assert created["provider"] is None and created["model"] is None
    assert created["providerResponseId"] is None
    assert created["version"] == 1
    assert created["messageCount"] == 0
    assert created["lastReadAt"] is None and created["expiresAt"] is None
    assert created["createdAt"] == created["updatedAt"]
    assert await get(gql, created["id"]) == {**created, "transcript": []}


async def test_create_conversation_stores_the_given_fields(gql: GraphQLClient) -> None:
    metadata = {"token_id": "t-1", "nested": {"a": [1, 2, {"b": None}]}, "ünï": "✓"}
    created = await create(
        gql, title="session", agentSlug="support-bot", metadata=metadata, context="cron"
    )
    stored = await get(gql, created["id"])
    assert stored is not None
    assert stored["title"] == "session"
    assert stored["agentSlug"] == "support-bot"
    assert stored["metadata"] == metadata
    assert stored["context"] == "cron"
    assert stored["interactive"] is False


@pytest.mark.parametrize(
    ("context", "interactive"),
    [
        ("chat", True),
        ("interactive", True),
        ("rest", True),
        ("cron", False),
        ("pipeline", False),
        ("Chat", False),
    ],
)
async def test_interactive_is_true_only_for_chat_interactive_and_rest(
    gql: GraphQLClient, context: str, interactive: bool
) -> None:
    created = await create(gql, context=context)
    stored = await get(gql, created["id"])
    assert stored is not None and stored["interactive"] is interactive


@pytest.mark.parametrize("metadata", [[1, 2], "text", 3])
async def test_create_rejects_metadata_that_is_not_an_object(
    gql: GraphQLClient, metadata: Any
) -> None:
    payload = (await gql(CREATE, {"input": {"metadata": metadata}}))["createConversation"]
    assert payload["conversation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["metadata"])
    ]
    assert (await listing(gql))["totalCount"] == 0


async def test_create_with_an_idempotency_key_twice_returns_the_first_conversation(
    gql: GraphQLClient,
) -> None:
    first = await create(gql, title="one", idempotencyKey="req-42")
    retry = await create(gql, title="one", idempotencyKey="req-42")
    assert retry["id"] == first["id"]
    other = await create(gql, title="two", idempotencyKey="req-43")
    assert other["id"] != first["id"]
    page = await listing(gql)
    assert page["totalCount"] == 2
    assert {e["node"]["id"] for e in page["edges"]} == {first["id"], other["id"]}


@pytest.mark.parametrize("key", ["", "   "])
async def test_a_blank_idempotency_key_is_refused(gql: GraphQLClient, key: str) -> None:
    payload = (await gql(CREATE, {"input": {"idempotencyKey": key}}))["createConversation"]
    assert payload["conversation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["idempotencyKey"])
    ]
    assert (await listing(gql))["totalCount"] == 0


async def test_concurrent_creates_with_one_idempotency_key_make_one_conversation(
    gql: GraphQLClient,
) -> None:
    created = await asyncio.gather(*[create(gql, idempotencyKey="burst") for _ in range(8)])
    assert len({c["id"] for c in created}) == 1
    assert (await listing(gql))["totalCount"] == 1


async def test_another_owner_with_the_same_idempotency_key_gets_their_own_conversation(
    server: Server, gql: GraphQLClient
) -> None:
    bob = await other_owner(server, gql)
    mine = await create(gql, title="alice's", idempotencyKey="shared-key")
    theirs = await create(bob, title="bob's", idempotencyKey="shared-key")
    assert theirs["id"] != mine["id"]
    assert theirs["title"] == "bob's"
    assert await list_ids(gql) == [mine["id"]]
    assert await list_ids(bob) == [theirs["id"]]


# -- updateConversation -----------------------------------------------------------------------


async def test_update_conversation_sets_title_metadata_and_provider_fields(
    gql: GraphQLClient,
) -> None:
    created = await create(gql, title="before", metadata={"keep": False})
    payload = (
        await gql(
            UPDATE,
            {
                "input": {
                    "id": created["id"],
                    "title": "after",
                    "metadata": {"keep": True, "n": 1},
                    "provider": "openai",
                    "model": "gpt-5",
                    "providerResponseId": "resp_123",
                }
            },
        )
    )["updateConversation"]
    assert payload["userErrors"] == []
    stored = await get(gql, created["id"])
    assert stored is not None
    assert stored["title"] == "after"
    assert stored["metadata"] == {"keep": True, "n": 1}
    assert (stored["provider"], stored["model"], stored["providerResponseId"]) == (
        "openai",
        "gpt-5",
        "resp_123",
    )
    assert stored["version"] == created["version"] + 1
    assert ts(stored["updatedAt"]) > ts(created["updatedAt"])
    assert stored["createdAt"] == created["createdAt"]


async def test_update_leaves_fields_that_are_not_given_alone(gql: GraphQLClient) -> None:
    created = await create(gql, title="kept", metadata={"a": 1})
    await gql(UPDATE, {"input": {"id": created["id"], "provider": "anthropic"}})
    stored = await get(gql, created["id"])
    assert stored is not None
    assert (stored["title"], stored["metadata"], stored["provider"]) == (
        "kept",
        {"a": 1},
        "anthropic",
    )


async def test_update_with_mark_read_sets_last_read_at(gql: GraphQLClient) -> None:
    created = await create(gql)
    before = datetime.now(UTC)
    payload = (await gql(UPDATE, {"input": {"id": created["id"], "markRead": True}}))[
        "updateConversation"
    ]
    after = datetime.now(UTC)
    assert payload["userErrors"] == []
    stored = await get(gql, created["id"])
    assert stored is not None and stored["lastReadAt"] is not None
    assert before <= ts(stored["lastReadAt"]) <= after


async def test_update_sets_and_clears_expires_at(gql: GraphQLClient) -> None:
    created = await create(gql)
    at = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    await gql(UPDATE, {"input": {"id": created["id"], "expiresAt": at.isoformat()}})
    stored = await get(gql, created["id"])
    assert stored is not None and ts(stored["expiresAt"]) == at
    # One shape for every instant, whole seconds included (they lost their fraction: a
    # fixed-width parser read two formats).
    assert stored["expiresAt"] == at.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00")
    for field in ("createdAt", "updatedAt"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", stored[field])
    await gql(UPDATE, {"input": {"id": created["id"], "expiresAt": None}})
    stored = await get(gql, created["id"])
    assert stored is not None and stored["expiresAt"] is None


async def test_update_rejects_an_expires_at_in_the_past(gql: GraphQLClient) -> None:
    created = await create(gql)
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    payload = (await gql(UPDATE, {"input": {"id": created["id"], "expiresAt": past}}))[
        "updateConversation"
    ]
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["expiresAt"])
    ]
    stored = await get(gql, created["id"])
    assert stored is not None and stored["expiresAt"] is None


async def test_update_with_a_stale_expected_version_conflicts_and_changes_nothing(
    gql: GraphQLClient,
) -> None:
    created = await create(gql, title="original")
    await gql(UPDATE, {"input": {"id": created["id"], "title": "second"}})
    payload = (
        await gql(
            UPDATE,
            {
                "input": {
                    "id": created["id"],
                    "title": "lost",
                    "metadata": {"x": 1},
                    "expectedVersion": created["version"],
                }
            },
        )
    )["updateConversation"]
    assert payload["conversation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("CONFLICT", ["expectedVersion"])
    ]
    stored = await get(gql, created["id"])
    assert stored is not None
    assert (stored["title"], stored["metadata"], stored["version"]) == ("second", {}, 2)


async def test_update_with_the_current_expected_version_succeeds(gql: GraphQLClient) -> None:
    created = await create(gql)
    payload = (
        await gql(UPDATE, {"input": {"id": created["id"], "title": "t", "expectedVersion": 1}})
    )["updateConversation"]
    assert payload["userErrors"] == []
    assert payload["conversation"]["version"] == 2


@pytest.mark.parametrize(
    "bad_id", ["9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60", "not-a-uuid", "", "1' OR '1'='1"]
)
async def test_update_of_an_unknown_or_malformed_id_is_not_found(
    gql: GraphQLClient, bad_id: str
) -> None:
    payload = (await gql(UPDATE, {"input": {"id": bad_id, "title": "x"}}))["updateConversation"]
    assert payload["conversation"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [("NOT_FOUND", ["id"])]


async def test_update_of_another_owners_conversation_is_not_found_and_changes_nothing(
    server: Server, gql: GraphQLClient
) -> None:
    bob = await other_owner(server, gql)
    theirs = await create(bob, title="bob's")
    payload = (await gql(UPDATE, {"input": {"id": theirs["id"], "title": "hijacked"}}))[
        "updateConversation"
    ]
    assert [e["code"] for e in payload["userErrors"]] == ["NOT_FOUND"]
    stored = await get(bob, theirs["id"])
    assert stored is not None and stored["title"] == "bob's" and stored["version"] == 1


# -- conversation(id) -------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60", "garbage", ""])
async def test_conversation_of_an_unknown_or_malformed_id_is_null(
    gql: GraphQLClient, bad_id: str
) -> None:
    assert await get(gql, bad_id) is None


async def test_a_conversation_belongs_to_the_viewers_workspace_and_owner(
    gql: GraphQLClient,
) -> None:
    viewer = (await gql("{ viewer { workspace { type id key } ownerType ownerKey scopes } }"))[
        "viewer"
    ]
    assert viewer == {
        "workspace": {"type": "site", "id": "1", "key": "site:1"},
        "ownerType": "USER",
        "ownerKey": "alice",
        "scopes": ["READ", "WRITE"],
    }
    cid = (await create(gql))["id"]
    data = await gql(
        "query($id: ID!) { conversation(id: $id) { workspace { key } ownerType } }", {"id": cid}
    )
    assert data["conversation"] == {"workspace": {"key": "site:1"}, "ownerType": "USER"}


async def test_conversation_of_another_owner_reads_as_null(
    server: Server, gql: GraphQLClient
) -> None:
    bob = await other_owner(server, gql)
    theirs = await create(bob)
    assert await get(gql, theirs["id"]) is None
    other_workspace = gql.as_(await server.token(workspace="site:2"))
    assert await get(other_workspace, theirs["id"]) is None
    assert (await gql("query($id: ID!) { node(id: $id) { id } }", {"id": theirs["id"]}))[
        "node"
    ] is None


async def test_node_resolves_a_conversation(gql: GraphQLClient) -> None:
    created = await create(gql, title="as node")
    data = await gql(
        "query($id: ID!) { node(id: $id) { __typename id ... on Conversation { title } } }",
        {"id": created["id"]},
    )
    assert data["node"] == {"__typename": "Conversation", "id": created["id"], "title": "as node"}


# -- conversations listing --------------------------------------------------------------------


async def test_conversations_are_listed_newest_first(gql: GraphQLClient) -> None:
    ids = [(await create(gql, title=f"c{i}"))["id"] for i in range(4)]
    assert await list_ids(gql) == list(reversed(ids))


async def test_conversations_filter_by_agent_slug_and_context(gql: GraphQLClient) -> None:
    a_chat = (await create(gql, agentSlug="a", context="chat"))["id"]
    a_cron = (await create(gql, agentSlug="a", context="cron"))["id"]
    b_chat = (await create(gql, agentSlug="b", context="chat"))["id"]
    plain = (await create(gql))["id"]
    assert await list_ids(gql, filter={"agentSlug": "a"}) == [a_cron, a_chat]
    assert await list_ids(gql, filter={"context": "chat"}) == [plain, b_chat, a_chat]
    assert await list_ids(gql, filter={"agentSlug": "a", "context": "chat"}) == [a_chat]
    assert await list_ids(gql, filter={"agentSlug": ""}) == [plain]
    page = await listing(gql, filter={"agentSlug": "missing"})
    assert page["edges"] == [] and page["totalCount"] == 0


async def test_conversations_filter_by_creation_time(gql: GraphQLClient) -> None:
    first, second, third = [await create(gql) for _ in range(3)]
    after_first = {"createdAfter": first["createdAt"]}
    assert await list_ids(gql, filter=after_first) == [third["id"], second["id"]]
    before_third = {"createdBefore": third["createdAt"]}
    assert await list_ids(gql, filter=before_third) == [second["id"], first["id"]]
    between = {"createdAfter": first["createdAt"], "createdBefore": third["createdAt"]}
    page = await listing(gql, filter=between)
    assert [e["node"]["id"] for e in page["edges"]] == [second["id"]]
    assert page["totalCount"] == 1


async def test_conversations_root_only_hides_delegation_children(gql: GraphQLClient) -> None:
    root = (await create(gql, title="root"))["id"]
    child = (await delegate(gql, root))["childConversation"]["id"]
    assert set(await list_ids(gql)) == {root, child}
    assert await list_ids(gql, filter={"rootOnly": True}) == [root]
    assert (await listing(gql, filter={"rootOnly": True}))["totalCount"] == 1


async def test_conversations_list_only_the_callers_own(server: Server, gql: GraphQLClient) -> None:
    mine = (await create(gql))["id"]
    bob = await other_owner(server, gql)
    await create(bob)
    page = await listing(gql)
    assert [e["node"]["id"] for e in page["edges"]] == [mine]
    assert page["totalCount"] == 1


async def test_conversations_pages_with_first_and_after(gql: GraphQLClient) -> None:
    ids = list(reversed([(await create(gql))["id"] for _ in range(5)]))
    seen: list[str] = []
    after = None
    pages = []
    while True:
        page = await listing(gql, first=2, after=after)
        pages.append(page)
        seen += [e["node"]["id"] for e in page["edges"]]
        assert page["totalCount"] == 5
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
        assert after == page["edges"][-1]["cursor"]
    assert seen == ids
    assert [len(p["edges"]) for p in pages] == [2, 2, 1]
    assert pages[0]["pageInfo"]["hasPreviousPage"] is False
    assert pages[1]["pageInfo"]["hasPreviousPage"] is True
    assert pages[0]["pageInfo"]["startCursor"] == pages[0]["edges"][0]["cursor"]


async def test_has_previous_page_says_whether_a_listed_conversation_is_at_or_past_the_cursor(
    gql: GraphQLClient,
) -> None:
    """hasPreviousPage was true whenever a cursor was given: after the conversations at and
    before it were deleted, a page after an old cursor said there was something newer of
    nothing (the Relay spec allows true only where such edges exist)."""
    older, newer = (await create(gql))["id"], (await create(gql))["id"]
    cursor = (await listing(gql, first=1))["pageInfo"]["endCursor"]
    page = await listing(gql, after=cursor)
    assert ([e["node"]["id"] for e in page["edges"]], page["pageInfo"]["hasPreviousPage"]) == (
        [older],
        True,
    )
    # A filter that leaves out what is at or past the cursor leaves nothing before the page.
    await append(gql, older, [{"role": "user", "content": "needle"}])
    searched = await listing(gql, after=cursor, filter={"search": "needle"})
    assert [e["node"]["id"] for e in searched["edges"]] == [older]
    assert searched["pageInfo"]["hasPreviousPage"] is False
    await append(gql, newer, [{"role": "user", "content": "needle"}])
    searched = await listing(gql, after=cursor, filter={"search": "needle"})
    assert searched["pageInfo"]["hasPreviousPage"] is True

    assert (await gql(DELETE, {"id": newer}))["deleteConversation"]["deleted"] is True
    gone = await listing(gql, after=cursor)
    assert [e["node"]["id"] for e in gone["edges"]] == [older]
    assert gone["pageInfo"]["hasPreviousPage"] is False
    # A conversation made since is past the cursor: there is something newer again.
    await create(gql)
    assert (await listing(gql, after=cursor))["pageInfo"]["hasPreviousPage"] is True


async def test_conversation_pages_stay_stable_when_new_conversations_arrive(
    gql: GraphQLClient,
) -> None:
    original = list(reversed([(await create(gql))["id"] for _ in range(7)]))
    seen: list[str] = []
    inserted: list[str] = []
    after = None
    while True:
        page = await listing(gql, first=3, after=after)
        seen += [e["node"]["id"] for e in page["edges"]]
        # Newer conversations land at the head of the list while a client pages through it.
        inserted += [(await create(gql))["id"] for _ in range(2)]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == original
    assert len(seen) == len(set(seen))
    assert await list_ids(gql, first=100) == list(reversed(inserted)) + original


async def test_conversations_first_zero_returns_no_edges(gql: GraphQLClient) -> None:
    await create(gql)
    page = await listing(gql, first=0)
    assert page["edges"] == []
    assert page["pageInfo"]["hasNextPage"] is True
    assert page["totalCount"] == 1


async def test_conversations_page_size_is_capped_at_100(gql: GraphQLClient) -> None:
    for _ in range(101):
        await create(gql)
    page = await listing(gql, first=1000)
    assert len(page["edges"]) == 100
    assert page["pageInfo"]["hasNextPage"] is True
    assert page["totalCount"] == 101
    rest = await listing(gql, first=1000, after=page["pageInfo"]["endCursor"])
    assert len(rest["edges"]) == 1
    assert rest["pageInfo"]["hasNextPage"] is False


async def test_conversations_default_page_size_is_50(gql: GraphQLClient) -> None:
    for _ in range(51):
        await create(gql)
    page = (await gql("{ conversations { edges { cursor } pageInfo { hasNextPage } } }"))[
        "conversations"
    ]
    assert len(page["edges"]) == 50 and page["pageInfo"]["hasNextPage"] is True


async def test_conversations_with_a_negative_first_is_an_error(gql: GraphQLClient) -> None:
    response = await gql.post(LIST, {"first": -1})
    assert response.status_code == 200
    body = response.json()
    assert body["data"] is None
    assert error_codes(body) == ["INVALID_INPUT"]
    assert "first" in body["errors"][0]["message"]


def forge_cursor(*parts: Any) -> str:
    """A cursor in the server's encoding holding what a client made up."""
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "",
        "!!!",
        forge_cursor(),
        forge_cursor(1, 2, 3),
        forge_cursor("not-a-date", "9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60"),
        forge_cursor("2024-01-01T00:00:00+00:00", "not-a-uuid"),
        forge_cursor("2024-01-01T00:00:00+00:00", "\u0000"),
        forge_cursor("2024-01-01T00:00:00+00:00", 12),
        forge_cursor(None, "9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60"),
    ],
)
async def test_conversations_with_a_bad_cursor_is_an_error(gql: GraphQLClient, cursor: str) -> None:
    await create(gql)
    response = await gql.post(LIST, {"after": cursor})
    assert response.status_code == 200
    body = response.json()
    assert body["data"] is None
    assert error_codes(body) == ["INVALID_INPUT"]


async def test_conversations_filter_values_holding_nul_match_nothing(gql: GraphQLClient) -> None:
    await create(gql, agentSlug="a")
    for filter in ({"agentSlug": "a\u0000"}, {"context": "chat\u0000"}):
        page = await listing(gql, filter=filter)
        assert page["edges"] == [] and page["totalCount"] == 0


# -- search -----------------------------------------------------------------------------------


async def test_search_finds_conversations_by_words_in_their_messages(
    gql: GraphQLClient,
) -> None:
    weather = (await create(gql, title="weather"))["id"]
    cooking = (await create(gql, title="cooking"))["id"]
    await append(gql, weather, [{"role": "user", "content": "Will it rain in Lisbon tomorrow?"}])
    await append(
        gql,
        cooking,
        [
            {"role": "user", "content": "How long do I boil an egg?"},
            {"role": "assistant", "content": [{"type": "text", "text": "About nine minutes."}]},
        ],
    )
    assert await list_ids(gql, filter={"search": "lisbon"}) == [weather]
    assert await list_ids(gql, filter={"search": "boil egg"}) == [cooking]
    assert await list_ids(gql, filter={"search": "minutes"}) == [cooking]
    assert await list_ids(gql, filter={"search": "rain egg"}) == []
    assert await list_ids(gql, filter={"search": "unrelated"}) == []
    page = await listing(gql, filter={"search": "lisbon"})
    assert page["totalCount"] == 1


async def test_search_combines_with_other_filters(gql: GraphQLClient) -> None:
    a = (await create(gql, agentSlug="a"))["id"]
    b = (await create(gql, agentSlug="b"))["id"]
    for cid in (a, b):
        await append(gql, cid, [{"role": "user", "content": "quarterly revenue report"}])
    assert await list_ids(gql, filter={"search": "revenue"}) == [b, a]
    assert await list_ids(gql, filter={"search": "revenue", "agentSlug": "a"}) == [a]


async def test_search_no_longer_finds_a_message_replace_transcript_removed(
    gql: GraphQLClient,
) -> None:
    cid = (await create(gql))["id"]
    kept = {"role": "user", "content": "hello there"}
    await append(gql, cid, [kept, {"role": "assistant", "content": "the password is swordfish"}])
    assert await list_ids(gql, filter={"search": "swordfish"}) == [cid]
    payload = await replace(gql, cid, [kept, {"role": "assistant", "content": "redacted"}])
    assert payload["userErrors"] == []
    assert await list_ids(gql, filter={"search": "swordfish"}) == []
    assert await list_ids(gql, filter={"search": "redacted"}) == [cid]
    assert await list_ids(gql, filter={"search": "hello"}) == [cid]


@pytest.mark.parametrize(
    ("many_hits", "window"),
    [(1_000, 2_000), (1, 3), (1, 100)],
    ids=["hits-first", "walk-then-hits-first", "walk-only"],
)
async def test_search_pages_are_the_same_whichever_way_they_are_found(
    gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch, many_hits: int, window: int
) -> None:
    """On SQLite a word with many hits is found by walking the conversations in page order
    through a window, then hits first past it; every page is what hits first gives, and so
    is whether a match is before it."""
    from graph.store.repository import search

    monkeypatch.setattr(search, "WALK_ABOVE_HITS", many_hits)
    monkeypatch.setattr(search, "WALK_WINDOW", window)
    created = [(await create(gql, title=f"c{i}"))["id"] for i in range(10)]
    # Matches among the newest, past the window of 3, and in the oldest; one with two hits.
    matching = {created[i] for i in (0, 1, 4, 6, 9)}
    for cid in created:
        content = "a note on ochre pigments" if cid in matching else "a note on umber"
        await append(gql, cid, [{"role": "user", "content": content}])
    await append(gql, created[6], [{"role": "user", "content": "ochre again"}])
    expected = [cid for cid in reversed(created) if cid in matching]
    seen: list[str] = []
    after = None
    while True:
        page = await listing(gql, filter={"search": "ochre"}, first=2, after=after)
        # Before the page: the matches seen already (found the other way round).
        assert page["pageInfo"]["hasPreviousPage"] is bool(seen)
        seen += [edge["node"]["id"] for edge in page["edges"]]
        assert page["totalCount"] == len(expected)
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == expected
    assert await list_ids(gql, filter={"search": "umber"}, first=20) == [
        cid for cid in reversed(created) if cid not in matching
    ]
    assert await list_ids(gql, filter={"search": "ochre umber"}) == []


async def test_search_only_finds_the_callers_conversations(
    server: Server, gql: GraphQLClient
) -> None:
    bob = await other_owner(server, gql)
    theirs = (await create(bob))["id"]
    await append(bob, theirs, [{"role": "user", "content": "confidential merger"}])
    assert await list_ids(gql, filter={"search": "merger"}) == []
    assert await list_ids(bob, filter={"search": "merger"}) == [theirs]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced',
        "foo*",
        "*",
        "NEAR(a b)",
        "a NEAR b",
        "(",
        ")",
        "a AND (b OR",
        "NOT",
        "-x",
        "col:value",
        "^start",
        "a & b | !c",
        "'; DROP TABLE message; --",
        "\u0000",
        "  ",
        "ü*",
        "'",
    ],
)
async def test_search_text_with_query_syntax_characters_does_not_error(
    gql: GraphQLClient, query: str
) -> None:
    cid = (await create(gql))["id"]
    await append(gql, cid, [{"role": "user", "content": "plain words only"}])
    response = await gql.post(LIST, {"filter": {"search": query}})
    assert response.status_code == 200
    body = response.json()
    assert "errors" not in body, body
    assert isinstance(body["data"]["conversations"]["totalCount"], int)


async def test_search_treats_operator_words_as_plain_words(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    await append(gql, cid, [{"role": "user", "content": "meet me NEAR the (old) station"}])
    assert await list_ids(gql, filter={"search": "NEAR station"}) == [cid]
    assert await list_ids(gql, filter={"search": "(old)"}) == [cid]
    assert await list_ids(gql, filter={"search": '"station"'}) == [cid]


# -- deleteConversation -----------------------------------------------------------------------


async def test_delete_conversation_is_idempotent(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    first = (await gql(DELETE, {"id": cid}))["deleteConversation"]
    assert first == {"deleted": True, "userErrors": []}
    assert await get(gql, cid) is None
    second = (await gql(DELETE, {"id": cid}))["deleteConversation"]
    assert second == {"deleted": False, "userErrors": []}


@pytest.mark.parametrize("bad_id", ["9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60", "not-a-uuid"])
async def test_delete_of_an_unknown_id_reports_nothing_deleted(
    gql: GraphQLClient, bad_id: str
) -> None:
    assert (await gql(DELETE, {"id": bad_id}))["deleteConversation"] == {
        "deleted": False,
        "userErrors": [],
    }


async def test_delete_of_another_owners_conversation_deletes_nothing(
    server: Server, gql: GraphQLClient
) -> None:
    bob = await other_owner(server, gql)
    theirs = (await create(bob))["id"]
    assert (await gql(DELETE, {"id": theirs}))["deleteConversation"]["deleted"] is False
    assert await get(bob, theirs) is not None


@pytest.mark.parametrize("depth", [0, 2])
async def test_a_delete_reads_the_conversations_ancestry_once(
    server: Server, gql: GraphQLClient, depth: int
) -> None:
    # As the first write to it in a process (a replica just started, say): nothing cached.
    cid = (await create(gql))["id"]
    for _ in range(depth):
        cid = (await delegate(gql, cid))["childConversation"]["id"]
    event_log._ROOTS.clear()
    async with statements(server) as seen:
        assert (await gql(DELETE, {"id": cid}))["deleteConversation"]["deleted"] is True
    reads = [s for s in seen if s.lstrip().upper().startswith("SELECT CONVERSATION.ANCESTRY")]
    assert len(reads) == 1, reads


async def test_delete_conversation_removes_transcript_snapshots_delegations_and_children(
    server: Server, gql: GraphQLClient
) -> None:
    root = (await create(gql))["id"]
    await append(gql, root, [{"role": "user", "content": "findable-root-word"}])
    snapshot = await save_snapshot(gql, root, [{"role": "user", "content": "before compaction"}])
    delegation = await delegate(gql, root)
    child = delegation["childConversation"]["id"]
    await append(gql, child, [{"role": "assistant", "content": "findable-child-word"}])
    grandchild = (await delegate(gql, child))["childConversation"]["id"]
    survivor = (await create(gql))["id"]
    tree = [root, child, grandchild]
    assert await stored_rows(server, tree) == {
        "conversation": 3,
        "message": 2,
        "snapshot": 1,
        "delegation": 2,
    }

    assert (await gql(DELETE, {"id": root}))["deleteConversation"]["deleted"] is True

    for gone in (root, child, grandchild):
        assert await get(gql, gone) is None
    nodes = await gql(
        "query($s: ID!, $d: ID!) { s: node(id: $s) { id } d: delegation(id: $d) { id } }",
        {"s": snapshot["id"], "d": delegation["id"]},
    )
    assert nodes == {"s": None, "d": None}
    assert await list_ids(gql) == [survivor]
    assert await list_ids(gql, filter={"search": "findable"}) == []
    assert await stored_rows(server, tree) == {
        "conversation": 0,
        "message": 0,
        "snapshot": 0,
        "delegation": 0,
    }


async def test_an_expires_at_without_a_utc_offset_is_read_as_utc(gql: GraphQLClient) -> None:
    future = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0, tzinfo=None)
    created = (await gql(CREATE, {"input": {"expiresAt": future.isoformat()}}))[
        "createConversation"
    ]
    assert created["userErrors"] == []
    assert ts(created["conversation"]["expiresAt"]) == future.replace(tzinfo=UTC)

    # A bare date in the past is an input error on create and update alike, never INTERNAL.
    payload = (await gql(CREATE, {"input": {"expiresAt": "2000-01-01"}}))["createConversation"]
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["expiresAt"])
    ]
    update = {"input": {"id": created["conversation"]["id"], "expiresAt": "2000-01-01T00:00"}}
    payload = (await gql(UPDATE, update))["updateConversation"]
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("INVALID_INPUT", ["expiresAt"])
    ]
    stored = await get(gql, created["conversation"]["id"])
    assert stored is not None and ts(stored["expiresAt"]) == future.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        (CREATE, {"input": {"expiresAt": "next tuesday"}}),
        (CREATE, {"input": {"expiresAt": 20000101}}),
        ('{ conversations(filter: {createdBefore: ""}) { totalCount } }', {}),
        ("{ conversations(filter: {createdAfter: 5}) { totalCount } }", {}),
    ],
)
async def test_a_datetime_that_is_not_iso_8601_is_refused_with_a_reason(
    gql: GraphQLClient, query: str, variables: dict[str, Any]
) -> None:
    body = (await gql.post(query, variables)).json()
    assert body.get("data") is None
    [error] = body["errors"]
    assert "ISO 8601" in error["message"] and "INTERNAL" not in json.dumps(error)


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        (CREATE, {"input": {"expiresAt": "9999-12-31T23:59:59-14:00"}}),
        (
            '{ conversations(filter: {createdAfter: "9999-12-31T23:59:59-01:00"}) { totalCount } }',
            {},
        ),
        (
            '{ conversations(filter: {createdBefore: "0001-01-01T00:00:00+14:00"})'
            " { totalCount } }",
            {},
        ),
    ],
)
async def test_a_datetime_outside_the_years_1_to_9999_in_utc_is_refused_with_a_reason(
    gql: GraphQLClient, query: str, variables: dict[str, Any]
) -> None:
    """A valid text whose instant in UTC no datetime holds: an OverflowError, masked INTERNAL."""
    body = (await gql.post(query, variables)).json()
    assert body.get("data") is None
    [error] = body["errors"]
    assert "9999" in error["message"] and "INTERNAL" not in json.dumps(error)
    assert await gql("{ conversations { totalCount } }") == {"conversations": {"totalCount": 0}}


async def test_a_search_of_many_words_finds_a_message_holding_them_all(
    gql: GraphQLClient,
) -> None:
    words = [f"w{i}" for i in range(MAX_SEARCH_WORDS)]
    cid = (await create(gql))["id"]
    await append(gql, cid, [{"role": "user", "content": " ".join(words)}])
    assert await list_ids(gql, filter={"search": " ".join(reversed(words))}) == [cid]


async def test_a_search_of_too_many_words_is_refused_by_name_and_nothing_else_fails(
    gql: GraphQLClient,
) -> None:
    # On PostgreSQL 200 words were a masked INTERNAL error (the compiler's recursion), and
    # so was one word of 50,000 parts (PostgreSQL's own stack).
    for search in ("w " * 200, "-".join(["a"] * 50_000)):
        await _refused_search(gql, search)


async def _refused_search(gql: GraphQLClient, search: str) -> None:
    response = await gql.post(LIST, {"filter": {"search": search}})
    assert response.status_code == 200
    errors = response.json()["errors"]
    assert [e["extensions"]["code"] for e in errors] == ["LIMIT_EXCEEDED"], errors
    assert errors[0]["extensions"]["field"] == ["filter", "search"]
    assert f"at most {MAX_SEARCH_WORDS} words" in errors[0]["message"]


async def test_one_query_naming_a_record_in_two_spellings_finds_it_under_both(
    gql: GraphQLClient,
) -> None:
    # Before, the two spellings of one id were one key of the batch read, and the first one
    # asked for read as null: a record that exists, answered as missing.
    cid = await operations.create(gql)
    did = (await operations.delegate(gql, cid))["id"]
    data = await gql(
        """query($a: ID!, $b: ID!, $da: ID!, $db: ID!) {
          a: conversation(id: $a) { id } b: conversation(id: $b) { id }
          na: node(id: $a) { id } nb: node(id: $b) { id }
          da: delegation(id: $da) { id } db: delegation(id: $db) { id } }""",
        {"a": cid, "b": cid.upper(), "da": "{" + did + "}", "db": did},
    )
    assert data == {
        "a": {"id": cid},
        "b": {"id": cid},
        "na": {"id": cid},
        "nb": {"id": cid},
        "da": {"id": did},
        "db": {"id": did},
    }
