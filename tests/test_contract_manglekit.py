"""Manglekit's DurableStateManager served by convograph, end to end.

`DurableStateManager` below is what a Go provider does over the API: Checkpoint after a
Reflect that said PROCEED, Hydrate (nil on a first run), Delete (idempotent), ExtractFacts.
The agent loop drives it as Manglekit's does and a "restarted process" hydrates from it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import GraphQLClient, Server

ERRORS = "userErrors { code field message }"


class StateError(Exception):
    """What the Go provider returns as `error`: the userError code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass
class Hydrated:
    """core.SessionState as Hydrate rebuilds it, with the fields it re-primes the engine from."""

    state: dict[str, Any]
    version: int
    logical_facts: list[str]
    feedback_history: list[str]
    payload_type: str | None


@dataclass
class DurableStateManager:
    gql: GraphQLClient

    async def checkpoint(self, state: dict[str, Any], outcome: str = "PROCEED") -> int:
        data = await self.gql(
            f"""mutation($input: CheckpointSessionInput!) {{
                  checkpointSession(input: $input) {{ sessionState {{ version }} {ERRORS} }}
                }}""",
            {
                "input": {
                    "sessionId": state.get("session_id", ""),
                    "state": state,
                    "outcome": outcome,
                }
            },
        )
        payload = data["checkpointSession"]
        if payload["userErrors"]:
            error = payload["userErrors"][0]
            raise StateError(error["code"], error["message"])
        return int(payload["sessionState"]["version"])

    async def hydrate(self, session_id: str) -> Hydrated | None:
        data = await self.gql(
            """query($id: String!) { sessionState(sessionId: $id) {
                 version state logicalFacts feedbackHistory payloadType } }""",
            {"id": session_id},
        )
        found = data["sessionState"]
        if found is None:
            return None  # first run: nil, nil
        return Hydrated(
            found["state"],
            found["version"],
            found["logicalFacts"],
            found["feedbackHistory"],
            found["payloadType"],
        )

    async def delete(self, session_id: str) -> None:
        data = await self.gql(
            f"""mutation($id: String!) {{
                  deleteSessionState(input: {{sessionId: $id}}) {{ deleted {ERRORS} }}
                }}""",
            {"id": session_id},
        )
        assert data["deleteSessionState"]["userErrors"] == []

    async def extract_facts(self, envelope: dict[str, Any]) -> list[str]:
        data = await self.gql("query($e: JSON!) { extractFacts(envelope: $e) }", {"e": envelope})
        return data["extractFacts"]


def envelope(step: int) -> dict[str, Any]:
    return {
        "id": f"env-{step}",
        "data": {"ticket": {"id": 1000 + step, "priority": "high", "amount": 12345678901234567890}},
        "metadata": {"source": "email", "step": str(step)},
        "facts": [f"ticket({1000 + step}).", f'priority({1000 + step}, "high").'],
        "content_type": "JSON" if step % 2 else "STRUCT",
        "security_labels": ["pii", "finance"],
    }


@dataclass
class AgentLoop:
    """Perceive -> Reason -> Reflect -> (Checkpoint only on PROCEED), as Manglekit runs it."""

    manager: DurableStateManager
    session_id: str
    state: dict[str, Any] | None = None

    async def start(self) -> None:
        hydrated = await self.manager.hydrate(self.session_id)
        self.state = (
            hydrated.state
            if hydrated is not None
            else {
                "session_id": self.session_id,
                "execution_context": {
                    "retry_count": 0,
                    "feedback_history": [],
                    "current_history": [],
                },
                "logical_facts": [],
                "payload_type": "support.Ticket",
                "audit_records": [],
            }
        )

    async def step(self, n: int, reflect: str) -> bool:
        """One turn; returns whether it was checkpointed."""
        assert self.state is not None
        state = copy.deepcopy(self.state)
        env = envelope(n)
        state["active_envelope"] = env
        state["logical_facts"] = await self.manager.extract_facts(env)
        context = state["execution_context"]
        context["current_history"].append({"role": "user", "content": f"message {n}"})
        if reflect == "RETRY":
            context["retry_count"] += 1
            context["feedback_history"].append(f"step {n}: policy asked for a retry")
        state["audit_records"] = [
            {
                "step": f"reflect-{n}",
                "rules": ["policy.escalate"],
                "outcome": reflect,
                "timestamp": f"2025-03-01T10:00:0{n}Z",
                "latency_ms": 3.25,
                "fact_count": len(state["logical_facts"]),
                "matched_count": 1,
            }
        ]
        self.state = state
        if reflect != "PROCEED":
            return False  # a poisoned state is never persisted
        await self.manager.checkpoint(state)
        return True


async def test_a_session_survives_a_restart_with_every_checkpoint_kept(
    gql: GraphQLClient,
) -> None:
    manager = DurableStateManager(gql)
    loop = AgentLoop(manager, "ticket-1001")
    await loop.start()  # first run: Hydrate is nil, not an error
    assert await manager.hydrate("ticket-1001") is None

    assert await loop.step(1, "PROCEED") is True
    assert await loop.step(2, "RETRY") is False
    assert await loop.step(3, "PROCEED") is True
    last_good = copy.deepcopy(loop.state)
    assert await loop.step(4, "HALT") is False  # the process dies after this

    restarted = AgentLoop(DurableStateManager(gql), "ticket-1001")
    await restarted.start()
    hydrated = await manager.hydrate("ticket-1001")
    assert hydrated is not None
    assert hydrated.version == 2
    assert hydrated.state == last_good
    assert restarted.state == last_good
    assert list(hydrated.state) == list(last_good or {})  # exactly as stored, key order too
    assert hydrated.state["active_envelope"]["data"]["ticket"]["amount"] == 12345678901234567890
    # Engine priming and feedback alignment come straight from the stored document.
    assert hydrated.logical_facts == ["ticket(1003).", 'priority(1003, "high").']
    assert hydrated.feedback_history == ["step 2: policy asked for a retry"]
    assert hydrated.payload_type == "support.Ticket"

    # The original keeps only the last record; convograph keeps each checkpoint's audit trail.
    data = await gql(
        """query { sessionStateHistory(sessionId: "ticket-1001") {
             totalCount nodes { version outcome state } } }"""
    )
    history = data["sessionStateHistory"]
    assert history["totalCount"] == 2
    assert [n["version"] for n in history["nodes"]] == [2, 1]
    assert [n["state"]["audit_records"][0]["step"] for n in history["nodes"]] == [
        "reflect-3",
        "reflect-1",
    ]
    assert {n["outcome"] for n in history["nodes"]} == {"PROCEED"}

    # The restarted loop carries on from where it was.
    assert await restarted.step(5, "PROCEED") is True
    latest = await manager.hydrate("ticket-1001")
    assert latest is not None and latest.version == 3
    assert [m["content"] for m in latest.state["execution_context"]["current_history"]] == [
        "message 1",
        "message 2",
        "message 3",
        "message 5",
    ]


async def test_a_loop_that_checkpoints_a_poisoned_state_is_refused(gql: GraphQLClient) -> None:
    manager = DurableStateManager(gql)
    loop = AgentLoop(manager, "s-poison")
    await loop.start()
    await loop.step(1, "PROCEED")
    assert loop.state is not None
    poisoned = copy.deepcopy(loop.state)
    poisoned["active_envelope"] = envelope(2)
    for outcome in ("HALT", "RETRY", "ROUTE"):
        with pytest.raises(StateError) as refused:
            await manager.checkpoint(poisoned, outcome)
        assert refused.value.code == "POISONED_STATE"
    hydrated = await manager.hydrate("s-poison")
    assert hydrated is not None and hydrated.version == 1
    assert hydrated.state["active_envelope"]["id"] == "env-1"


async def test_checkpoint_validates_the_document_as_manglekit_does(gql: GraphQLClient) -> None:
    manager = DurableStateManager(gql)
    invalid: list[Any] = [
        {"active_envelope": {"id": "e"}},  # no session_id
        {"session_id": "s", "active_envelope": {"id": ""}},
        {"session_id": "s", "active_envelope": {}},
        {"session_id": "s"},
        # Go's envelope whose id was never set, in any spelling.
        {"session_id": "s", "active_envelope": {"id": "00000000-0000-0000-0000-000000000000"}},
        {"session_id": "s", "active_envelope": {"id": "{00000000000000000000000000000000}"}},
        {
            "session_id": "s",
            "active_envelope": {"id": "urn:uuid:00000000-0000-0000-0000-000000000000"},
        },
        {"session_id": "s", "active_envelope": {"id": "e"}, "execution_context": 5},
        {
            "session_id": "s",
            "active_envelope": {"id": "e"},
            "execution_context": {"feedback_history": 5},
        },
        {
            "session_id": "s",
            "active_envelope": {"id": "e"},
            "execution_context": {"feedback_history": "abc"},
        },
    ]
    for state in invalid:
        with pytest.raises(StateError) as refused:
            await manager.checkpoint(state)
        assert refused.value.code == "INVALID_INPUT"
    assert await manager.hydrate("s") is None


async def test_delete_is_idempotent_and_the_next_run_is_a_first_run(
    gql: GraphQLClient, server: Server
) -> None:
    manager = DurableStateManager(gql)
    loop = AgentLoop(manager, "s-del")
    await loop.start()
    await loop.step(1, "PROCEED")
    await loop.step(2, "PROCEED")
    await manager.delete("s-del")
    await manager.delete("s-del")
    await manager.delete("never-was")
    assert await manager.hydrate("s-del") is None
    again = AgentLoop(manager, "s-del")
    await again.start()
    assert again.state is not None and "active_envelope" not in again.state

    # Another principal's Delete of the same session id touches nothing of ours.
    await loop.step(3, "PROCEED")
    other = DurableStateManager(gql.as_(await server.token(owner="runtime:worker-2")))
    await other.delete("s-del")
    assert await other.hydrate("s-del") is None
    kept = await manager.hydrate("s-del")
    assert kept is not None and kept.state["active_envelope"]["id"] == "env-3"


async def test_extract_facts_reads_the_envelopes_facts(gql: GraphQLClient) -> None:
    manager = DurableStateManager(gql)
    assert await manager.extract_facts(envelope(7)) == ["ticket(1007).", 'priority(1007, "high").']
    assert await manager.extract_facts({"id": "no-facts", "data": {}}) == []
