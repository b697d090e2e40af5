"""Owner scoping: another owner of the workspace, or another workspace, sees and touches nothing.

A victim (WRITE, user:alice in site:1 unless a test says otherwise) stores one record of every
kind; each other principal then tries every read and every mutation on those ids. A record of
another owner must be indistinguishable from a missing one, and reading back as the victim
proves that nothing changed. `seed`, `mutate`, `peek`, `holdings` and `attacks` are shared
with test_auth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import GraphQLClient, Server

TIER = "researcher"
SESSION = "session-1"

PAYLOADS = {
    "createConversation": ("CreateConversationInput", "conversation { id ownerType }"),
    "updateConversation": ("UpdateConversationInput", "conversation { id version }"),
    "appendMessages": ("AppendMessagesInput", "conversation { id } messages { seq }"),
    "replaceTranscript": ("ReplaceTranscriptInput", "conversation { id version }"),
    "saveSnapshot": ("SaveSnapshotInput", "snapshot { id }"),
    "deleteConversation": ("DeleteConversationInput", "deleted"),
    "createDelegation": ("CreateDelegationInput", "delegation { id childConversation { id } }"),
    "completeDelegation": ("CompleteDelegationInput", "delegation { id status }"),
    "resumeDelegation": ("ResumeDelegationInput", "delegation { id }"),
    "acquireLock": ("AcquireLockInput", "token expiresAt"),
    "releaseLock": ("ReleaseLockInput", "released"),
    "checkpointSession": ("CheckpointSessionInput", "sessionState { sessionId version }"),
    "deleteSessionState": ("DeleteSessionStateInput", "deleted"),
}


async def mutate(client: GraphQLClient, name: str, input: dict[str, Any]) -> dict[str, Any]:
    """Run one mutation of the contract and return its payload."""
    input_type, selection = PAYLOADS[name]
    query = (
        f"mutation($input: {input_type}!) {{ {name}(input: $input) "
        f"{{ {selection} userErrors {{ code field message }} }} }}"
    )
    payload: dict[str, Any] = (await client(query, {"input": input}))[name]
    return payload


async def ok(client: GraphQLClient, name: str, input: dict[str, Any]) -> dict[str, Any]:
    payload = await mutate(client, name, input)
    assert payload["userErrors"] == [], (name, payload)
    return payload


def session_document(session_id: str = SESSION, fact: str = "fact(a)") -> dict[str, Any]:
    return {
        "session_id": session_id,
        "active_envelope": {"id": "env-1", "facts": [fact]},
        "logical_facts": [fact],
    }


@dataclass(frozen=True)
class Records:
    conversation: str
    snapshot: str
    running: str  # a RUNNING delegation
    child: str  # its child conversation
    completed: str  # a COMPLETED delegation whose summary mentions the zebra
    lock_token: str
    pending: str  # the newest conversation, still pending


async def seed(client: GraphQLClient) -> Records:
    """One record of every kind, owned by the client's principal."""
    created = await ok(
        client,
        "createConversation",
        {"title": "victim plan", "agentSlug": "agent", "metadata": {"k": "v"}},
    )
    cid = created["conversation"]["id"]
    messages = [
        {"role": "user", "content": "find the zebra"},
        {"role": "assistant", "content": "ok"},
    ]
    await ok(client, "appendMessages", {"conversationId": cid, "messages": messages})
    snapshot = await ok(client, "saveSnapshot", {"conversationId": cid, "messages": messages})
    delegate = {"parentConversationId": cid, "delegatingTier": "lead", "targetTier": TIER}
    running = await ok(client, "createDelegation", {**delegate, "task": "look around"})
    done = await ok(client, "createDelegation", {**delegate, "task": "find it"})
    done_id = done["delegation"]["id"]
    summary = "the zebra was found"
    await ok(
        client,
        "completeDelegation",
        {"delegationId": done_id, "status": "COMPLETED", "summary": summary},
    )
    lock = await ok(client, "acquireLock", {"conversationId": cid})
    await ok(client, "checkpointSession", {"sessionId": SESSION, "state": session_document()})
    pending = await ok(client, "createConversation", {"title": "fresh"})
    return Records(
        conversation=cid,
        snapshot=snapshot["snapshot"]["id"],
        running=running["delegation"]["id"],
        child=running["delegation"]["childConversation"]["id"],
        completed=done_id,
        lock_token=lock["token"],
        pending=pending["conversation"]["id"],
    )


PEEK = """
query($c: ID!, $child: ID!, $d: ID!, $done: ID!, $snap: ID!, $s: String!, $tier: String!) {
  conversation(id: $c) { id }
  child: conversation(id: $child) { id }
  delegation(id: $d) { id }
  done: delegation(id: $done) { id }
  nodeConversation: node(id: $c) { id }
  nodeDelegation: node(id: $d) { id }
  nodeSnapshot: node(id: $snap) { id }
  sessionState(sessionId: $s) { version }
  sessionStateHistory(sessionId: $s) { totalCount }
  conversations { totalCount nodes { id } }
  search: conversations(filter: { search: "zebra" }) { totalCount nodes { id } }
  latestDelegation(targetTier: $tier) { id }
  searchDelegations(query: "zebra") { id }
  recentPendingConversation { id }
}
"""


async def peek(client: GraphQLClient, r: Records) -> dict[str, Any]:
    """Every read of the API aimed at the records of `r`."""
    variables = {
        "c": r.conversation,
        "child": r.child,
        "d": r.running,
        "done": r.completed,
        "snap": r.snapshot,
        "s": SESSION,
        "tier": TIER,
    }
    return await client(PEEK, variables)


NOTHING: dict[str, Any] = {
    "conversation": None,
    "child": None,
    "delegation": None,
    "done": None,
    "nodeConversation": None,
    "nodeDelegation": None,
    "nodeSnapshot": None,
    "sessionState": None,
    "sessionStateHistory": {"totalCount": 0},
    "conversations": {"totalCount": 0, "nodes": []},
    "search": {"totalCount": 0, "nodes": []},
    "latestDelegation": None,
    "searchDelegations": [],
    "recentPendingConversation": None,
}

HOLDINGS = """
query($c: ID!, $child: ID!, $s: String!) {
  conversation(id: $c) {
    title metadata version messageCount transcript lockedUntil
    snapshots { totalCount nodes { id messageCount messages } }
    delegations { nodes { id status summary task } }
  }
  child: conversation(id: $child) { title version messageCount transcript }
  sessionState(sessionId: $s) { version state }
  sessionStateHistory(sessionId: $s) { totalCount }
  conversations { totalCount nodes { id version title } }
}
"""


async def holdings(client: GraphQLClient, r: Records) -> dict[str, Any]:
    """What the owner of `r` reads back: any write by someone else would show here."""
    return await client(HOLDINGS, {"c": r.conversation, "child": r.child, "s": SESSION})


def attacks(r: Records) -> list[tuple[str, dict[str, Any]]]:
    """Every mutation that names one of the records of `r` by id."""
    injected = [{"role": "user", "content": "injected"}]
    return [
        ("updateConversation", {"id": r.conversation, "title": "taken", "metadata": {"x": 1}}),
        ("updateConversation", {"id": r.child, "title": "taken", "markRead": True}),
        ("appendMessages", {"conversationId": r.conversation, "messages": injected}),
        ("appendMessages", {"conversationId": r.child, "messages": injected}),
        ("replaceTranscript", {"conversationId": r.conversation, "messages": []}),
        ("saveSnapshot", {"conversationId": r.conversation, "messages": injected}),
        (
            "createDelegation",
            {
                "parentConversationId": r.conversation,
                "delegatingTier": "x",
                "targetTier": TIER,
                "task": "t",
            },
        ),
        ("completeDelegation", {"delegationId": r.running, "status": "FAILED", "summary": "x"}),
        ("completeDelegation", {"delegationId": r.completed, "status": "FAILED"}),
        ("resumeDelegation", {"delegationId": r.completed, "task": "again"}),
        ("resumeDelegation", {"delegationId": r.running, "task": "again"}),
        ("acquireLock", {"conversationId": r.conversation}),
        ("acquireLock", {"conversationId": r.child}),
        ("releaseLock", {"conversationId": r.conversation, "token": r.lock_token}),
    ]


def assert_not_found(name: str, payload: dict[str, Any]) -> None:
    assert [e["code"] for e in payload["userErrors"]] == ["NOT_FOUND"], (name, payload)
    results = {k: v for k, v in payload.items() if k != "userErrors"}
    assert all(v in (None, False, []) for v in results.values()), (name, payload)


async def attack_everything(attacker: GraphQLClient, r: Records) -> None:
    """Every mutation on the victim's ids: NOT_FOUND, or for deletes a no-op."""
    for name, input in attacks(r):
        assert_not_found(name, await mutate(attacker, name, input))
    # Deleting what is not there is not an error, so another owner's record deletes as
    # "nothing deleted": exactly what a missing id gives.
    for name, input in [
        ("deleteConversation", {"id": r.child}),
        ("deleteConversation", {"id": r.conversation}),
        ("deleteSessionState", {"sessionId": SESSION}),
    ]:
        assert await mutate(attacker, name, input) == {"deleted": False, "userErrors": []}
    # Session ids live in each owner's own namespace: the same id is the attacker's own
    # session, starting at version 1, and leaves the victim's history alone.
    state = session_document(fact="fact(evil)")
    mine = await ok(attacker, "checkpointSession", {"sessionId": SESSION, "state": state})
    assert mine["sessionState"] == {"sessionId": SESSION, "version": 1}
    assert await ok(attacker, "deleteSessionState", {"sessionId": SESSION}) == {
        "deleted": True,
        "userErrors": [],
    }


OTHERS = [
    pytest.param("site:1", "user:bob", "write", id="same-workspace-other-user"),
    pytest.param("site:1", "user:Alice", "write", id="keys-are-case-sensitive"),
    pytest.param("site:1", "audience:alice", "write", id="same-key-audience"),
    pytest.param("site:1", "runtime:alice", "write", id="same-key-runtime"),
    pytest.param("site:1", "token:alice", "write", id="same-key-token"),
    pytest.param("site:1", "system:alice", "write", id="same-key-system"),
    pytest.param("site:1", "user:bob", "read", id="same-workspace-reader"),
    pytest.param("site:2", "user:alice", "write", id="other-workspace-same-owner"),
    pytest.param("site:10", "user:alice", "write", id="other-workspace-id-prefix"),
    pytest.param("blog:1", "user:alice", "write", id="other-workspace-type"),
    pytest.param("site:2", "user:alice", "admin", id="other-workspace-admin-same-owner"),
    pytest.param("site:2", "system:root", "admin", id="other-workspace-admin"),
]


@pytest.fixture
async def victim(gql: GraphQLClient) -> Records:
    return await seed(gql)


async def test_the_owner_sees_every_record(gql: GraphQLClient, victim: Records) -> None:
    # The control for every test below: the same reads do find the records.
    seen = await peek(gql, victim)
    assert seen["conversation"] == {"id": victim.conversation}
    assert seen["child"] == {"id": victim.child}
    assert seen["delegation"] == {"id": victim.running}
    assert seen["done"] == {"id": victim.completed}
    assert seen["nodeConversation"] == {"id": victim.conversation}
    assert seen["nodeDelegation"] == {"id": victim.running}
    assert seen["nodeSnapshot"] == {"id": victim.snapshot}
    assert seen["sessionState"] == {"version": 1}
    assert seen["sessionStateHistory"] == {"totalCount": 1}
    assert seen["conversations"]["totalCount"] == 4  # root, two children, pending
    assert seen["search"] == {"totalCount": 1, "nodes": [{"id": victim.conversation}]}
    assert seen["latestDelegation"] == {"id": victim.completed}
    assert seen["searchDelegations"] == [{"id": victim.completed}]
    assert seen["recentPendingConversation"] == {"id": victim.pending}


@pytest.mark.parametrize(("workspace", "owner", "scope"), OTHERS)
async def test_another_principal_reads_nothing(
    server: Server, gql: GraphQLClient, victim: Records, workspace: str, owner: str, scope: str
) -> None:
    other = gql.as_(await server.token(workspace=workspace, owner=owner, scope=scope))
    assert await peek(other, victim) == NOTHING


WRITERS = [p for p in OTHERS if "read" not in str(p.id)]


@pytest.mark.parametrize(("workspace", "owner", "scope"), WRITERS)
async def test_another_principal_changes_nothing(
    server: Server, gql: GraphQLClient, victim: Records, workspace: str, owner: str, scope: str
) -> None:
    before = await holdings(gql, victim)
    other = gql.as_(await server.token(workspace=workspace, owner=owner, scope=scope))
    await attack_everything(other, victim)
    assert await holdings(gql, victim) == before
    # The lock is still the victim's: its token still releases it.
    released = await ok(
        gql, "releaseLock", {"conversationId": victim.conversation, "token": victim.lock_token}
    )
    assert released["released"] is True


async def test_other_principals_records_stay_theirs(server: Server, gql: GraphQLClient) -> None:
    # The other direction: what bob stores next to alice is his, and alice's listing,
    # search and delegation lookups ignore it.
    bob = gql.as_(await server.token(owner="user:bob"))
    bobs = await seed(bob)
    alices = await seed(gql)
    assert (await peek(gql, bobs))["conversation"] is None
    mine = await peek(gql, alices)
    assert mine["search"]["nodes"] == [{"id": alices.conversation}]
    assert mine["searchDelegations"] == [{"id": alices.completed}]
    assert mine["latestDelegation"] == {"id": alices.completed}
    theirs = await peek(bob, bobs)
    assert theirs["conversations"]["totalCount"] == 4
    assert alices.conversation not in {n["id"] for n in theirs["conversations"]["nodes"]}


@pytest.mark.parametrize(
    ("owner", "key", "neighbours"),
    [
        ("user:a:b", "a:b", ["user:a", "user:a:b:c", "user:b", "user:a:B"]),
        ("user:Zoë 🦊", "Zoë 🦊", ["user:Zoe 🦊", "user:Zoë", "user:zoë 🦊"]),
        (
            "runtime:https://agents.example/run?id=1",
            "https://agents.example/run?id=1",
            [
                "runtime:https",
                "runtime:https://agents.example/run?id=2",
            ],
        ),
    ],
)
async def test_owner_keys_with_colons_and_unicode(
    server: Server, anon: GraphQLClient, owner: str, key: str, neighbours: list[str]
) -> None:
    client = anon.as_(await server.token(owner=owner))
    viewer = await client("{ viewer { ownerType ownerKey } }")
    assert viewer["viewer"] == {"ownerType": owner.split(":")[0].upper(), "ownerKey": key}
    records = await seed(client)
    assert (await peek(client, records))["conversation"] == {"id": records.conversation}
    for neighbour in neighbours:
        other = anon.as_(await server.token(owner=neighbour))
        assert await peek(other, records) == NOTHING, neighbour


async def test_naming_another_tenants_child_neither_waits_for_its_tree_nor_holds_it(
    server: Server, gql: GraphQLClient
) -> None:
    """On PostgreSQL a write locks its tree's root first. Another workspace's append to a
    child transcript it names by id locked that root before any scope was checked: its
    NOT_FOUND came only once the tree's writer committed (4.5 s behind a 5 s write in the
    review), which told that the id exists and when its tree is written, and any token
    could queue in that tree's lock. Now only a root the caller may write is locked."""
    import asyncio

    if server.settings.database_url.startswith("sqlite"):
        pytest.skip("PostgreSQL only: SQLite's writers hold the database, not a tree")
    delegate = """mutation($id: ID!) { createDelegation(input: {parentConversationId: $id,
      delegatingTier: "a", targetTier: "b", task: "t"}) { delegation { childConversation {
      id } } } }"""
    append = """mutation($id: ID!) { appendMessages(input: {conversationId: $id, messages:
      [{role: "user", content: "x"}]}) { userErrors { code field } } }"""
    root_id = (await mutate(gql, "createConversation", {"title": "victim"}))["conversation"]["id"]
    made = await gql(delegate, {"id": root_id})
    child = made["createDelegation"]["delegation"]["childConversation"]["id"]
    other = gql.as_(await server.token(workspace="site:2"))
    assert gql.token is not None
    victim = await server.services.uow.authenticate(gql.token)
    assert victim is not None
    async with server.services.uow.write(victim) as repo:
        await repo.versions.bump(root_id)  # the victim's write holds its tree's root
        answer = await asyncio.wait_for(other(append, {"id": child}), timeout=5)
    assert answer["appendMessages"]["userErrors"] == [
        {"code": "NOT_FOUND", "field": ["conversationId"]}
    ]
