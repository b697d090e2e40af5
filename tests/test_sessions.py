"""Durable session checkpoints (Manglekit's DurableStateManager) over GraphQL: only PROCEED is
stored, every version is kept, the latest hydrates exactly as it was checkpointed."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import inspect

from graph.settings import Settings
from tests.conftest import GraphQLClient, Server
from tests.migrations import columns_after

ERRORS = "userErrors { code field message }"
FLOOR = "session_version_floor"
STATE_FIELDS = "sessionId version state logicalFacts feedbackHistory payloadType outcome createdAt"
CHECKPOINT = f"""
mutation($input: CheckpointSessionInput!) {{
  checkpointSession(input: $input) {{ sessionState {{ {STATE_FIELDS} }} {ERRORS} }}
}}"""
HYDRATE = f"query($id: String!) {{ sessionState(sessionId: $id) {{ {STATE_FIELDS} }} }}"
HISTORY = f"""
query($id: String!, $first: Int, $after: String) {{
  sessionStateHistory(sessionId: $id, first: $first, after: $after) {{
    totalCount
    nodes {{ {STATE_FIELDS} }}
    edges {{ cursor }}
    pageInfo {{ hasNextPage hasPreviousPage endCursor }}
  }}
}}"""
DELETE = f"""
mutation($id: String!) {{ deleteSessionState(input: {{sessionId: $id}}) {{ deleted {ERRORS} }} }}
"""
EXTRACT = "query($envelope: JSON!) { extractFacts(envelope: $envelope) }"


def session_doc(session_id: str = "sess-1", step: int = 1, **changes: Any) -> dict[str, Any]:
    """A SessionState document with every key Manglekit writes."""
    doc: dict[str, Any] = {
        "session_id": session_id,
        "active_envelope": {
            "id": f"env-{step}",
            "data": {"order": {"id": 42, "total": 19.99, "lines": [1, 2, 3]}},
            "metadata": {"trace": f"t-{step}"},
            "facts": [f"step({step}).", 'user("alice").'],
            "content_type": "STRUCT",
            "security_labels": ["pii"],
        },
        "execution_context": {
            "retry_count": step - 1,
            "feedback_history": [f"feedback {i}" for i in range(1, step + 1)],
            "current_history": [{"role": "user", "content": f"turn {step}"}],
        },
        "logical_facts": [f"fact_{step}(a).", "allowed(alice)."],
        "payload_type": "orders.Order",
        "audit_records": [
            {
                "step": f"reflect-{step}",
                "rules": ["policy.allow"],
                "outcome": "PROCEED",
                "timestamp": f"2025-01-0{step}T00:00:00Z",
                "latency_ms": 12.5,
                "fact_count": 2,
                "matched_count": 1,
            }
        ],
    }
    doc.update(changes)
    return doc


async def checkpoint_payload(
    gql: GraphQLClient,
    state: Any,
    *,
    session_id: str = "sess-1",
    outcome: str | None = None,
    expected_version: int | None = None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {"sessionId": session_id, "state": state}
    if outcome is not None:
        fields["outcome"] = outcome
    if expected_version is not None:
        fields["expectedVersion"] = expected_version
    data = await gql(CHECKPOINT, {"input": fields})
    return data["checkpointSession"]


async def checkpoint(gql: GraphQLClient, state: Any, **kwargs: Any) -> dict[str, Any]:
    payload = await checkpoint_payload(gql, state, **kwargs)
    assert payload["userErrors"] == []
    return payload["sessionState"]


async def hydrate(gql: GraphQLClient, session_id: str = "sess-1") -> dict[str, Any] | None:
    return (await gql(HYDRATE, {"id": session_id}))["sessionState"]


async def history(gql: GraphQLClient, session_id: str = "sess-1", **args: Any) -> dict[str, Any]:
    data = await gql(HISTORY, {"id": session_id, **args})
    return data["sessionStateHistory"]


async def delete(gql: GraphQLClient, session_id: str = "sess-1") -> dict[str, Any]:
    return (await gql(DELETE, {"id": session_id}))["deleteSessionState"]


async def test_first_run_hydrates_to_null(gql: GraphQLClient) -> None:
    assert await hydrate(gql) is None
    empty = await history(gql)
    assert (empty["totalCount"], empty["nodes"], empty["pageInfo"]["hasNextPage"]) == (0, [], False)


async def test_checkpoints_keep_every_version_and_hydrate_the_latest(gql: GraphQLClient) -> None:
    docs = [session_doc(step=i) for i in (1, 2, 3)]
    stored = [await checkpoint(gql, doc) for doc in docs]
    assert [s["version"] for s in stored] == [1, 2, 3]
    assert all(s["outcome"] == "PROCEED" for s in stored)

    latest = await hydrate(gql)
    assert latest == stored[2]
    assert latest is not None
    assert latest["state"] == docs[2]
    assert list(latest["state"]) == list(docs[2])  # key order too: exactly as checkpointed
    assert latest["logicalFacts"] == ["fact_3(a).", "allowed(alice)."]
    assert latest["feedbackHistory"] == ["feedback 1", "feedback 2", "feedback 3"]
    assert latest["payloadType"] == "orders.Order"
    assert latest["sessionId"] == "sess-1"

    # Every earlier version, newest first, with the audit records the original would drop.
    versions = await history(gql)
    assert versions["totalCount"] == 3
    assert [n["version"] for n in versions["nodes"]] == [3, 2, 1]
    assert [n["state"] for n in versions["nodes"]] == docs[::-1]
    assert [n["state"]["audit_records"][0]["step"] for n in versions["nodes"]] == [
        "reflect-3",
        "reflect-2",
        "reflect-1",
    ]


async def test_a_state_round_trips_losslessly(gql: GraphQLClient) -> None:
    doc = session_doc(
        payload_type=None,
        big=123456789012345678901234567890,
        small=-(2**70),
        text='nul \u0000 and emoji 🧭 and quote " and backslash \\',
        floats=[0.1, 1e-7, 1.5e300],
        nested={"z": 1, "a": {"y": [], "b": {}}},
    )
    stored = await checkpoint(gql, doc)
    for read in (stored, await hydrate(gql), (await history(gql))["nodes"][0]):
        assert read is not None
        assert read["state"] == doc
        assert list(read["state"]) == list(doc)
        assert list(read["state"]["nested"]) == ["z", "a"]
        assert read["payloadType"] is None


async def test_checkpoint_without_outcome_means_proceed(gql: GraphQLClient) -> None:
    stored = await checkpoint(gql, session_doc())
    assert stored["outcome"] == "PROCEED"
    explicit = await checkpoint(gql, session_doc(step=2), outcome="PROCEED")
    assert (explicit["version"], explicit["outcome"]) == (2, "PROCEED")


async def test_derived_fields_are_empty_when_the_document_lacks_them(gql: GraphQLClient) -> None:
    doc = {"session_id": "bare", "active_envelope": {"id": "e"}}
    stored = await checkpoint(gql, doc, session_id="bare")
    assert (stored["logicalFacts"], stored["feedbackHistory"], stored["payloadType"]) == (
        [],
        [],
        None,
    )
    assert stored["state"] == doc


@pytest.mark.parametrize("outcome", ["HALT", "RETRY", "ROUTE"])
async def test_a_poisoned_state_is_refused_and_nothing_is_written(
    gql: GraphQLClient, outcome: str
) -> None:
    first = await checkpoint_payload(gql, session_doc(), outcome=outcome)
    assert first["sessionState"] is None
    assert [(e["code"], e["field"]) for e in first["userErrors"]] == [
        ("POISONED_STATE", ["outcome"])
    ]
    assert await hydrate(gql) is None

    good = await checkpoint(gql, session_doc(step=1))
    refused = await checkpoint_payload(gql, session_doc(step=2), outcome=outcome)
    assert [e["code"] for e in refused["userErrors"]] == ["POISONED_STATE"]
    assert await hydrate(gql) == good
    assert (await history(gql))["totalCount"] == 1


def _without(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return doc


def _with(doc: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


DOC = session_doc()


@pytest.mark.parametrize(
    ("session_id", "state", "field"),
    [
        ("sess-1", [DOC], ["state"]),
        ("sess-1", "a string", ["state"]),
        ("sess-1", 7, ["state"]),
        ("sess-1", _without(DOC, "session_id"), ["state", "session_id"]),
        ("sess-1", _with(DOC, "", "session_id"), ["state", "session_id"]),
        ("sess-1", _with(DOC, "another", "session_id"), ["state", "session_id"]),
        ("sess-1", _without(DOC, "active_envelope"), ["state", "active_envelope", "id"]),
        ("sess-1", _with(DOC, "env", "active_envelope"), ["state", "active_envelope", "id"]),
        ("sess-1", _without(DOC, "active_envelope", "id"), ["state", "active_envelope", "id"]),
        ("sess-1", _with(DOC, "", "active_envelope", "id"), ["state", "active_envelope", "id"]),
        ("sess-1", _with(DOC, 5, "active_envelope", "id"), ["state", "active_envelope", "id"]),
        ("", _with(DOC, "", "session_id"), ["sessionId"]),
        ("sess-1", _with(DOC, "fact(a).", "logical_facts"), ["state", "logical_facts"]),
        ("sess-1", _with(DOC, ["ok.", 1], "logical_facts"), ["state", "logical_facts"]),
    ],
)
async def test_an_invalid_document_is_invalid_input_and_nothing_is_written(
    gql: GraphQLClient, session_id: str, state: Any, field: list[str]
) -> None:
    payload = await checkpoint_payload(gql, state, session_id=session_id)
    assert payload["sessionState"] is None
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [("INVALID_INPUT", field)]
    assert await hydrate(gql, session_id) is None
    assert (await history(gql, session_id))["totalCount"] == 0


async def test_expected_version_makes_a_checkpoint_conditional(gql: GraphQLClient) -> None:
    first = await checkpoint(gql, session_doc(step=1), expected_version=0)
    assert first["version"] == 1
    second = await checkpoint(gql, session_doc(step=2), expected_version=1)
    assert second["version"] == 2

    stale = await checkpoint_payload(gql, session_doc(step=3), expected_version=1)
    assert stale["sessionState"] is None
    assert [(e["code"], e["field"]) for e in stale["userErrors"]] == [
        ("CONFLICT", ["expectedVersion"])
    ]
    ahead = await checkpoint_payload(gql, session_doc(step=3), expected_version=5)
    assert [e["code"] for e in ahead["userErrors"]] == ["CONFLICT"]
    assert await hydrate(gql) == second


async def test_racing_conditional_checkpoints_store_exactly_one(gql: GraphQLClient) -> None:
    await checkpoint(gql, session_doc(step=1))
    results = await asyncio.gather(
        *(checkpoint_payload(gql, session_doc(step=i), expected_version=1) for i in range(2, 7))
    )
    winners = [r["sessionState"] for r in results if r["sessionState"] is not None]
    losers = [r["userErrors"][0]["code"] for r in results if r["sessionState"] is None]
    assert len(winners) == 1 and winners[0]["version"] == 2
    assert losers == ["CONFLICT"] * 4
    assert await hydrate(gql) == winners[0]
    assert (await history(gql))["totalCount"] == 2


async def test_racing_unconditional_checkpoints_are_all_kept(gql: GraphQLClient) -> None:
    results = await asyncio.gather(
        *(checkpoint_payload(gql, session_doc(step=i)) for i in range(5))
    )
    assert [r["userErrors"] for r in results] == [[]] * 5
    assert sorted(r["sessionState"]["version"] for r in results) == [1, 2, 3, 4, 5]
    stored = await history(gql)
    assert stored["totalCount"] == 5
    assert sorted(n["state"]["active_envelope"]["id"] for n in stored["nodes"]) == sorted(
        f"env-{i}" for i in range(5)
    )


async def test_history_pages_newest_first(gql: GraphQLClient) -> None:
    for step in range(1, 6):
        await checkpoint(gql, session_doc(step=step))
    page1 = await history(gql, first=2)
    assert [n["version"] for n in page1["nodes"]] == [5, 4]
    assert page1["pageInfo"]["hasNextPage"] is True
    assert page1["pageInfo"]["hasPreviousPage"] is False
    assert page1["totalCount"] == 5
    page2 = await history(gql, first=2, after=page1["pageInfo"]["endCursor"])
    assert [n["version"] for n in page2["nodes"]] == [3, 2]
    assert page2["pageInfo"]["hasPreviousPage"] is True
    page3 = await history(gql, first=2, after=page2["pageInfo"]["endCursor"])
    assert [n["version"] for n in page3["nodes"]] == [1]
    assert page3["pageInfo"]["hasNextPage"] is False
    assert page3["nodes"][0]["state"] == session_doc(step=1)


async def test_a_history_cursor_read_before_a_delete_says_what_is_newer(
    gql: GraphQLClient,
) -> None:
    # Before, hasPreviousPage was true whenever a cursor was given: after the session was
    # deleted, a page after an old cursor said there was something newer of nothing.
    for step in range(1, 4):
        await checkpoint(gql, session_doc(step=step))
    cursor = (await history(gql, first=1))["pageInfo"]["endCursor"]
    assert (await history(gql, after=cursor))["pageInfo"]["hasPreviousPage"] is True
    assert (await delete(gql))["deleted"] is True
    gone = await history(gql, after=cursor)
    assert (gone["nodes"], gone["totalCount"]) == ([], 0)
    assert gone["pageInfo"]["hasPreviousPage"] is False
    # Checkpointed again, the new versions number on past the cursor's: newer again.
    await checkpoint(gql, session_doc(step=4))
    assert (await history(gql, after=cursor))["pageInfo"]["hasPreviousPage"] is True


async def test_a_bad_history_cursor_is_invalid_input(gql: GraphQLClient) -> None:
    response = await gql.post(HISTORY, {"id": "sess-1", "after": "garbage!"})
    assert [e["extensions"]["code"] for e in response.json()["errors"]] == ["INVALID_INPUT"]


async def test_delete_is_idempotent_and_a_new_run_numbers_on(gql: GraphQLClient) -> None:
    await checkpoint(gql, session_doc(step=1))
    await checkpoint(gql, session_doc(step=2))
    await checkpoint(gql, session_doc("other"), session_id="other")

    assert await delete(gql) == {"deleted": True, "userErrors": []}
    assert await hydrate(gql) is None
    assert (await history(gql))["totalCount"] == 0
    assert await delete(gql) == {"deleted": False, "userErrors": []}
    assert await delete(gql, "never-existed") == {"deleted": False, "userErrors": []}
    # Other sessions are untouched.
    assert (await hydrate(gql, "other") or {})["version"] == 1

    # The new run's versions follow the deleted ones (see the test below), its history
    # holds its own only.
    restarted = await checkpoint(gql, session_doc(step=3), expected_version=0)
    assert restarted["version"] == 3
    assert await hydrate(gql) == restarted
    assert [n["version"] for n in (await history(gql))["nodes"]] == [3]
    await delete(gql)
    assert (await checkpoint(gql, session_doc(step=4)))["version"] == 4


async def test_a_write_conditioned_on_a_version_before_a_delete_is_refused(
    gql: GraphQLClient, server: Server
) -> None:
    """Two runtimes with conflict detection: one saw version 2; the other deletes the
    session and checkpoints twice. The first one's write, conditioned on the version 2 it
    saw, must not overwrite a checkpoint it never saw."""
    await checkpoint(gql, session_doc(step=1), expected_version=0)
    seen = await checkpoint(gql, session_doc(step=2), expected_version=1)
    await delete(gql)
    await checkpoint(gql, session_doc(step=10), expected_version=0)
    latest = await checkpoint(gql, session_doc(step=11))
    stale = await checkpoint_payload(gql, session_doc(step=3), expected_version=seen["version"])
    assert [(e["code"], e["field"]) for e in stale["userErrors"]] == [
        ("CONFLICT", ["expectedVersion"])
    ]
    assert await hydrate(gql) == latest
    # The floor is the owner's: another owner's session of the same id starts at 1.
    bob = gql.as_(await server.token(owner="user:bob"))
    assert (await checkpoint(bob, session_doc(step=1)))["version"] == 1


async def test_sessions_are_scoped_to_their_owner(gql: GraphQLClient, server: Server) -> None:
    mine = await checkpoint(gql, session_doc(step=1))
    bob = gql.as_(await server.token(owner="user:bob"))
    other_site = gql.as_(await server.token(workspace="site:2"))
    admin = gql.as_(await server.token(owner="user:carol", scope="admin"))

    for stranger in (bob, other_site, admin):
        assert await hydrate(stranger) is None
        assert (await history(stranger))["totalCount"] == 0
        assert await delete(stranger) == {"deleted": False, "userErrors": []}
    bobs = await checkpoint(bob, session_doc(step=9))
    assert bobs["version"] == 1
    assert await hydrate(gql) == mine
    assert (await hydrate(bob) or {})["state"] == session_doc(step=9)


async def test_a_read_only_token_cannot_checkpoint_or_delete(
    gql: GraphQLClient, server: Server
) -> None:
    await checkpoint(gql, session_doc())
    reader = gql.as_(await server.token(scope="read"))
    refused = await checkpoint_payload(reader, session_doc(step=2))
    assert [e["code"] for e in refused["userErrors"]] == ["FORBIDDEN"]
    assert [e["code"] for e in (await delete(reader))["userErrors"]] == ["FORBIDDEN"]
    assert (await hydrate(reader) or {})["version"] == 1


@pytest.mark.parametrize(
    "query",
    [
        '{ sessionState(sessionId: "a\\u0000b") { version } }',
        '{ sessionStateHistory(sessionId: "a\\u0000b") { totalCount } }',
    ],
)
async def test_a_nul_in_a_session_id_is_invalid_input_on_every_backend(
    gql: GraphQLClient, query: str
) -> None:
    response = await gql.post(query)
    assert [e["extensions"]["code"] for e in response.json()["errors"]] == ["INVALID_INPUT"]
    payload = await delete(gql, "a\u0000b")
    assert [e["code"] for e in payload["userErrors"]] == ["INVALID_INPUT"]


# -- extractFacts -------------------------------------------------------------


async def test_extract_facts_returns_the_envelopes_facts(gql: GraphQLClient) -> None:
    envelope = session_doc()["active_envelope"]
    assert (await gql(EXTRACT, {"envelope": envelope}))["extractFacts"] == [
        "step(1).",
        'user("alice").',
    ]
    assert (await gql(EXTRACT, {"envelope": {"id": "e"}}))["extractFacts"] == []
    assert (await gql(EXTRACT, {"envelope": {"id": "e", "facts": []}}))["extractFacts"] == []


@pytest.mark.parametrize("envelope", [["a."], {"facts": "a."}, {"facts": ["a.", 3]}])
async def test_extract_facts_rejects_what_is_not_an_envelope(
    gql: GraphQLClient, envelope: Any
) -> None:
    response = await gql.post(EXTRACT, {"envelope": envelope})
    assert [e["extensions"]["code"] for e in response.json()["errors"]] == ["INVALID_INPUT"]


async def test_the_version_floor_migration_downgrades_and_upgrades(settings: Settings) -> None:
    gone: list[bool] = []

    def down(config: Config) -> None:
        command.downgrade(config, "0014")
        gone.append(not inspect(config.attributes["connection"]).has_table(FLOOR))

    await columns_after(settings, "session_state", down)
    assert gone == [True]
    back = await columns_after(settings, FLOOR, lambda config: command.upgrade(config, "head"))
    assert back[-2:] == ["session_digest", "version"]


async def test_concurrent_checkpoints_without_a_version_are_all_stored(gql: GraphQLClient) -> None:
    """Last write wins: none is refused. On PostgreSQL, writers raced for each version and,
    with a pool's worth of them, some lost twenty times and got CONFLICT."""
    steps = range(1, 49)
    stored = await asyncio.gather(
        *(checkpoint(gql, session_doc("busy", min(step, 9)), session_id="busy") for step in steps)
    )
    assert sorted(s["version"] for s in stored) == list(steps)
    assert (await history(gql, "busy", first=1))["totalCount"] == len(steps)
