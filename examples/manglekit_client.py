"""Manglekit's DurableStateManager over convograph, end to end.

Each step is one method of Manglekit's Go `DurableStateManager` and the single GraphQL
operation that serves it. Run against a server with a WRITE token:

    python examples/manglekit_client.py http://127.0.0.1:8000/graphql cvg_…
"""

from __future__ import annotations

import uuid
from typing import Any

from graphql_client import Client, check, run

ERRORS = "userErrors { code field message }"

HYDRATE = """query($sessionId: String!) {
  sessionState(sessionId: $sessionId) {
    version state logicalFacts feedbackHistory payloadType } }"""
CHECKPOINT = f"""mutation($sessionId: String!, $state: JSON!, $outcome: ReflectOutcome,
                   $expectedVersion: Int) {{
  checkpointSession(input: {{sessionId: $sessionId, state: $state, outcome: $outcome,
                             expectedVersion: $expectedVersion}}) {{
    sessionState {{ version }} {ERRORS} }} }}"""
HISTORY = """query($sessionId: String!) {
  sessionStateHistory(sessionId: $sessionId) { totalCount nodes { version outcome } } }"""
EXTRACT_FACTS = """query($envelope: JSON!) { extractFacts(envelope: $envelope) }"""
DELETE = f"""mutation($sessionId: String!) {{
  deleteSessionState(input: {{sessionId: $sessionId}}) {{ deleted {ERRORS} }} }}"""


def state(session_id: str, step: int, feedback: list[str]) -> dict[str, Any]:
    """A SessionState document as Manglekit's loop checkpoints it."""
    return {
        "session_id": session_id,
        "active_envelope": {
            "id": f"envelope-{step}",
            "data": {"question": "Is alice allowed to refund order 42?"},
            "metadata": {"source": "example"},
            "facts": ["user(alice).", "order(42)."],
            "content_type": "JSON",
            "security_labels": ["internal"],
        },
        "execution_context": {
            "retry_count": 0,
            "feedback_history": feedback,
            "current_history": [{"role": "user", "content": "refund order 42"}],
        },
        "logical_facts": ["user(alice).", "order(42).", f"step({step})."],
        "payload_type": "refund_request",
        "audit_records": [
            {
                "step": step,
                "rules": ["allow_refund"],
                "outcome": "PROCEED",
                "timestamp": "2025-01-01T00:00:00Z",
                "latency_ms": 3,
                "fact_count": 3,
                "matched_count": 1,
            }
        ],
    }


def flow(client: Client) -> None:
    session_id = f"example-{uuid.uuid4().hex[:12]}"

    # Hydrate(session_id) on the first run: null, never an error.
    first = client.query(HYDRATE, sessionId=session_id)["sessionState"]
    check(first is None, f"a new session has no state: {first}")
    print(f"Hydrate({session_id}) -> null (first run)")

    # Checkpoint(state) after Reflect said PROCEED.
    one = state(session_id, 1, [])
    saved = client.mutate(
        CHECKPOINT, "checkpointSession", sessionId=session_id, state=one, outcome="PROCEED"
    )
    check(saved["sessionState"]["version"] == 1, f"first checkpoint: {saved}")
    print("Checkpoint(PROCEED) -> version 1")

    # Anything but PROCEED would persist a poisoned state: refused, nothing written.
    client.mutate(
        CHECKPOINT,
        "checkpointSession",
        expect="POISONED_STATE",
        sessionId=session_id,
        state=state(session_id, 2, ["halted"]),
        outcome="HALT",
    )
    print("Checkpoint(HALT) -> POISONED_STATE, nothing stored")

    # A conditional checkpoint: the next version, and a stale writer refused.
    two = state(session_id, 2, ["checked the refund policy"])
    saved = client.mutate(
        CHECKPOINT, "checkpointSession", sessionId=session_id, state=two, expectedVersion=1
    )
    check(saved["sessionState"]["version"] == 2, f"second checkpoint: {saved}")
    client.mutate(
        CHECKPOINT,
        "checkpointSession",
        expect="CONFLICT",
        sessionId=session_id,
        state=two,
        expectedVersion=1,
    )
    print("Checkpoint(expectedVersion 1) -> version 2; again with version 1 -> CONFLICT")

    # Hydrate(session_id): the latest state exactly as stored, and what re-primes the engine.
    hydrated = client.query(HYDRATE, sessionId=session_id)["sessionState"]
    check(hydrated["version"] == 2 and hydrated["state"] == two, f"hydrated: {hydrated}")
    check(hydrated["logicalFacts"] == two["logical_facts"], f"facts: {hydrated}")
    check(hydrated["feedbackHistory"] == ["checked the refund policy"], f"feedback: {hydrated}")
    print(f"Hydrate -> version 2, facts {hydrated['logicalFacts']}")

    # Every version is kept (Manglekit itself keeps only the last).
    history = client.query(HISTORY, sessionId=session_id)["sessionStateHistory"]
    check([n["version"] for n in history["nodes"]] == [2, 1], f"history: {history}")
    print(f"history -> versions {[n['version'] for n in history['nodes']]}")

    # ExtractFacts(envelope)
    facts = client.query(EXTRACT_FACTS, envelope=two["active_envelope"])["extractFacts"]
    check(facts == ["user(alice).", "order(42)."], f"facts: {facts}")
    print(f"ExtractFacts -> {facts}")

    # Delete(session_id), idempotent; the next Hydrate is a first run again.
    check(client.mutate(DELETE, "deleteSessionState", sessionId=session_id)["deleted"], "delete")
    again = client.mutate(DELETE, "deleteSessionState", sessionId=session_id)
    check(again["deleted"] is False, f"deleting twice: {again}")
    check(client.query(HYDRATE, sessionId=session_id)["sessionState"] is None, "gone")
    print("Delete -> deleted; Delete again -> nothing to delete; Hydrate -> null")


if __name__ == "__main__":
    run(flow)
