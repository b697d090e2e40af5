"""Advisory conversation locks with a TTL (the WordPress store's session locks), the `pending`
flag they drive, and `recentPendingConversation`, the retry de-duplication lookup."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import GraphQLClient, Server
from tests.test_delegations import append, delegate, new_conversation

ERRORS = "userErrors { code field message }"
ACQUIRE = f"""
mutation($id: ID!, $ttl: Int, $token: String) {{
  acquireLock(input: {{conversationId: $id, ttlSeconds: $ttl, token: $token}}) {{
    token expiresAt {ERRORS} }}
}}"""
RELEASE = f"""
mutation($id: ID!, $token: String!) {{
  releaseLock(input: {{conversationId: $id, token: $token}}) {{ released {ERRORS} }}
}}"""
STATE = "query($id: ID!) { conversation(id: $id) { pending lockedUntil version messageCount } }"
RECENT = """
query($within: Int, $context: String, $token: ID) {
  recentPendingConversation(withinSeconds: $within, context: $context, tokenId: $token) { id }
}"""

# Long enough for the lock to lapse on a slow machine, short enough to keep the suite quick.
EXPIRY_WAIT = 1.2


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def acquire(
    gql: GraphQLClient, conversation_id: str, ttl: int | None = None, token: str | None = None
) -> Any:
    variables: dict[str, Any] = {"id": conversation_id, "token": token}
    if ttl is not None:
        variables["ttl"] = ttl
    return (await gql(ACQUIRE, variables))["acquireLock"]


async def release(gql: GraphQLClient, conversation_id: str, token: str) -> Any:
    return (await gql(RELEASE, {"id": conversation_id, "token": token}))["releaseLock"]


async def lock_state(gql: GraphQLClient, conversation_id: str) -> Any:
    return (await gql(STATE, {"id": conversation_id}))["conversation"]


def codes(payload: dict[str, Any]) -> list[tuple[str, list[str] | None]]:
    return [(e["code"], e["field"]) for e in payload["userErrors"]]


async def talked_to(gql: GraphQLClient, **fields: Any) -> str:
    """A conversation with one message: not pending unless locked."""
    cid = await new_conversation(gql, **fields)
    await append(gql, cid, [{"role": "user", "content": "hello"}])
    return cid


# -- acquireLock / releaseLock ------------------------------------------------


async def test_acquire_returns_a_token_and_its_expiry(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    before = await lock_state(gql, cid)
    assert (before["pending"], before["lockedUntil"]) == (False, None)

    started = datetime.now(UTC)
    lock = await acquire(gql, cid, ttl=120)
    assert lock["userErrors"] == []
    assert isinstance(lock["token"], str) and len(lock["token"]) >= 16
    expires = parse_time(lock["expiresAt"])
    assert started + timedelta(seconds=119) <= expires <= datetime.now(UTC) + timedelta(seconds=121)

    held = await lock_state(gql, cid)
    assert held["pending"] is True
    assert parse_time(held["lockedUntil"]) == expires
    # A lock is advisory: it leaves the version alone for expectedVersion writers.
    assert held["version"] == before["version"]


async def test_the_default_ttl_is_five_minutes(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    started = datetime.now(UTC)
    lock = await acquire(gql, cid)
    expires = parse_time(lock["expiresAt"])
    assert started + timedelta(seconds=299) <= expires <= datetime.now(UTC) + timedelta(seconds=301)


async def test_a_held_lock_cannot_be_acquired_again(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    first = await acquire(gql, cid, ttl=60)
    second = await acquire(gql, cid, ttl=60)
    assert (second["token"], second["expiresAt"]) == (None, None)
    assert codes(second) == [("LOCKED", ["conversationId"])]
    # The first holder still has it.
    assert parse_time((await lock_state(gql, cid))["lockedUntil"]) == parse_time(first["expiresAt"])
    assert (await release(gql, cid, first["token"]))["released"] is True


async def test_release_with_the_holders_token_frees_the_lock(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    lock = await acquire(gql, cid, ttl=60)
    assert await release(gql, cid, lock["token"]) == {"released": True, "userErrors": []}
    freed = await lock_state(gql, cid)
    assert (freed["pending"], freed["lockedUntil"]) == (False, None)
    assert (await release(gql, cid, lock["token"]))["released"] is False
    again = await acquire(gql, cid, ttl=60)
    assert again["userErrors"] == [] and again["token"] != lock["token"]


async def test_a_wrong_token_releases_nothing(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    lock = await acquire(gql, cid, ttl=60)
    assert await release(gql, cid, "not-the-token") == {"released": False, "userErrors": []}
    assert (await lock_state(gql, cid))["pending"] is True
    assert codes(await acquire(gql, cid)) == [("LOCKED", ["conversationId"])]
    assert (await release(gql, cid, lock["token"]))["released"] is True


async def test_an_expired_lock_is_taken_over_and_the_stale_token_releases_nothing(
    gql: GraphQLClient,
) -> None:
    cid = await talked_to(gql)
    first = await acquire(gql, cid, ttl=1)
    await asyncio.sleep(EXPIRY_WAIT)
    lapsed = await lock_state(gql, cid)
    assert (lapsed["pending"], lapsed["lockedUntil"]) == (False, None)

    second = await acquire(gql, cid, ttl=60)
    assert second["userErrors"] == []
    assert second["token"] != first["token"]

    # agents-api #470: the first holder, back late, must not free the new holder's lock.
    assert await release(gql, cid, first["token"]) == {"released": False, "userErrors": []}
    held = await lock_state(gql, cid)
    assert held["pending"] is True
    assert parse_time(held["lockedUntil"]) == parse_time(second["expiresAt"])
    assert codes(await acquire(gql, cid, ttl=60)) == [("LOCKED", ["conversationId"])]

    assert (await release(gql, cid, second["token"]))["released"] is True
    assert (await lock_state(gql, cid))["lockedUntil"] is None


async def test_concurrent_acquires_grant_exactly_one_lock(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    results = await asyncio.gather(*(acquire(gql, cid, ttl=60) for _ in range(6)))
    winners = [r for r in results if r["token"] is not None]
    assert len(winners) == 1
    assert (
        sorted(codes(r) for r in results if r["token"] is None)
        == [[("LOCKED", ["conversationId"])]] * 5
    )
    assert (await release(gql, cid, winners[0]["token"]))["released"] is True


async def test_a_lock_is_advisory_and_does_not_block_writes(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    await acquire(gql, cid, ttl=60)
    await append(gql, cid, [{"role": "assistant", "content": "still writable"}])
    state = await lock_state(gql, cid)
    assert (state["messageCount"], state["pending"]) == (2, True)


async def test_a_token_of_the_callers_choosing_holds_the_lock_and_a_retry_gets_it_again(
    gql: GraphQLClient,
) -> None:
    """The retry of an acquire whose answer was lost sends its token again: it gets the lock
    it was granted (taken again from now), not LOCKED by its own lock until the TTL ends."""
    cid = await talked_to(gql)
    mine = secrets.token_urlsafe(24)
    first = await acquire(gql, cid, ttl=60, token=mine)
    assert (first["token"], first["userErrors"]) == (mine, [])
    again = await acquire(gql, cid, ttl=120, token=mine)
    assert (again["token"], again["userErrors"]) == (mine, [])
    assert parse_time(again["expiresAt"]) > parse_time(first["expiresAt"])
    assert parse_time((await lock_state(gql, cid))["lockedUntil"]) == parse_time(again["expiresAt"])
    # Anyone else (another token, or none) still meets the lock.
    for other in (secrets.token_urlsafe(24), None):
        taken = await acquire(gql, cid, ttl=60, token=other)
        assert (taken["token"], codes(taken)) == (None, [("LOCKED", ["conversationId"])])
    assert (await release(gql, cid, mine))["released"] is True
    assert (await lock_state(gql, cid))["lockedUntil"] is None


async def test_a_released_token_cannot_take_the_lock_again(gql: GraphQLClient) -> None:
    """A first attempt whose answer was lost, carried out late, after its retry got the lock
    and released it: it must not take the lock again under a token nobody holds any more."""
    cid = await talked_to(gql)
    mine = secrets.token_urlsafe(24)
    assert (await acquire(gql, cid, ttl=60, token=mine))["userErrors"] == []
    assert (await release(gql, cid, mine))["released"] is True
    for _ in range(2):  # refused each time, and leaves the lock as it was
        late = await acquire(gql, cid, ttl=60, token=mine)
        assert (late["token"], late["expiresAt"]) == (None, None)
        assert codes(late) == [("CONFLICT", ["token"])]
        assert "released" in late["userErrors"][0]["message"]
        freed = await lock_state(gql, cid)
        assert (freed["pending"], freed["lockedUntil"]) == (False, None)
    # Releasing it again releases nothing, as before.
    assert await release(gql, cid, mine) == {"released": False, "userErrors": []}
    # Another token (or none) takes the unheld lock as before, and the released one still
    # meets it as LOCKED.
    other = secrets.token_urlsafe(24)
    taken = await acquire(gql, cid, ttl=60, token=other)
    assert (taken["token"], taken["userErrors"]) == (other, [])
    assert codes(await acquire(gql, cid, ttl=60, token=mine)) == [("LOCKED", ["conversationId"])]
    assert (await release(gql, cid, other))["released"] is True
    assert (await acquire(gql, cid, ttl=60))["userErrors"] == []


async def test_a_server_made_token_once_released_cannot_take_the_lock_again(
    gql: GraphQLClient,
) -> None:
    cid = await talked_to(gql)
    lock = await acquire(gql, cid, ttl=60)
    assert (await release(gql, cid, lock["token"]))["released"] is True
    again = await acquire(gql, cid, ttl=60, token=lock["token"])
    assert codes(again) == [("CONFLICT", ["token"])]
    assert (await lock_state(gql, cid))["lockedUntil"] is None


async def test_a_token_whose_lock_ran_out_unreleased_may_take_it_again(
    gql: GraphQLClient,
) -> None:
    """Expiry is not release: the holder's retry after its lock ran out (and nobody took it
    meanwhile) takes it again, as any acquire of an expired lock would."""
    cid = await talked_to(gql)
    mine = secrets.token_urlsafe(24)
    assert (await acquire(gql, cid, ttl=1, token=mine))["userErrors"] == []
    await asyncio.sleep(EXPIRY_WAIT)
    assert (await lock_state(gql, cid))["lockedUntil"] is None
    again = await acquire(gql, cid, ttl=60, token=mine)
    assert (again["token"], again["userErrors"]) == (mine, [])
    assert parse_time((await lock_state(gql, cid))["lockedUntil"]) == parse_time(again["expiresAt"])
    assert (await release(gql, cid, mine))["released"] is True


async def test_a_servers_token_cannot_be_taken_over_by_naming_it(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    lock = await acquire(gql, cid, ttl=60)
    # Its own token, sent back: the holder renewing (the server's tokens qualify).
    renewed = await acquire(gql, cid, ttl=60, token=lock["token"])
    assert (renewed["token"], renewed["userErrors"]) == (lock["token"], [])
    assert codes(await acquire(gql, cid, ttl=60, token="x" * 32)) == [
        ("LOCKED", ["conversationId"])
    ]


@pytest.mark.parametrize(
    "token", ["", "short", "a" * 31, "a" * 129, "a" * 31 + " ", "é" * 40, "a" * 31 + "\n"]
)
async def test_a_token_that_is_too_short_long_or_not_url_safe_is_invalid_input(
    gql: GraphQLClient, token: str
) -> None:
    cid = await talked_to(gql)
    payload = await acquire(gql, cid, ttl=60, token=token)
    assert (payload["token"], codes(payload)) == (None, [("INVALID_INPUT", ["token"])])
    assert (await lock_state(gql, cid))["lockedUntil"] is None


@pytest.mark.parametrize("ttl", [0, -5, 24 * 3600 + 1])
async def test_an_invalid_ttl_is_invalid_input(gql: GraphQLClient, ttl: int) -> None:
    cid = await talked_to(gql)
    payload = await acquire(gql, cid, ttl=ttl)
    assert payload["token"] is None
    assert codes(payload) == [("INVALID_INPUT", ["ttlSeconds"])]
    assert (await lock_state(gql, cid))["lockedUntil"] is None


@pytest.mark.parametrize("target", ["missing", "malformed", "other-owner"])
async def test_locking_a_conversation_that_is_not_ours_is_not_found(
    gql: GraphQLClient, server: Server, target: str
) -> None:
    bob = gql.as_(await server.token(owner="user:bob"))
    bobs = await talked_to(bob)
    cid = {"missing": str(uuid.uuid4()), "malformed": "lock-me", "other-owner": bobs}[target]

    acquired = await acquire(gql, cid, ttl=60)
    assert acquired["token"] is None
    assert codes(acquired) == [("NOT_FOUND", ["conversationId"])]
    released = await gql(RELEASE, {"id": cid, "token": "whatever"})
    assert codes(released["releaseLock"]) == [("NOT_FOUND", ["conversationId"])]
    assert (await lock_state(bob, bobs))["lockedUntil"] is None


async def test_another_owner_cannot_release_a_lock(gql: GraphQLClient, server: Server) -> None:
    cid = await talked_to(gql)
    lock = await acquire(gql, cid, ttl=60)
    bob = gql.as_(await server.token(owner="user:bob"))
    payload = (await bob(RELEASE, {"id": cid, "token": lock["token"]}))["releaseLock"]
    assert codes(payload) == [("NOT_FOUND", ["conversationId"])]
    assert (await lock_state(gql, cid))["pending"] is True


async def test_a_read_only_token_cannot_lock(gql: GraphQLClient, server: Server) -> None:
    cid = await talked_to(gql)
    reader = gql.as_(await server.token(scope="read"))
    assert [c for c, _ in codes(await acquire(reader, cid))] == ["FORBIDDEN"]
    assert (await lock_state(gql, cid))["lockedUntil"] is None


# -- pending ------------------------------------------------------------------


async def test_pending_while_empty_or_locked(gql: GraphQLClient) -> None:
    cid = await new_conversation(gql)
    assert (await lock_state(gql, cid))["pending"] is True  # empty transcript
    await append(gql, cid, [{"role": "user", "content": "hi"}])
    assert (await lock_state(gql, cid))["pending"] is False
    lock = await acquire(gql, cid, ttl=60)
    assert (await lock_state(gql, cid))["pending"] is True
    await release(gql, cid, lock["token"])
    assert (await lock_state(gql, cid))["pending"] is False
    await acquire(gql, cid, ttl=1)
    await asyncio.sleep(EXPIRY_WAIT)
    assert (await lock_state(gql, cid))["pending"] is False


# -- recentPendingConversation ------------------------------------------------


async def recent(gql: GraphQLClient, **args: Any) -> str | None:
    data = await gql(RECENT, args)
    found = data["recentPendingConversation"]
    return None if found is None else str(found["id"])


async def test_recent_pending_is_null_without_conversations(gql: GraphQLClient) -> None:
    assert await recent(gql) is None


async def test_recent_pending_returns_the_newest_while_it_is_empty(gql: GraphQLClient) -> None:
    older = await new_conversation(gql)
    newest = await new_conversation(gql)
    assert await recent(gql) == newest
    await append(gql, newest, [{"role": "user", "content": "answered"}])
    # Only the newest counts: the older empty one is not a retry of this request.
    assert await recent(gql) is None
    assert older != newest


async def test_recent_pending_returns_the_newest_while_it_is_locked(gql: GraphQLClient) -> None:
    cid = await talked_to(gql)
    assert await recent(gql) is None
    lock = await acquire(gql, cid, ttl=60)
    assert await recent(gql) == cid
    await release(gql, cid, lock["token"])
    assert await recent(gql) is None
    await acquire(gql, cid, ttl=1)
    await asyncio.sleep(EXPIRY_WAIT)
    assert await recent(gql) is None


async def test_recent_pending_filters_by_context(gql: GraphQLClient) -> None:
    chat = await new_conversation(gql)  # context defaults to "chat"
    rest = await new_conversation(gql, context="rest")
    cron = await talked_to(gql, context="cron")
    assert await recent(gql) == chat
    assert await recent(gql, context="chat") == chat
    assert await recent(gql, context="rest") == rest
    assert await recent(gql, context="cron") is None
    assert await recent(gql, context="other") is None
    assert cron not in (chat, rest)


async def test_recent_pending_matches_the_token_id_in_metadata(gql: GraphQLClient) -> None:
    seven = await new_conversation(gql, metadata={"token_id": 7})
    eight = await new_conversation(gql, metadata={"token_id": "8"})
    plain = await new_conversation(gql)
    assert await recent(gql) == plain
    assert await recent(gql, token="7") == seven
    assert await recent(gql, token="8") == eight
    assert await recent(gql, token="9") is None
    # The newest with that token decides, even when an older one with it is still empty.
    newer_seven = await talked_to(gql, metadata={"token_id": 7, "other": True})
    assert await recent(gql, token="7") is None
    assert newer_seven != seven


async def test_recent_pending_looks_back_only_within_seconds(gql: GraphQLClient) -> None:
    cid = await new_conversation(gql)
    await asyncio.sleep(EXPIRY_WAIT)
    assert await recent(gql, within=1) is None
    assert await recent(gql, within=600) == cid
    assert await recent(gql) == cid  # default window: 600 seconds


@pytest.mark.parametrize("within", [0, -1])
async def test_recent_pending_needs_a_window_of_at_least_one_second(
    gql: GraphQLClient, within: int
) -> None:
    await new_conversation(gql)
    response = await gql.post(RECENT, {"within": within})
    body = response.json()
    assert body["data"] is None or body["data"]["recentPendingConversation"] is None
    assert [(e["extensions"]["code"], e["extensions"]["field"]) for e in body["errors"]] == [
        ("INVALID_INPUT", ["withinSeconds"])
    ]


async def test_recent_pending_is_scoped_to_the_caller(gql: GraphQLClient, server: Server) -> None:
    mine = await new_conversation(gql)
    bob = gql.as_(await server.token(owner="user:bob"))
    other_site = gql.as_(await server.token(workspace="site:2"))
    assert await recent(bob) is None
    bobs = await new_conversation(bob)
    # Bob's newer session neither hides nor replaces alice's.
    assert await recent(gql) == mine
    assert await recent(bob) == bobs
    assert await recent(other_site) is None


async def test_recent_pending_skips_deleted_conversations(gql: GraphQLClient) -> None:
    cid = await new_conversation(gql)
    await gql(
        "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }", {"id": cid}
    )
    assert await recent(gql) is None


async def test_recent_pending_ignores_delegation_child_transcripts(gql: GraphQLClient) -> None:
    session = await new_conversation(gql)
    await delegate(gql, session)  # its child is newer, empty and inherits context "chat"
    assert await recent(gql) == session
