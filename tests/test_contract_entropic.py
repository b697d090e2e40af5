"""entropic's StorageInterface served by convograph, end to end.

`EntropicStorage` is what a storage adapter for the C++ engine does: each callback
maps to one GraphQL operation and answers as the callback would (a bool and its
out-parameters). The flows then read every row back through the API.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.conftest import GraphQLClient, Server
from tests.operations import COUNT

ERRORS = "userErrors { code field message }"


@dataclass
class Delegated:
    delegation_id: str
    child_conversation_id: str


@dataclass
class EntropicStorage:
    """The storage callbacks of entropic::StorageInterface over convograph's GraphQL API."""

    gql: GraphQLClient
    # Every userError seen, so a test can say why a callback returned false.
    errors: list[dict[str, Any]] = field(default_factory=list)

    async def _mutate(self, query: str, variables: dict[str, Any], name: str) -> Any:
        payload = (await self.gql(query, variables))[name]
        self.errors.extend(payload["userErrors"])
        return None if payload["userErrors"] else payload

    async def create_conversation(self, title: str) -> str | None:
        payload = await self._mutate(
            f"""mutation($title: String) {{
                  createConversation(input: {{title: $title}}) {{ conversation {{ id }} {ERRORS} }}
                }}""",
            {"title": title},
            "createConversation",
        )
        return None if payload is None else str(payload["conversation"]["id"])

    async def save_conversation(self, conversation_id: str, messages_json: bytes) -> bool:
        """entropic appends the batch it is given; the JSON text goes in as the engine made it."""
        query = f"""mutation($id: ID!, $messages: [JSON!]!) {{
              appendMessages(input: {{conversationId: $id, messages: $messages}}) {{
                messages {{ seq }} {ERRORS}
              }}
            }}"""
        # A C++ adapter splices the engine's bytes into the request body as they are.
        body = (
            b'{"query": '
            + json.dumps(query).encode()
            + b', "variables": {"id": '
            + json.dumps(conversation_id).encode()
            + b', "messages": '
            + messages_json
            + b"}}"
        )
        response = await self.gql.post_body(body)
        if response.status_code != 200:
            self.errors.append({"code": f"HTTP {response.status_code}", "field": None})
            return False
        payload = response.json()["data"]["appendMessages"]
        self.errors.extend(payload["userErrors"])
        return not payload["userErrors"]

    async def save_snapshot(self, conversation_id: str, messages_json: str) -> bool:
        payload = await self._mutate(
            f"""mutation($id: ID!, $messages: [JSON!]!) {{
                  saveSnapshot(input: {{conversationId: $id, messages: $messages}}) {{
                    snapshot {{ id }} {ERRORS}
                  }}
                }}""",
            {"id": conversation_id, "messages": json.loads(messages_json)},
            "saveSnapshot",
        )
        return payload is not None

    async def create_delegation(
        self, parent_id: str, delegating_tier: str, target_tier: str, task: str, max_turns: int
    ) -> Delegated | None:
        payload = await self._mutate(
            f"""mutation($input: CreateDelegationInput!) {{
                  createDelegation(input: $input) {{
                    delegation {{ id childConversation {{ id }} }} {ERRORS}
                  }}
                }}""",
            {
                "input": {
                    "parentConversationId": parent_id,
                    "delegatingTier": delegating_tier,
                    "targetTier": target_tier,
                    "task": task,
                    "maxTurns": max_turns,
                }
            },
            "createDelegation",
        )
        if payload is None:
            return None
        delegation = payload["delegation"]
        return Delegated(delegation["id"], delegation["childConversation"]["id"])

    async def complete_delegation(self, delegation_id: str, status: str, summary: str) -> bool:
        payload = await self._mutate(
            f"""mutation($input: CompleteDelegationInput!) {{
                  completeDelegation(input: $input) {{ delegation {{ id }} {ERRORS} }}
                }}""",
            {
                "input": {
                    "delegationId": delegation_id,
                    "status": status.upper(),  # the engine says "completed" / "failed"
                    "summary": summary,
                }
            },
            "completeDelegation",
        )
        return payload is not None

    async def load_delegation_with_messages(self, delegation_id: str) -> str | None:
        data = await self.gql(
            """query($id: ID!) { delegation(id: $id) {
                 id targetTier childConversation { id title transcript } } }""",
            {"id": delegation_id},
        )
        found = data["delegation"]
        if found is None:
            return None
        child = found["childConversation"]
        return json.dumps(
            {
                "delegation_id": found["id"],
                "target_tier": found["targetTier"],
                "messages": child["transcript"],
                "conversation": {"id": child["id"], "title": child["title"]},
            }
        )

    async def latest_delegation_for_target(self, target_tier: str) -> str | None:
        data = await self.gql(
            "query($tier: String!) { latestDelegation(targetTier: $tier) { id } }",
            {"tier": target_tier},
        )
        found = data["latestDelegation"]
        return None if found is None else str(found["id"])

    # Engine tools that read and write through the same API.

    async def resume_delegation(
        self,
        task: str,
        *,
        delegation_id: str | None = None,
        target_tier: str | None = None,
        max_turns: int = 0,
    ) -> Delegated | None:
        fields: dict[str, Any] = {"task": task, "maxTurns": max_turns}
        if delegation_id is not None:
            fields["delegationId"] = delegation_id
        if target_tier is not None:
            fields["targetTier"] = target_tier
        payload = await self._mutate(
            f"""mutation($input: ResumeDelegationInput!) {{
                  resumeDelegation(input: $input) {{
                    delegation {{ id childConversation {{ id }} }} {ERRORS}
                  }}
                }}""",
            {"input": fields},
            "resumeDelegation",
        )
        if payload is None:
            return None
        delegation = payload["delegation"]
        return Delegated(delegation["id"], delegation["childConversation"]["id"])

    async def followup(self, query: str) -> list[dict[str, Any]]:
        data = await self.gql(
            """query($q: String!) { searchDelegations(query: $q) {
                 id targetTier summary completedAt } }""",
            {"q": query},
        )
        return data["searchDelegations"]


def batch(*messages: dict[str, Any]) -> bytes:
    return json.dumps(list(messages)).encode()


TREE = """
query($id: ID!) {
  conversation(id: $id) {
    id title messageCount transcript parentDelegation { id }
    snapshots { totalCount nodes { messageCount messages } }
    delegations {
      totalCount
      nodes {
        id delegatingTier targetTier task maxTurns status summary completedAt
        resumedFrom { id }
        childConversation { id title transcript parentDelegation { id } }
      }
    }
  }
}"""


async def test_an_engine_session_with_delegations_reads_back_whole(gql: GraphQLClient) -> None:
    storage = EntropicStorage(gql)

    # AgentEngine::run() creates the root row first (the gh#48 fix).
    root = await storage.create_conversation("session")
    assert root is not None

    turn1 = (
        {"role": "system", "content": "You are the lead.", "identity_tier": "lead"},
        {"role": "user", "content": "Build a CSV parser with tests.", "token_count": 9},
    )
    turn2 = (
        {
            "role": "assistant",
            "content": "Delegating to coder.",
            "tool_calls": [{"id": "t1", "name": "delegate", "arguments": {"tier": "coder"}}],
            "token_count": 5,
        },
        {"role": "tool", "content": "delegated", "tool_results": [{"id": "t1", "ok": True}]},
    )
    assert await storage.save_conversation(root, batch(*turn1))
    assert await storage.save_conversation(root, batch(*turn2))

    # Compaction: the full history before it is kept as a snapshot.
    history_json = json.dumps([{"role": m["role"], "content": m["content"]} for m in turn1 + turn2])
    assert await storage.save_snapshot(root, history_json)

    coder = await storage.create_delegation(
        root, "lead", "coder", "Write a streaming CSV parser in src/csv.py", 0
    )
    assert coder is not None
    child_messages = (
        {"role": "system", "content": "You are the coder.", "identity_tier": "coder"},
        {"role": "user", "content": "Write a streaming CSV parser in src/csv.py"},
        {"role": "assistant", "content": "Done: src/csv.py", "is_compacted": False},
    )
    assert await storage.save_conversation(coder.child_conversation_id, batch(*child_messages))
    assert await storage.complete_delegation(
        coder.delegation_id, "completed", "Parser written: streaming CSV reader in src/csv.py"
    )

    tester = await storage.create_delegation(root, "lead", "tester", "Test the CSV parser", 3)
    assert tester is not None
    assert await storage.save_conversation(
        tester.child_conversation_id, batch({"role": "assistant", "content": "2 tests fail"})
    )
    assert await storage.complete_delegation(tester.delegation_id, "failed", "CSV tests failing")

    # load_delegation_with_messages: the child transcript exactly as it was saved.
    loaded = await storage.load_delegation_with_messages(coder.delegation_id)
    assert loaded is not None
    result = json.loads(loaded)
    assert result["delegation_id"] == coder.delegation_id
    assert result["target_tier"] == "coder"
    assert result["messages"] == list(child_messages)
    assert result["conversation"]["id"] == coder.child_conversation_id

    # resume_delegation by target: the latest completed delegation to that tier.
    assert await storage.latest_delegation_for_target("coder") == coder.delegation_id
    assert await storage.latest_delegation_for_target("tester") is None  # it failed
    resumed = await storage.resume_delegation("Add quoting support", target_tier="coder")
    assert resumed is not None
    assert await storage.save_conversation(
        resumed.child_conversation_id,
        batch({"role": "assistant", "content": "Quoting added"}),
    )
    assert await storage.complete_delegation(
        resumed.delegation_id, "completed", "CSV parser now handles quoted fields"
    )
    assert await storage.latest_delegation_for_target("coder") == resumed.delegation_id

    # followup: completed summaries only, newest completion first.
    found = await storage.followup("CSV")
    assert [f["id"] for f in found] == [resumed.delegation_id, coder.delegation_id]
    assert await storage.followup("failing") == []
    assert storage.errors == []

    # Read every row back in one query.
    tree = (await gql(TREE, {"id": root}))["conversation"]
    assert tree["title"] == "session"
    assert tree["parentDelegation"] is None
    assert tree["messageCount"] == 4
    assert tree["transcript"] == list(turn1 + turn2)
    assert tree["snapshots"]["totalCount"] == 1
    assert tree["snapshots"]["nodes"][0]["messageCount"] == 4
    assert tree["snapshots"]["nodes"][0]["messages"] == json.loads(history_json)

    delegations = tree["delegations"]["nodes"]
    assert tree["delegations"]["totalCount"] == 3
    assert [d["id"] for d in delegations] == [
        coder.delegation_id,
        tester.delegation_id,
        resumed.delegation_id,
    ]
    first, second, third = delegations
    assert (first["status"], first["maxTurns"], first["delegatingTier"]) == (
        "COMPLETED",
        None,
        "lead",
    )
    assert first["childConversation"]["title"] == (
        "Delegation: coder — Write a streaming CSV parser in src/csv.py"
    )
    assert first["childConversation"]["transcript"] == list(child_messages)
    assert first["childConversation"]["parentDelegation"] == {"id": coder.delegation_id}
    assert (second["status"], second["summary"], second["maxTurns"]) == (
        "FAILED",
        "CSV tests failing",
        3,
    )
    assert third["resumedFrom"] == {"id": coder.delegation_id}
    assert third["childConversation"]["transcript"] == [
        {"role": "system", "content": "You are the coder."},
        {"role": "user", "content": "Write a streaming CSV parser in src/csv.py"},
        {"role": "assistant", "content": "Done: src/csv.py"},
        {"role": "user", "content": "Add quoting support"},
        {"role": "assistant", "content": "Quoting added"},
    ]
    assert all(d["completedAt"] is not None for d in delegations)


async def test_resume_by_delegation_id_seeds_from_that_delegation(gql: GraphQLClient) -> None:
    storage = EntropicStorage(gql)
    root = await storage.create_conversation("session")
    assert root is not None
    first = await storage.create_delegation(root, "lead", "researcher", "Find A", 0)
    second = await storage.create_delegation(root, "lead", "researcher", "Find B", 0)
    assert first is not None and second is not None
    await storage.save_conversation(
        first.child_conversation_id, batch({"role": "assistant", "content": "A"})
    )
    await storage.save_conversation(
        second.child_conversation_id, batch({"role": "assistant", "content": "B"})
    )
    await storage.complete_delegation(first.delegation_id, "completed", "A found")
    await storage.complete_delegation(second.delegation_id, "completed", "B found")

    resumed = await storage.resume_delegation("More on A", delegation_id=first.delegation_id)
    assert resumed is not None
    loaded = json.loads(await storage.load_delegation_with_messages(resumed.delegation_id) or "{}")
    assert loaded["target_tier"] == "researcher"
    assert loaded["messages"] == [
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "More on A"},
    ]


async def test_gh48_a_delegation_without_its_parent_row_fails_loudly(
    gql: GraphQLClient, server: Server
) -> None:
    """Before v2.1.12 the root row was never created and every delegation insert failed
    silently against an empty parent id. convograph refuses it, visibly, and stores nothing."""
    storage = EntropicStorage(gql)
    bob = gql.as_(await server.token(owner="user:bob"))
    bobs_root = await EntropicStorage(bob).create_conversation("session")
    assert bobs_root is not None

    for parent in ("", str(uuid.uuid4()), bobs_root):
        storage.errors.clear()
        made = await storage.create_delegation(parent, "lead", "coder", "orphan task", 0)
        assert made is None
        assert [(e["code"], e["field"]) for e in storage.errors] == [
            ("NOT_FOUND", ["parentConversationId"])
        ]
    assert (await gql(COUNT))["conversations"]["totalCount"] == 0
    assert (await bob(COUNT))["conversations"]["totalCount"] == 1
    assert await storage.latest_delegation_for_target("coder") is None
    assert await storage.followup("orphan") == []

    # With the root row created first, the same call works and is found by follow-ups.
    root = await storage.create_conversation("session")
    assert root is not None
    made = await storage.create_delegation(root, "lead", "coder", "real task", 0)
    assert made is not None
    assert await storage.complete_delegation(made.delegation_id, "completed", "real summary")
    assert [f["id"] for f in await storage.followup("real")] == [made.delegation_id]


async def test_completing_twice_is_refused(gql: GraphQLClient) -> None:
    storage = EntropicStorage(gql)
    root = await storage.create_conversation("session")
    assert root is not None
    made = await storage.create_delegation(root, "lead", "coder", "task", 0)
    assert made is not None
    assert await storage.complete_delegation(made.delegation_id, "completed", "first")
    assert not await storage.complete_delegation(made.delegation_id, "failed", "second")
    assert [e["code"] for e in storage.errors] == ["INVALID_TRANSITION"]
    loaded = await gql(
        "query($id: ID!) { delegation(id: $id) { status summary } }", {"id": made.delegation_id}
    )
    assert loaded["delegation"] == {"status": "COMPLETED", "summary": "first"}


async def test_saves_keep_batch_order_and_every_field(gql: GraphQLClient) -> None:
    storage = EntropicStorage(gql)
    root = await storage.create_conversation("session")
    assert root is not None
    # Many messages in one batch share a timestamp: order comes from `seq`, not the clock.
    many = [
        {"role": "user" if i % 2 else "assistant", "content": f"m{i}", "n": i} for i in range(60)
    ]
    assert await storage.save_conversation(root, json.dumps(many[:30]).encode())
    assert await storage.save_conversation(root, json.dumps(many[30:]).encode())
    data = await gql(
        """query($id: ID!) {
             conversation(id: $id) { transcript messages(last: 3) { nodes { seq } } }
           }""",
        {"id": root},
    )
    assert data["conversation"]["transcript"] == many
    assert [n["seq"] for n in data["conversation"]["messages"]["nodes"]] == [58, 59, 60]


async def test_invalid_utf8_from_the_engine_is_rejected_and_nothing_is_stored(
    gql: GraphQLClient,
) -> None:
    storage = EntropicStorage(gql)
    root = await storage.create_conversation("session")
    assert root is not None
    assert await storage.save_conversation(root, batch({"role": "user", "content": "ok"}))
    broken = b'[{"role": "assistant", "content": "bad \xff\xfe bytes"}]'
    lone_surrogate = b'[{"role": "assistant", "content": "bad \\ud800 escape"}]'
    for messages_json in (broken, lone_surrogate):
        storage.errors.clear()
        assert not await storage.save_conversation(root, messages_json)
        assert len(storage.errors) == 1
    data = await gql("query($id: ID!) { conversation(id: $id) { transcript } }", {"id": root})
    assert data["conversation"]["transcript"] == [{"role": "user", "content": "ok"}]
