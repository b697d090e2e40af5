"""Every cursor argument of every connection refuses a cursor the server did not issue.

A forged cursor is well-formed base64 JSON holding what a client made up: a list of the
wrong length, a bool or an out-of-range number where a position goes, a string that is no
time, an id that is no UUID. Each is INVALID_INPUT naming its argument, never a masked
internal error (the review found `snapshots`, `delegations` and `sessionStateHistory`
answering INTERNAL for `[1, 2]`, `[2**63]` and `[true]`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from graph.domain.delegations import new_delegation
from graph.domain.messages import prepare_messages
from tests.conftest import GraphQLClient, Server

UUID = "9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60"
NOW = "2024-01-01T00:00:00+00:00"


def forged(*parts: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


# Cursors of each kind the server issues, then each kind's forgeries.
POSITION_FORGERIES = [
    forged(2**63),
    forged(2**31),
    forged(-1),
    forged(True),
    forged(1.5),
    forged("1"),
    forged(1, 2),
    forged(),
    forged(None),
    "not base64 !!",
    base64.urlsafe_b64encode(b"{not json").decode(),
    forged({"seq": 1}).replace("=", ""),
]
KEYSET_FORGERIES = [
    forged(1, 2),
    forged(True, UUID),
    forged(NOW),
    forged(NOW, UUID, 3),
    forged("not-a-date", UUID),
    forged("2024-01-01T00:00:00", UUID),  # no time zone: not one the server wrote
    forged(NOW, "not-a-uuid"),
    forged(NOW, 12),
    forged(NOW, UUID.upper()),  # a UUID, but not in the form the server writes
    forged(2**63),
    "not base64 !!",
    # A time no UTC time can name: it overflowed where the store converts it to UTC.
    forged("0001-01-01T00:00:00+14:00", UUID),
    forged("9999-12-31T23:59:59-14:00", UUID),
]


async def new_conversation(gql: GraphQLClient) -> str:
    data = await gql("mutation { createConversation(input: {}) { conversation { id } } }")
    return str(data["createConversation"]["conversation"]["id"])


def refused(body: dict[str, Any], field: str) -> None:
    errors = body.get("errors") or []
    assert errors, body
    assert [e["extensions"]["code"] for e in errors] == ["INVALID_INPUT"], errors
    assert errors[0]["extensions"]["field"] == [field], errors
    assert "not a cursor this server issued" in errors[0]["message"]


@pytest.mark.parametrize("cursor", KEYSET_FORGERIES)
async def test_conversations_after(gql: GraphQLClient, cursor: str) -> None:
    await new_conversation(gql)
    response = await gql.post(
        "query($a: String) { conversations(after: $a) { totalCount } }", {"a": cursor}
    )
    assert response.status_code == 200
    refused(response.json(), "after")


@pytest.mark.parametrize("argument", ["after", "before"])
@pytest.mark.parametrize("cursor", POSITION_FORGERIES)
async def test_messages_after_and_before(gql: GraphQLClient, argument: str, cursor: str) -> None:
    cid = await new_conversation(gql)
    query = (
        f"query($id: ID!, $c: String) {{ conversation(id: $id) {{ "
        f"messages({argument}: $c, {'last' if argument == 'before' else 'first'}: 5) "
        "{ nodes { seq } } } }"
    )
    response = await gql.post(query, {"id": cid, "c": cursor})
    assert response.status_code == 200
    refused(response.json(), argument)


@pytest.mark.parametrize("cursor", KEYSET_FORGERIES)
@pytest.mark.parametrize("connection", ["snapshots", "delegations"])
async def test_snapshots_and_delegations_after(
    gql: GraphQLClient, connection: str, cursor: str
) -> None:
    cid = await new_conversation(gql)
    query = (
        f"query($id: ID!, $a: String) {{ conversation(id: $id) {{ "
        f"{connection}(after: $a) {{ totalCount nodes {{ id }} }} }} }}"
    )
    response = await gql.post(query, {"id": cid, "a": cursor})
    assert response.status_code == 200
    refused(response.json(), "after")


@pytest.mark.parametrize("cursor", POSITION_FORGERIES)
async def test_session_state_history_after(gql: GraphQLClient, cursor: str) -> None:
    query = (
        'query($a: String) { sessionStateHistory(sessionId: "s-1", after: $a) '
        "{ nodes { version } } }"
    )
    response = await gql.post(query, {"a": cursor})
    assert response.status_code == 200
    refused(response.json(), "after")


async def test_the_cursors_the_server_issues_are_accepted(gql: GraphQLClient) -> None:
    # The control: real cursors of each kind page on, so the refusals above are not blanket.
    cid = await new_conversation(gql)
    await new_conversation(gql)
    await gql(
        "mutation($id: ID!) { appendMessages(input: {conversationId: $id, messages: "
        '[{role: "user", content: "a"}, {role: "user", content: "b"}]}) { userErrors { code } } }',
        {"id": cid},
    )
    first = await gql("{ conversations(first: 1) { pageInfo { endCursor } } }")
    after = first["conversations"]["pageInfo"]["endCursor"]
    rest = await gql(
        "query($a: String) { conversations(after: $a) { nodes { id } } }", {"a": after}
    )
    assert len(rest["conversations"]["nodes"]) == 1
    page = await gql(
        "query($id: ID!) { conversation(id: $id) { "
        "messages(first: 1) { pageInfo { endCursor } } } }",
        {"id": cid},
    )
    mark = page["conversation"]["messages"]["pageInfo"]["endCursor"]
    more = await gql(
        "query($id: ID!, $a: String) { conversation(id: $id) { "
        "messages(after: $a) { nodes { seq } } } }",
        {"id": cid, "a": mark},
    )
    assert more["conversation"]["messages"]["nodes"] == [{"seq": 2}]


async def test_records_sharing_one_created_at_page_without_a_gap_or_a_repeat(
    server: Server, gql: GraphQLClient
) -> None:
    """A keyset cursor names its record's createdAt and id: records written in one transaction
    share the createdAt (its one `now`), and a page boundary between them neither passes one
    over nor gives one twice, the store's order and the cursor's comparison agreeing on the
    id (SQLite's text and PostgreSQL's collation alike)."""
    principal = await server.services.uow.authenticate(gql.token or "")
    assert principal is not None
    parent = await new_conversation(gql)
    history = prepare_messages([{"role": "user", "content": "x"}], max_count=1, max_bytes=1000)
    async with server.services.uow.write(principal) as repo:
        for i in range(5):
            task = new_delegation(delegating_tier="lead", target_tier="worker", task=f"t{i}")
            await repo.delegations.create(parent, task)
            await repo.snapshots.save(parent, history)
    page_fields = "{ totalCount nodes { id createdAt } pageInfo { hasNextPage endCursor } }"
    queries = {
        name: (
            "query($id: ID!, $a: String) { conversation(id: $id) { "
            f"{name}(first: 2, after: $a) {page_fields} }} }}"
        )
        for name in ("delegations", "snapshots")
    }
    queries["conversations"] = (
        f"query($a: String) {{ conversations(first: 2, after: $a) {page_fields} }}"
    )
    for name, query in queries.items():
        seen: list[str] = []
        times: set[str] = set()
        after = None
        while True:
            if name == "conversations":
                page = (await gql(query, {"a": after}))[name]
            else:
                page = (await gql(query, {"id": parent, "a": after}))["conversation"][name]
            seen += [n["id"] for n in page["nodes"]]
            times |= {n["createdAt"] for n in page["nodes"]}
            if not page["pageInfo"]["hasNextPage"]:
                break
            after = page["pageInfo"]["endCursor"]
        # The conversations: the parent, then the five children made together.
        made, created = (6, 2) if name == "conversations" else (5, 1)
        assert len(seen) == len(set(seen)) == page["totalCount"] == made, name
        assert len(times) == created, (name, times)
