"""The WordPress Agents API principal conversation store served by convograph, end to end.

`ConversationStore` is what a PHP adapter does: one store per (workspace, owner), whose
token carries both (never the request body, agents-api #477), each method one GraphQL
operation. The flows read every session back through the API.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

from tests.conftest import GraphQLClient, Server

ERRORS = "userErrors { code field message }"
SESSION = """
    id title agentSlug context interactive metadata provider model providerResponseId
    version messageCount pending transcript createdAt updatedAt
    workspace { key } ownerType
"""
UPDATE_SESSION = f"""
mutation($input: ReplaceTranscriptInput!) {{
  replaceTranscript(input: $input) {{ conversation {{ version messageCount }} {ERRORS} }}
}}"""


@dataclass
class ConversationStore:
    """WP_Agent_Principal_Conversation_Store for the (workspace, owner) of the client's token."""

    gql: GraphQLClient

    async def create_session_for_owner(
        self, agent_slug: str = "", metadata: dict[str, Any] | None = None, context: str = "chat"
    ) -> str:
        data = await self.gql(
            f"""mutation($input: CreateConversationInput!) {{
                  createConversation(input: $input) {{ conversation {{ id }} {ERRORS} }}
                }}""",
            {"input": {"agentSlug": agent_slug, "metadata": metadata or {}, "context": context}},
        )
        payload = data["createConversation"]
        return "" if payload["userErrors"] else str(payload["conversation"]["id"])

    async def list_sessions_for_owner(
        self,
        *,
        agent_slug: str | None = None,
        context: str | None = None,
        per_page: int = 50,
        after: str | None = None,
        with_messages: bool = False,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of sessions, newest first, and the cursor of the next page (or None)."""
        messages = "transcript" if with_messages else ""
        data = await self.gql(
            f"""query($filter: ConversationFilter, $first: Int, $after: String) {{
                  conversations(filter: $filter, first: $first, after: $after) {{
                    nodes {{ id agentSlug context metadata {messages} }}
                    pageInfo {{ hasNextPage endCursor }}
                  }}
                }}""",
            {
                "filter": {"agentSlug": agent_slug, "context": context},
                "first": per_page,
                "after": after,
            },
        )
        page = data["conversations"]
        more = page["pageInfo"]["hasNextPage"]
        return page["nodes"], page["pageInfo"]["endCursor"] if more else None

    async def get_recent_pending_session_for_owner(
        self, seconds: int = 600, context: str = "chat", token_id: int | None = None
    ) -> dict[str, Any] | None:
        data = await self.gql(
            f"""query($seconds: Int!, $context: String!, $token: ID) {{
                  recentPendingConversation(
                    withinSeconds: $seconds, context: $context, tokenId: $token
                  ) {{ {SESSION} }}
                }}""",
            {
                "seconds": seconds,
                "context": context,
                "token": None if token_id is None else str(token_id),
            },
        )
        return data["recentPendingConversation"]

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        data = await self.gql(
            f"query($id: ID!) {{ conversation(id: $id) {{ {SESSION} }} }}", {"id": session_id}
        )
        return data["conversation"]

    async def update_session(
        self,
        session_id: str,
        messages: list[dict[str, Any]],
        metadata: dict[str, Any] | None = None,
        provider: str = "",
        model: str = "",
        provider_response_id: str | None = None,
        *,
        expected_version: int | None = None,
    ) -> list[dict[str, Any]]:
        """The complete transcript; returns the userErrors (empty on success)."""
        fields: dict[str, Any] = {
            "conversationId": session_id,
            "messages": messages,
            "provider": provider,
            "model": model,
            "expectedVersion": expected_version,
        }
        if metadata is not None:
            fields["metadata"] = metadata
        if provider_response_id is not None:
            fields["providerResponseId"] = provider_response_id
        data = await self.gql(UPDATE_SESSION, {"input": fields})
        return data["replaceTranscript"]["userErrors"]

    async def update_title(self, session_id: str, title: str) -> bool:
        data = await self.gql(
            f"""mutation($id: ID!, $title: String) {{
                  updateConversation(input: {{id: $id, title: $title}}) {{ {ERRORS} }}
                }}""",
            {"id": session_id, "title": title},
        )
        return not data["updateConversation"]["userErrors"]

    async def delete_session(self, session_id: str) -> bool:
        data = await self.gql(
            f"""mutation($id: ID!) {{
                  deleteConversation(input: {{id: $id}}) {{ deleted {ERRORS} }}
                }}""",
            {"id": session_id},
        )
        payload = data["deleteConversation"]
        assert payload["userErrors"] == []
        return bool(payload["deleted"])

    async def acquire_session_lock(self, session_id: str, ttl: int = 300) -> str | None:
        data = await self.gql(
            f"""mutation($id: ID!, $ttl: Int) {{
                  acquireLock(input: {{conversationId: $id, ttlSeconds: $ttl}}) {{ token {ERRORS} }}
                }}""",
            {"id": session_id, "ttl": ttl},
        )
        return data["acquireLock"]["token"]

    async def release_session_lock(self, session_id: str, token: str) -> bool:
        data = await self.gql(
            f"""mutation($id: ID!, $token: String!) {{
                  releaseLock(input: {{conversationId: $id, token: $token}}) {{ released {ERRORS} }}
                }}""",
            {"id": session_id, "token": token},
        )
        return bool(data["releaseLock"]["released"])


async def store_for(
    server: Server, gql: GraphQLClient, workspace: str = "site:1", owner: str = "user:alice"
) -> ConversationStore:
    return ConversationStore(gql.as_(await server.token(workspace=workspace, owner=owner)))


def envelope(kind: str, role: str, content: Any, **payload: Any) -> dict[str, Any]:
    return {
        "schema": "agents-api.message",
        "version": 1,
        "type": kind,
        "role": role,
        "content": content,
        "payload": payload,
        "metadata": {"ts": "2025-05-01T12:00:00Z"},
    }


ALL_ENVELOPES = [
    envelope("text", "user", "Refund order #1001, please."),
    envelope("tool_call", "assistant", "", tool="orders.lookup", arguments={"id": 1001}),
    envelope("tool_result", "tool", "", tool="orders.lookup", result={"total": 49.9, "paid": True}),
    envelope("input_required", "assistant", "Which card?", fields=["card_last4"]),
    envelope("approval_required", "assistant", "Refund 49.90?", action="refund", amount=4990),
    envelope("delta", "assistant", "Refun", index=0),
    envelope(
        "multimodal_part",
        "user",
        [{"type": "image", "url": "https://example.test/r.png"}],
        mime="image/png",
        bytes=123456789012345678901234567890,
    ),
    envelope("error", "system", "gateway timeout", code=504, retryable=True),
    envelope("final_result", "assistant", "Refunded. 🎉", status="ok", nested={"z": 1, "a": None}),
    {"role": "user", "content": "thanks\u0000!", "metadata": {"channel": "rest", "n": -(2**70)}},
]


async def test_a_retried_request_finds_its_pending_session_instead_of_a_duplicate(
    gql: GraphQLClient, server: Server
) -> None:
    store = await store_for(server, gql)

    async def handle_request(token_id: int, user_text: str) -> str:
        """A REST chat request as the plugin handles it, de-duplicating client retries."""
        pending = await store.get_recent_pending_session_for_owner(60, "rest", token_id)
        if pending is not None:
            return str(pending["id"])
        return await store.create_session_for_owner(
            "support-bot", {"token_id": token_id, "first_message": user_text}, "rest"
        )

    first = await handle_request(12, "hello")
    assert first
    # The client timed out and retries while the first request is still running.
    assert await handle_request(12, "hello") == first
    lock = await store.acquire_session_lock(first, ttl=60)
    assert lock is not None
    assert await store.update_session(first, [envelope("text", "user", "hello")]) == []
    assert await handle_request(12, "hello") == first  # locked: still being answered
    assert (
        await store.update_session(
            first, [envelope("text", "user", "hello"), envelope("text", "assistant", "hi!")]
        )
        == []
    )
    assert await store.release_session_lock(first, lock) is True

    # Answered and unlocked: the next request is a new conversation.
    second = await handle_request(12, "another question")
    assert second and second != first
    # Another API token's request never reuses this one's session.
    third = await handle_request(13, "hello")
    assert third not in (first, second)

    rows, _ = await store.list_sessions_for_owner(context="rest", with_messages=True)
    assert [r["id"] for r in rows] == [third, second, first]
    assert rows[2]["transcript"] == [
        envelope("text", "user", "hello"),
        envelope("text", "assistant", "hi!"),
    ]
    assert rows[2]["metadata"] == {"token_id": 12, "first_message": "hello"}


async def test_a_session_lives_through_create_update_title_and_delete(
    gql: GraphQLClient, server: Server
) -> None:
    store = await store_for(server, gql)
    metadata = {"token_id": 7, "origin": {"url": "https://example.test", "ids": [1, 2, 3]}}
    sid = await store.create_session_for_owner("support-bot", metadata, "chat")
    created = await store.get_session(sid)
    assert created is not None
    assert (created["agentSlug"], created["context"], created["interactive"]) == (
        "support-bot",
        "chat",
        True,
    )
    assert created["metadata"] == metadata
    assert list(created["metadata"]) == ["token_id", "origin"]
    assert (created["workspace"], created["ownerType"]) == ({"key": "site:1"}, "USER")
    assert (created["pending"], created["transcript"], created["title"]) == (True, [], None)

    turns = ALL_ENVELOPES[:2]
    assert (
        await store.update_session(
            sid, turns, provider="openai", model="gpt-4.1", provider_response_id="resp_1"
        )
        == []
    )
    # The complete transcript each time; provider/model change only when non-empty and
    # the response id only when given.
    errors = await store.update_session(
        sid, ALL_ENVELOPES[:3], metadata={"token_id": 7, "summary": "refund"}
    )
    assert errors == []
    stored = await store.get_session(sid)
    assert stored is not None
    assert stored["transcript"] == ALL_ENVELOPES[:3]
    assert stored["messageCount"] == 3
    assert (stored["provider"], stored["model"], stored["providerResponseId"]) == (
        "openai",
        "gpt-4.1",
        "resp_1",
    )
    assert stored["metadata"] == {"token_id": 7, "summary": "refund"}
    assert stored["pending"] is False

    # A compaction may shrink the transcript.
    assert await store.update_session(sid, ALL_ENVELOPES[2:3], model="gpt-4.1-mini") == []
    assert await store.update_title(sid, "Refund for #1001")
    renamed = await store.get_session(sid)
    assert renamed is not None
    assert renamed["transcript"] == ALL_ENVELOPES[2:3]
    assert (renamed["title"], renamed["model"], renamed["provider"]) == (
        "Refund for #1001",
        "gpt-4.1-mini",
        "openai",
    )
    assert renamed["version"] > stored["version"]

    assert await store.delete_session(sid) is True
    assert await store.get_session(sid) is None
    assert await store.delete_session(sid) is False  # idempotent
    assert [e["code"] for e in await store.update_session(sid, turns)] == ["NOT_FOUND"]


async def test_non_interactive_contexts_are_kept_as_given(
    gql: GraphQLClient, server: Server
) -> None:
    store = await store_for(server, gql)
    expected = {"chat": True, "interactive": True, "rest": True, "cron": False, "x-import": False}
    for context, interactive in expected.items():
        session = await store.get_session(await store.create_session_for_owner("", {}, context))
        assert session is not None
        assert (session["context"], session["interactive"], session["agentSlug"]) == (
            context,
            interactive,
            "",
        )


async def test_sessions_list_newest_first_with_filters_and_pages(
    gql: GraphQLClient, server: Server
) -> None:
    store = await store_for(server, gql)
    support = [await store.create_session_for_owner("support", {"i": i}, "chat") for i in range(5)]
    sales = [await store.create_session_for_owner("sales", {"i": i}, "rest") for i in range(2)]
    bare = await store.create_session_for_owner()

    everything, more = await store.list_sessions_for_owner()
    assert [r["id"] for r in everything] == [bare, *sales[::-1], *support[::-1]]
    assert more is None
    rows, _ = await store.list_sessions_for_owner(agent_slug="support")
    assert [r["id"] for r in rows] == support[::-1]
    rows, _ = await store.list_sessions_for_owner(context="rest")
    assert [r["id"] for r in rows] == sales[::-1]
    rows, _ = await store.list_sessions_for_owner(agent_slug="", context="chat")
    assert [r["id"] for r in rows] == [bare]
    rows, _ = await store.list_sessions_for_owner(agent_slug="support", context="rest")
    assert rows == []

    # Page through with a page size of 2: every session once, in order.
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        rows, cursor = await store.list_sessions_for_owner(
            agent_slug="support", per_page=2, after=cursor
        )
        seen.extend(r["id"] for r in rows)
        pages += 1
        if cursor is None:
            break
    assert seen == support[::-1]
    assert pages == 3

    # Messages come only when asked for.
    await store.update_session(support[0], ALL_ENVELOPES[:1])
    rows, _ = await store.list_sessions_for_owner(agent_slug="support", with_messages=True)
    assert [r["transcript"] for r in rows] == [[]] * 4 + [ALL_ENVELOPES[:1]]


async def test_two_full_transcript_writers_lose_no_turns(
    gql: GraphQLClient, server: Server
) -> None:
    """agents-api #74/#82: two requests each saved their full transcript and one turn was
    lost. With expectedVersion the slower writer is told, reloads and saves again."""
    store = await store_for(server, gql)
    sid = await store.create_session_for_owner("support-bot")
    base = [envelope("text", "user", "hi"), envelope("text", "assistant", "hello")]
    assert await store.update_session(sid, base) == []

    # Two tabs load the same version, each adds its turn and saves the complete list.
    tab_a = await store.get_session(sid)
    tab_b = await store.get_session(sid)
    assert tab_a is not None and tab_b is not None and tab_a["version"] == tab_b["version"]
    turn_a = envelope("text", "user", "from tab A")
    turn_b = envelope("text", "user", "from tab B")
    results = await asyncio.gather(
        store.update_session(
            sid, [*tab_a["transcript"], turn_a], expected_version=tab_a["version"]
        ),
        store.update_session(
            sid, [*tab_b["transcript"], turn_b], expected_version=tab_b["version"]
        ),
    )
    assert sorted([e["code"] for e in errors] for errors in results) == [[], ["CONFLICT"]]

    # The loser reloads, re-applies its turn on top of the winner's and saves again.
    loser_turn = turn_b if results[0] == [] else turn_a
    fresh = await store.get_session(sid)
    assert fresh is not None
    errors = await store.update_session(
        sid, [*fresh["transcript"], loser_turn], expected_version=fresh["version"]
    )
    assert errors == []
    final = await store.get_session(sid)
    assert final is not None
    assert final["transcript"][:2] == base
    assert sorted(m["content"] for m in final["transcript"][2:]) == ["from tab A", "from tab B"]
    assert final["transcript"][3] == loser_turn
    assert final["messageCount"] == 4

    # A writer holding a stale version is refused outright, and nothing is lost.
    stale = await store.update_session(sid, base, expected_version=final["version"] - 1)
    assert [(e["code"], e["field"]) for e in stale] == [("CONFLICT", ["expectedVersion"])]
    assert (await store.get_session(sid) or {})["messageCount"] == 4


async def test_a_lock_serialises_writers_and_survives_a_late_holder(
    gql: GraphQLClient, server: Server
) -> None:
    store = await store_for(server, gql)
    sid = await store.create_session_for_owner("support-bot")
    worker_a = await store.acquire_session_lock(sid, ttl=1)
    assert worker_a is not None
    assert await store.acquire_session_lock(sid) is None  # worker B must wait

    # Worker A stalls past its TTL; worker B takes the lock over and writes.
    await asyncio.sleep(1.2)
    worker_b = await store.acquire_session_lock(sid, ttl=60)
    assert worker_b is not None
    assert await store.update_session(sid, [envelope("text", "assistant", "from B")]) == []

    # agents-api #470: A, back late, releases with its stale token; B keeps the lock.
    assert await store.release_session_lock(sid, worker_a) is False
    held = await store.get_session(sid)
    assert held is not None and held["pending"] is True
    assert await store.acquire_session_lock(sid) is None
    assert await store.release_session_lock(sid, worker_b) is True
    done = await store.get_session(sid)
    assert done is not None and done["pending"] is False
    assert done["transcript"] == [envelope("text", "assistant", "from B")]


async def test_message_envelopes_are_stored_losslessly(gql: GraphQLClient, server: Server) -> None:
    store = await store_for(server, gql)
    sid = await store.create_session_for_owner("support-bot")
    assert await store.update_session(sid, copy.deepcopy(ALL_ENVELOPES)) == []
    data = await store.gql(
        """query($id: ID!) { conversation(id: $id) {
             transcript messages(first: 20) { nodes { seq role content data } } } }""",
        {"id": sid},
    )
    conversation = data["conversation"]
    assert conversation["transcript"] == ALL_ENVELOPES
    nodes = conversation["messages"]["nodes"]
    assert [n["data"] for n in nodes] == ALL_ENVELOPES
    assert [list(n["data"]) for n in nodes] == [list(m) for m in ALL_ENVELOPES]
    assert [n["seq"] for n in nodes] == list(range(1, len(ALL_ENVELOPES) + 1))
    assert [n["role"] for n in nodes] == [m["role"] for m in ALL_ENVELOPES]
    assert [n["content"] for n in nodes] == [m["content"] for m in ALL_ENVELOPES]
    assert nodes[6]["data"]["payload"]["bytes"] == 123456789012345678901234567890
    assert nodes[9]["data"]["content"] == "thanks\u0000!"

    # Saving the same complete transcript again changes nothing that was stored.
    before = await store.get_session(sid)
    assert await store.update_session(sid, copy.deepcopy(ALL_ENVELOPES)) == []
    after = await store.get_session(sid)
    assert after is not None and before is not None
    assert after["transcript"] == before["transcript"]


async def test_sessions_are_scoped_to_workspace_owner_type_and_key(
    gql: GraphQLClient, server: Server
) -> None:
    alice = await store_for(server, gql)
    principals = {
        "audience alice": await store_for(server, gql, owner="audience:alice"),
        "alice on site 2": await store_for(server, gql, workspace="site:2"),
        "bob": await store_for(server, gql, owner="user:bob"),
        "token 12": await store_for(server, gql, owner="token:12"),
    }
    sid = await alice.create_session_for_owner("support-bot", {"token_id": 12})
    theirs = {
        name: await s.create_session_for_owner("support-bot") for name, s in principals.items()
    }

    rows, _ = await alice.list_sessions_for_owner()
    assert [r["id"] for r in rows] == [sid]
    for name, store in principals.items():
        rows, _ = await store.list_sessions_for_owner()
        assert [r["id"] for r in rows] == [theirs[name]], name
        assert await store.get_session(sid) is None, name
        assert await store.delete_session(sid) is False, name
        assert [e["code"] for e in await store.update_session(sid, ALL_ENVELOPES[:1])] == [
            "NOT_FOUND"
        ]
        assert await store.acquire_session_lock(sid) is None, name
        assert await store.get_recent_pending_session_for_owner(token_id=12) is None, name
    assert await alice.get_session(sid) is not None

    # The workspace scope is normalised (type lower-cased, both parts trimmed) ...
    same_site = await store_for(server, gql, workspace=" SITE : 1 ")
    assert [r["id"] for r in (await same_site.list_sessions_for_owner())[0]] == [sid]
    # ... and an owner named in the request never widens a non-admin's reads (#477).
    data = await alice.gql(
        """{ conversations(filter: {owner: {type: USER, key: "bob"}}) { nodes { id } } }"""
    )
    assert [n["id"] for n in data["conversations"]["nodes"]] == [sid]
