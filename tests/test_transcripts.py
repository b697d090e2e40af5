"""Transcripts over GraphQL: appendMessages, replaceTranscript, the messages connection,
transcript(fromSeq) and compaction snapshots."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from tests.conftest import GraphQLClient, Server
from tests.test_conversations import (
    APPEND,
    append,
    create,
    forge_cursor,
    get,
    other_owner,
    replace,
    save_snapshot,
    ts,
)

MESSAGES = """
query($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {
  conversation(id: $id) {
    messages(first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { seq role content data createdAt } }
      nodes { seq }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      totalCount
    }
  }
}"""

TRANSCRIPT = "query($id: ID!, $from: Int) { conversation(id: $id) { transcript(fromSeq: $from) } }"

STATE = """
query($id: ID!) {
  conversation(id: $id) { version messageCount transcript messages { nodes { seq createdAt } } }
}"""

SNAPSHOTS = """
query($id: ID!, $first: Int, $after: String) {
  conversation(id: $id) {
    snapshots(first: $first, after: $after) {
      edges { cursor node { id messageCount messages } }
      pageInfo { hasNextPage hasPreviousPage endCursor }
      totalCount
    }
  }
}"""


def turns(*contents: str, role: str = "user") -> list[dict[str, Any]]:
    return [{"role": role, "content": c} for c in contents]


async def conversation_with(gql: GraphQLClient, messages: list[Any]) -> str:
    cid = (await create(gql))["id"]
    payload = await append(gql, cid, messages)
    assert payload["userErrors"] == [], payload["userErrors"]
    return cid


async def state(gql: GraphQLClient, cid: str) -> dict[str, Any]:
    return (await gql(STATE, {"id": cid}))["conversation"]


async def messages_page(gql: GraphQLClient, cid: str, **args: Any) -> dict[str, Any]:
    data = await gql(MESSAGES, {"id": cid, **args})
    return data["conversation"]["messages"]


def errors(payload: dict[str, Any]) -> list[tuple[str, list[str] | None]]:
    return [(e["code"], e["field"]) for e in payload["userErrors"]]


# -- appendMessages ---------------------------------------------------------------------------


async def test_append_returns_the_stored_messages_with_their_seqs(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    batch = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    payload = await append(gql, cid, batch)
    assert payload["userErrors"] == []
    assert [(m["seq"], m["role"], m["data"]) for m in payload["messages"]] == [
        (1, "user", batch[0]),
        (2, "assistant", batch[1]),
    ]
    assert [m["content"] for m in payload["messages"]] == ["hi", "hello"]


async def test_seqs_are_gapless_across_appends(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    seqs: list[int] = []
    for size in (1, 3, 2):
        payload = await append(gql, cid, turns(*[f"m{i}" for i in range(size)]))
        seqs += [m["seq"] for m in payload["messages"]]
    assert seqs == [1, 2, 3, 4, 5, 6]
    stored = await messages_page(gql, cid)
    assert [n["seq"] for n in stored["nodes"]] == seqs
    assert stored["totalCount"] == 6


async def test_append_bumps_the_version_and_message_count(gql: GraphQLClient) -> None:
    created = await create(gql)
    first = await append(gql, created["id"], turns("a", "b"))
    assert (first["conversation"]["version"], first["conversation"]["messageCount"]) == (2, 2)
    second = await append(gql, created["id"], turns("c"))
    assert (second["conversation"]["version"], second["conversation"]["messageCount"]) == (3, 3)
    stored = await get(gql, created["id"])
    assert stored is not None
    assert (stored["version"], stored["messageCount"]) == (3, 3)
    assert ts(stored["updatedAt"]) > ts(created["updatedAt"])


ODD_MESSAGE: dict[str, Any] = {
    "zeta": "key order is kept, not sorted",
    "role": "assistant",
    "content": "emoji 🧪👩🏽‍🔬, RTL שלום مرحبا, combining é, CJK 漢字, astral 𝄞",
    "big": 123456789012345678901234567890,
    "negative_big": -98765432109876543210987654321,
    "max_u64_plus_one": 18446744073709551616,
    "floats": [0.1, -2.5e-8, 1.7976931348623157e308, 3.0, -0.0, 5e-324],
    "nested": {"b": [1, {"c": [None, True, False, {"d": {}}]}], "a": []},
    "nul": "before\u0000after",
    "controls": "tab\there\nnewline \u001f \u2028",
    "escapes": 'quote " backslash \\ slash /',
    "tool_calls": [{"id": "call_1", "function": {"name": "f", "arguments": '{"x":1}'}}],
    "token_count": 12,
    "is_compacted": False,
    "identity_tier": None,
    "": "empty key",
}


async def test_messages_round_trip_exactly_as_sent(gql: GraphQLClient) -> None:
    small = {"role": "user", "content": "plain", "metadata": {"z": 1, "a": 2}}
    cid = (await create(gql))["id"]
    payload = await append(gql, cid, [ODD_MESSAGE, small])
    assert payload["userErrors"] == []
    stored = await messages_page(gql, cid)
    transcript = (await gql(TRANSCRIPT, {"id": cid}))["conversation"]["transcript"]
    for returned in (
        [m["data"] for m in payload["messages"]],
        [e["node"]["data"] for e in stored["edges"]],
        transcript,
    ):
        assert returned == [ODD_MESSAGE, small]
        assert [list(m) for m in returned] == [list(ODD_MESSAGE), list(small)]
        # Exact types too: an integer is not a float that happens to be equal.
        assert type(returned[0]["big"]) is int and returned[0]["big"] == ODD_MESSAGE["big"]
        assert type(returned[0]["floats"][3]) is float
    assert stored["edges"][0]["node"]["content"] == ODD_MESSAGE["content"]


async def test_a_big_integer_survives_in_the_content_field(gql: GraphQLClient) -> None:
    content = {"n": 2**70, "s": "x"}
    cid = await conversation_with(gql, [{"role": "tool", "content": content}])
    page = await messages_page(gql, cid)
    assert page["nodes"] == [{"seq": 1}]
    assert page["edges"][0]["node"]["content"] == content
    assert type(page["edges"][0]["node"]["content"]["n"]) is int


async def test_a_message_as_deep_as_accepted_reads_back_through_content(
    gql: GraphQLClient,
) -> None:
    """orjson writes 254 levels: a message just under that was stored, and then the response
    holding it a few levels down failed (HTTP 500), the append's answer too, though stored."""
    cid = (await create(gql))["id"]
    accepted = []
    for levels in range(244, 262, 2):
        content: Any = "bottom"
        for _ in range(levels):
            content = [content]
        response = await gql.post(
            """mutation($id: ID!, $m: [JSON!]!) { appendMessages(input:
            {conversationId: $id, messages: $m}) { messages { seq content }
            userErrors { code field } } }""",
            {"id": cid, "m": [{"role": "user", "content": content}]},
        )
        assert response.status_code == 200, response.text[:300]
        answer = response.json()["data"]["appendMessages"]
        if answer["userErrors"]:
            assert answer["userErrors"][0]["code"] == "INVALID_INPUT"
            continue
        assert answer["messages"][0]["content"] == content
        accepted.append(levels)
    assert accepted and max(accepted) >= 250 and max(accepted) < 260, accepted
    page = await messages_page(gql, cid)
    assert [len(json.dumps(e["node"]["content"])) for e in page["edges"]] == [
        2 * levels + len('"bottom"') for levels in accepted
    ]


async def test_messages_round_trip_in_the_raw_response_text(gql: GraphQLClient) -> None:
    # Parsing the response could hide a reordering or a float conversion: look at the text.
    message = {"role": "user", "b": 1, "a": 123456789012345678901234567890, "c": "\u0000"}
    cid = await conversation_with(gql, [message])
    response = await gql.post(TRANSCRIPT, {"id": cid})
    assert '"b":1,"a":123456789012345678901234567890,"c":"\\u0000"' in response.text.replace(
        " ", ""
    )


async def test_envelope_messages_of_the_wordpress_store_are_kept_whole(
    gql: GraphQLClient,
) -> None:
    envelope = {
        "schema": "agents-api.message",
        "version": 1,
        "type": "tool_call",
        "role": "assistant",
        "content": "",
        "payload": {"tool": "search", "args": {"q": "x"}},
        "metadata": {"k": "v"},
    }
    cid = await conversation_with(gql, [envelope])
    assert (await gql(TRANSCRIPT, {"id": cid}))["conversation"]["transcript"] == [envelope]


@pytest.mark.parametrize(
    "bad",
    [
        "a string",
        42,
        None,
        [{"role": "user"}],
        {"content": "no role"},
        {"role": ""},
        {"role": "   "},
        {"role": 7},
        {"role": None},
        {"role": ["user"]},
        {"role": "us\u0000er"},
    ],
)
async def test_append_rejects_an_invalid_message_and_writes_nothing(
    gql: GraphQLClient, bad: Any
) -> None:
    cid = await conversation_with(gql, turns("already there"))
    before = await state(gql, cid)
    batch = [{"role": "user", "content": "fine"}, bad, {"role": "user", "content": "also fine"}]
    response = await gql.post(APPEND, {"id": cid, "m": batch})
    body = response.json()
    if bad is None:  # [JSON!]! refuses a null item before the resolver runs
        assert body["data"] is None and body["errors"]
    else:
        payload = body["data"]["appendMessages"]
        assert errors(payload) == [("INVALID_INPUT", ["messages", "1"])]
        assert payload["messages"] == [] and payload["conversation"] is None
    assert await state(gql, cid) == before


async def test_append_reports_the_index_of_the_first_invalid_message(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    payload = await append(gql, cid, [*turns("a", "b", "c"), {"role": 1}, {"nope": 1}])
    assert errors(payload) == [("INVALID_INPUT", ["messages", "3"])]


async def post_raw_append(gql: GraphQLClient, cid: str, content_json: str) -> Any:
    """appendMessages with a message whose content is given as raw JSON text."""
    message = {"role": "user", "content": "CONTENT"}
    body = json.dumps({"query": APPEND, "variables": {"id": cid, "m": [message]}})
    body = body.replace('"CONTENT"', content_json)
    return await gql.post_body(body.encode())


async def test_a_lone_surrogate_in_a_request_body_is_refused(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("a"))
    before = await state(gql, cid)
    response = await post_raw_append(gql, cid, '"a\\ud800b"')
    assert response.status_code == 400
    assert await state(gql, cid) == before


async def test_a_lone_surrogate_beside_a_big_integer_is_refused_as_without_it(
    gql: GraphQLClient,
) -> None:
    # A big integer sends the body through the exact-integer parser, which took the
    # surrogate that orjson refuses: the body is refused alike (HTTP 400), nothing written.
    cid = await conversation_with(gql, turns("a"))
    before = await state(gql, cid)
    for content in ('["a\\ud800b", 123456789012345678901234567890]', '["a\\ud800b", 1]'):
        response = await post_raw_append(gql, cid, content)
        assert response.status_code == 400, response.text
        assert "JSON" in response.json()["errors"][0]["message"]
    assert await state(gql, cid) == before


async def test_concurrent_appends_get_distinct_gapless_seqs(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    calls = [append(gql, cid, turns(f"{i}-a", f"{i}-b", f"{i}-c")) for i in range(15)]
    payloads = await asyncio.gather(*calls)
    batches = []
    for payload in payloads:
        assert payload["userErrors"] == []
        seqs = [m["seq"] for m in payload["messages"]]
        assert seqs == list(range(seqs[0], seqs[0] + 3))
        batches.append((seqs[0], [m["data"]["content"] for m in payload["messages"]]))
    assert sorted(seq for first, _ in batches for seq in range(first, first + 3)) == list(
        range(1, 46)
    )
    current = await state(gql, cid)
    assert (current["messageCount"], current["version"]) == (45, 16)
    # The transcript holds each batch in one piece, at the seqs the call reported.
    by_seq = {seq: m["content"] for seq, m in enumerate(current["transcript"], start=1)}
    for first, contents in batches:
        assert [by_seq[first + i] for i in range(3)] == contents


async def test_append_of_an_empty_list_is_invalid_input(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    payload = await append(gql, cid, [])
    assert errors(payload) == [("INVALID_INPUT", ["messages"])]
    assert (await state(gql, cid))["version"] == 1


async def test_append_of_more_than_1000_messages_is_refused(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    payload = await append(gql, cid, turns(*["x"] * 1001))
    assert errors(payload) == [("LIMIT_EXCEEDED", ["messages"])]
    assert (await state(gql, cid))["messageCount"] == 0
    payload = await append(gql, cid, turns(*["x"] * 1000))
    assert payload["userErrors"] == []
    assert payload["conversation"]["messageCount"] == 1000


async def test_a_whole_transcript_may_hold_more_than_one_appends_limit(
    gql: GraphQLClient,
) -> None:
    """replaceTranscript takes the complete transcript (WordPress's update_session, entropic's
    save): a conversation past 1,000 messages can still be saved, and saved again."""
    cid = (await create(gql))["id"]
    long = turns(*[f"turn {i}" for i in range(1500)])
    payload = await replace(gql, cid, long)
    assert payload["userErrors"] == []
    payload = await replace(gql, cid, [*long, *turns("one more")])
    assert payload["userErrors"] == []
    stored = await state(gql, cid)
    assert stored["messageCount"] == 1501
    assert stored["transcript"][-2:] == [*long[-1:], *turns("one more")]
    # The bound a whole transcript keeps: a hundred appends' worth.
    payload = await replace(gql, cid, turns(*["x"] * 100_001))
    assert errors(payload) == [("LIMIT_EXCEEDED", ["messages"])]
    assert await state(gql, cid) == stored


async def test_append_of_a_message_over_1_mib_is_refused_with_its_index(
    gql: GraphQLClient,
) -> None:
    cid = await conversation_with(gql, turns("first"))
    before = await state(gql, cid)
    envelope = len(json.dumps({"role": "user", "content": ""}, separators=(",", ":")))
    at_limit = {"role": "user", "content": "x" * (1024 * 1024 - envelope)}
    over = {"role": "user", "content": "x" * (1024 * 1024 - envelope + 1)}
    payload = await append(gql, cid, [at_limit, over])
    assert errors(payload) == [("LIMIT_EXCEEDED", ["messages", "1"])]
    assert await state(gql, cid) == before
    payload = await append(gql, cid, [at_limit])
    assert payload["userErrors"] == []
    assert payload["messages"][0]["data"] == at_limit


async def test_append_size_limit_counts_utf8_bytes(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    # 300,000 four-byte characters: well under a million characters, over a MiB of UTF-8.
    payload = await append(gql, cid, [{"role": "user", "content": "🧪" * 300_000}])
    assert errors(payload) == [("LIMIT_EXCEEDED", ["messages", "0"])]


async def test_append_with_a_stale_expected_version_conflicts(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("one"))
    before = await state(gql, cid)
    payload = await append(gql, cid, turns("two"), expected_version=1)
    assert errors(payload) == [("CONFLICT", ["expectedVersion"])]
    assert await state(gql, cid) == before
    payload = await append(gql, cid, turns("two"), expected_version=before["version"])
    assert payload["userErrors"] == []
    assert [m["seq"] for m in payload["messages"]] == [2]


APPEND_COUNTED = """mutation($id: ID!, $m: [JSON!]!, $n: Int) {
  appendMessages(input: {conversationId: $id, messages: $m, expectedMessageCount: $n}) {
    messages { seq } userErrors { code field message } } }"""


async def test_append_with_an_expected_message_count_ignores_other_changes(
    gql: GraphQLClient,
) -> None:
    """An appender that owns a transcript but not the conversation (the entropic adapter,
    beside delegations and snapshots that bump the version): expectedVersion refused its
    append after every delegation; the message count changes with the transcript alone."""
    cid = await conversation_with(gql, turns("one"))
    await save_snapshot(gql, cid, turns("one"))  # a new version, no new message
    payload = (await gql(APPEND_COUNTED, {"id": cid, "m": turns("two"), "n": 1}))["appendMessages"]
    assert payload["userErrors"] == [] and [m["seq"] for m in payload["messages"]] == [2]
    # A second append over the same count: someone appended first, nothing is stored.
    before = await state(gql, cid)
    payload = (await gql(APPEND_COUNTED, {"id": cid, "m": turns("dup"), "n": 1}))["appendMessages"]
    assert errors(payload) == [("CONFLICT", ["expectedMessageCount"])]
    assert "holds 2 messages, not the expected 1" in payload["userErrors"][0]["message"]
    assert await state(gql, cid) == before
    payload = (await gql(APPEND_COUNTED, {"id": cid, "m": turns("x"), "n": -1}))["appendMessages"]
    assert errors(payload) == [("INVALID_INPUT", ["expectedMessageCount"])]
    assert await state(gql, cid) == before


@pytest.mark.parametrize("bad_id", ["9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60", "not-a-uuid"])
async def test_append_to_an_unknown_conversation_is_not_found(
    gql: GraphQLClient, bad_id: str
) -> None:
    payload = await append(gql, bad_id, turns("x"))
    assert errors(payload) == [("NOT_FOUND", ["conversationId"])]


async def test_append_to_another_owners_conversation_is_not_found(
    server: Server, gql: GraphQLClient
) -> None:
    bob = await other_owner(server, gql)
    theirs = (await create(bob))["id"]
    payload = await append(gql, theirs, turns("intrusion"))
    assert errors(payload) == [("NOT_FOUND", ["conversationId"])]
    assert (await state(bob, theirs))["messageCount"] == 0


async def test_a_read_token_cannot_append(server: Server, gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    reader = gql.as_(await server.token(scope="read"))
    payload = await append(reader, cid, turns("x"))
    assert [e["code"] for e in payload["userErrors"]] == ["FORBIDDEN"]
    assert (await state(gql, cid))["messageCount"] == 0


# -- replaceTranscript ------------------------------------------------------------------------


async def test_replace_keeps_the_common_prefix_and_rewrites_only_the_rest(
    gql: GraphQLClient,
) -> None:
    cid = await conversation_with(gql, turns("a", "b", "c", "d"))
    before = (await state(gql, cid))["messages"]["nodes"]
    new = turns("a", "b", "X", "d", "e")
    payload = await replace(gql, cid, new)
    assert payload["userErrors"] == []
    assert payload["conversation"]["transcript"] == new
    assert payload["conversation"]["messageCount"] == 5
    after = (await state(gql, cid))["messages"]["nodes"]
    assert [n["seq"] for n in after] == [1, 2, 3, 4, 5]
    assert [n["createdAt"] for n in after[:2]] == [n["createdAt"] for n in before[:2]]
    # "d" is unchanged but follows a changed message: it is rewritten at its position.
    assert all(ts(n["createdAt"]) > ts(before[-1]["createdAt"]) for n in after[2:])


async def test_replace_with_a_shorter_transcript_after_compaction(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("a", "b", "c", "d", "e"))
    compacted = [{"role": "system", "content": "summary of a..e"}, {"role": "user", "content": "f"}]
    payload = await replace(gql, cid, compacted)
    assert payload["userErrors"] == []
    current = await state(gql, cid)
    assert current["transcript"] == compacted
    assert current["messageCount"] == 2
    assert [n["seq"] for n in current["messages"]["nodes"]] == [1, 2]
    appended = await append(gql, cid, turns("g"))
    assert [m["seq"] for m in appended["messages"]] == [3]


async def test_replace_that_only_truncates_keeps_the_prefix_rows(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("a", "b", "c"))
    before = (await state(gql, cid))["messages"]["nodes"]
    await replace(gql, cid, turns("a", "b"))
    after = await state(gql, cid)
    assert after["transcript"] == turns("a", "b")
    assert after["messages"]["nodes"] == before[:2]


async def test_replace_with_an_identical_transcript_writes_no_new_messages(
    gql: GraphQLClient,
) -> None:
    messages = [ODD_MESSAGE, *turns("b", "c")]
    cid = await conversation_with(gql, messages)
    before = await state(gql, cid)
    payload = await replace(gql, cid, messages)
    assert payload["userErrors"] == []
    after = await state(gql, cid)
    assert after["messages"]["nodes"] == before["messages"]["nodes"]
    assert after["transcript"] == messages


async def test_replace_extends_a_transcript_by_writing_only_the_new_tail(
    gql: GraphQLClient,
) -> None:
    cid = await conversation_with(gql, turns("a", "b"))
    before = (await state(gql, cid))["messages"]["nodes"]
    await replace(gql, cid, turns("a", "b", "c"))
    after = (await state(gql, cid))["messages"]["nodes"]
    assert after[:2] == before
    assert after[2]["seq"] == 3 and ts(after[2]["createdAt"]) > ts(before[1]["createdAt"])


async def test_replace_detects_a_change_in_key_order_or_number_type(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, [{"role": "user", "a": 1, "b": 2}, {"role": "user", "n": 1}])
    changed = [{"role": "user", "b": 2, "a": 1}, {"role": "user", "n": 1.0}]
    await replace(gql, cid, changed)
    transcript = (await state(gql, cid))["transcript"]
    assert [list(m) for m in transcript] == [["role", "b", "a"], ["role", "n"]]
    assert type(transcript[1]["n"]) is float


async def test_replace_to_an_empty_transcript(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("a", "b"))
    payload = await replace(gql, cid, [])
    assert payload["userErrors"] == []
    current = await state(gql, cid)
    assert (current["transcript"], current["messageCount"]) == ([], 0)


async def test_replace_bumps_the_version(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("a"))
    version = (await state(gql, cid))["version"]
    payload = await replace(gql, cid, turns("a", "b"))
    assert payload["conversation"]["version"] == version + 1


async def test_replace_with_a_stale_expected_version_conflicts_and_writes_nothing(
    gql: GraphQLClient,
) -> None:
    cid = await conversation_with(gql, turns("a", "b"))
    await append(gql, cid, turns("c"))
    before = await state(gql, cid)
    payload = await replace(
        gql, cid, turns("z"), expectedVersion=2, metadata={"lost": True}, provider="p"
    )
    assert errors(payload) == [("CONFLICT", ["expectedVersion"])]
    assert await state(gql, cid) == before
    stored = await get(gql, cid)
    assert stored is not None and stored["metadata"] == {} and stored["provider"] is None
    payload = await replace(gql, cid, turns("z"), expectedVersion=before["version"])
    assert payload["userErrors"] == []
    assert payload["conversation"]["transcript"] == turns("z")


async def test_concurrent_replaces_with_the_same_expected_version_let_exactly_one_win(
    gql: GraphQLClient,
) -> None:
    cid = await conversation_with(gql, turns("a"))
    version = (await state(gql, cid))["version"]
    writers = [
        replace(gql, cid, turns("a", f"writer {i}"), expectedVersion=version) for i in range(6)
    ]
    payloads = await asyncio.gather(*writers)
    winners = [p for p in payloads if not p["userErrors"]]
    assert len(winners) == 1
    assert all(
        errors(p) == [("CONFLICT", ["expectedVersion"])] for p in payloads if p["userErrors"]
    )
    current = await state(gql, cid)
    assert current["transcript"] == winners[0]["conversation"]["transcript"]
    assert current["version"] == version + 1


async def test_replace_rejects_an_invalid_message_and_writes_nothing(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("a", "b"))
    before = await state(gql, cid)
    payload = await replace(gql, cid, [*turns("a"), {"content": "no role"}], metadata={"x": 1})
    assert errors(payload) == [("INVALID_INPUT", ["messages", "1"])]
    assert await state(gql, cid) == before
    stored = await get(gql, cid)
    assert stored is not None and stored["metadata"] == {}


async def test_replace_of_an_unknown_conversation_is_not_found(gql: GraphQLClient) -> None:
    payload = await replace(gql, str(uuid.uuid4()), turns("a"))
    assert errors(payload) == [("NOT_FOUND", ["conversationId"])]


async def test_replace_changes_provider_and_model_only_when_non_empty(
    gql: GraphQLClient,
) -> None:
    cid = (await create(gql))["id"]
    first = await replace(gql, cid, turns("a"), provider="openai", model="gpt-5")
    assert (first["conversation"]["provider"], first["conversation"]["model"]) == (
        "openai",
        "gpt-5",
    )
    for keep in ({"provider": "", "model": ""}, {"provider": None, "model": None}, {}):
        payload = await replace(gql, cid, turns("a"), **keep)
        assert payload["userErrors"] == []
        assert (payload["conversation"]["provider"], payload["conversation"]["model"]) == (
            "openai",
            "gpt-5",
        )
    payload = await replace(gql, cid, turns("a"), model="gpt-5-mini")
    assert (payload["conversation"]["provider"], payload["conversation"]["model"]) == (
        "openai",
        "gpt-5-mini",
    )


async def test_replace_changes_provider_response_id_only_when_given(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    payload = await replace(gql, cid, turns("a"), providerResponseId="resp_1")
    assert payload["conversation"]["providerResponseId"] == "resp_1"
    payload = await replace(gql, cid, turns("a", "b"))
    assert payload["conversation"]["providerResponseId"] == "resp_1"
    payload = await replace(gql, cid, turns("a", "b"), providerResponseId="")
    assert payload["conversation"]["providerResponseId"] == ""
    payload = await replace(gql, cid, turns("a", "b"), providerResponseId=None)
    assert payload["conversation"]["providerResponseId"] is None


async def test_replace_sets_metadata_when_given_and_keeps_it_otherwise(
    gql: GraphQLClient,
) -> None:
    cid = (await create(gql, metadata={"token_id": "t1"}))["id"]
    payload = await replace(gql, cid, turns("a"))
    assert payload["conversation"]["metadata"] == {"token_id": "t1"}
    payload = await replace(gql, cid, turns("a"), metadata={"token_id": "t1", "turn": 2})
    assert payload["conversation"]["metadata"] == {"token_id": "t1", "turn": 2}
    payload = await replace(gql, cid, turns("a"), metadata=["not", "an", "object"])
    assert errors(payload) == [("INVALID_INPUT", ["metadata"])]
    stored = await get(gql, cid)
    assert stored is not None and stored["metadata"] == {"token_id": "t1", "turn": 2}


@pytest.mark.parametrize("field", ["provider", "model", "providerResponseId"])
async def test_replace_rejects_nul_in_provider_fields_and_writes_nothing(
    gql: GraphQLClient, field: str
) -> None:
    cid = await conversation_with(gql, turns("a"))
    before = await state(gql, cid)
    payload = await replace(gql, cid, turns("a", "b"), **{field: "bad\u0000value"})
    assert errors(payload) == [("INVALID_INPUT", [field])]
    assert await state(gql, cid) == before


# -- the messages connection and transcript(fromSeq) ------------------------------------------


async def test_messages_page_forward_with_first_and_after(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns(*[f"m{i}" for i in range(1, 6)]))
    first = await messages_page(gql, cid, first=2)
    assert [n["seq"] for n in first["nodes"]] == [1, 2]
    assert first["pageInfo"]["hasNextPage"] is True
    assert first["pageInfo"]["hasPreviousPage"] is False
    assert first["pageInfo"]["startCursor"] == first["edges"][0]["cursor"]
    assert first["pageInfo"]["endCursor"] == first["edges"][1]["cursor"]
    assert first["totalCount"] == 5
    second = await messages_page(gql, cid, first=2, after=first["pageInfo"]["endCursor"])
    assert [n["seq"] for n in second["nodes"]] == [3, 4]
    assert second["pageInfo"]["hasPreviousPage"] is True
    assert second["pageInfo"]["hasNextPage"] is True
    assert second["totalCount"] == 5
    last = await messages_page(gql, cid, first=2, after=second["pageInfo"]["endCursor"])
    assert [n["seq"] for n in last["nodes"]] == [5]
    assert last["pageInfo"]["hasNextPage"] is False
    assert [e["node"]["content"] for e in last["edges"]] == ["m5"]


async def test_messages_page_backward_with_last_and_before(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns(*[f"m{i}" for i in range(1, 6)]))
    tail = await messages_page(gql, cid, last=2)
    assert [n["seq"] for n in tail["nodes"]] == [4, 5]
    assert tail["pageInfo"]["hasPreviousPage"] is True
    assert tail["pageInfo"]["hasNextPage"] is False
    assert tail["pageInfo"]["startCursor"] == tail["edges"][0]["cursor"]
    middle = await messages_page(gql, cid, last=2, before=tail["pageInfo"]["startCursor"])
    assert [n["seq"] for n in middle["nodes"]] == [2, 3]
    assert middle["pageInfo"]["hasPreviousPage"] is True
    assert middle["pageInfo"]["hasNextPage"] is True
    head = await messages_page(gql, cid, last=2, before=middle["pageInfo"]["startCursor"])
    assert [n["seq"] for n in head["nodes"]] == [1]
    assert head["pageInfo"]["hasPreviousPage"] is False
    assert head["totalCount"] == 5


async def test_messages_between_after_and_before(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns(*"abcdef"))
    edges = (await messages_page(gql, cid))["edges"]
    window = await messages_page(gql, cid, after=edges[0]["cursor"], before=edges[4]["cursor"])
    assert [n["seq"] for n in window["nodes"]] == [2, 3, 4]
    # Neither first nor last: the server's page; past `before` there are messages (it said
    # hasNextPage false, by the page cap alone, where hasPreviousPage says what is there).
    assert window["pageInfo"] == {
        **window["pageInfo"],
        "hasNextPage": True,
        "hasPreviousPage": True,
    }
    head = await messages_page(gql, cid, before=edges[2]["cursor"])
    assert [n["seq"] for n in head["nodes"]] == [1, 2]
    assert (head["pageInfo"]["hasNextPage"], head["pageInfo"]["hasPreviousPage"]) == (True, False)
    whole = await messages_page(gql, cid)
    assert whole["pageInfo"]["hasNextPage"] is False


async def test_cursors_read_before_a_replace_shrank_the_transcript_say_what_is_there(
    gql: GraphQLClient,
) -> None:
    # Before, pageInfo said there was more beyond the cursor whenever one was given: a page
    # before the old fifth message said hasNextPage with one message left, and a page after
    # the old first said hasPreviousPage of an emptied transcript.
    cid = await conversation_with(gql, turns(*"abcde"))
    edges = (await messages_page(gql, cid))["edges"]
    first, fourth, fifth = edges[0]["cursor"], edges[3]["cursor"], edges[4]["cursor"]
    assert (await replace(gql, cid, turns("a")))["userErrors"] == []
    back = await messages_page(gql, cid, last=2, before=fifth)
    assert [n["seq"] for n in back["nodes"]] == [1]
    assert back["pageInfo"]["hasNextPage"] is False
    assert back["pageInfo"]["hasPreviousPage"] is False
    ahead = await messages_page(gql, cid, first=2, after=fourth)
    assert ahead["nodes"] == [] and ahead["pageInfo"]["hasPreviousPage"] is True
    assert (await replace(gql, cid, []))["userErrors"] == []
    for page in (
        await messages_page(gql, cid, after=first),
        await messages_page(gql, cid, last=2, before=fifth),
    ):
        assert page["nodes"] == [] and page["totalCount"] == 0
        assert page["pageInfo"]["hasPreviousPage"] is False
        assert page["pageInfo"]["hasNextPage"] is False
    # Grown again past the cursors: what lies beyond them is said again.
    assert (await append(gql, cid, turns(*"vwxyz")))["userErrors"] == []
    assert (await messages_page(gql, cid, after=first))["pageInfo"]["hasPreviousPage"] is True
    back = await messages_page(gql, cid, last=1, before=fifth)
    assert [n["seq"] for n in back["nodes"]] == [4]
    assert back["pageInfo"]["hasNextPage"] is True


async def test_messages_with_first_and_last_take_the_last_of_the_first(
    gql: GraphQLClient,
) -> None:
    # As the Relay connection spec reads both: before, `last` was left out and the page was
    # the first `first` messages.
    cid = await conversation_with(gql, turns(*"abcdef"))
    page = await messages_page(gql, cid, first=4, last=2)
    assert [n["seq"] for n in page["nodes"]] == [3, 4]
    assert page["pageInfo"]["hasNextPage"] is True  # more than 4
    assert page["pageInfo"]["hasPreviousPage"] is True  # more than 2
    first = (await messages_page(gql, cid, first=1))["edges"][0]["cursor"]
    page = await messages_page(gql, cid, first=3, last=5, after=first)
    assert [n["seq"] for n in page["nodes"]] == [2, 3, 4]
    assert page["pageInfo"]["hasNextPage"] is True
    assert page["pageInfo"]["hasPreviousPage"] is False  # 5 between the cursors
    page = await messages_page(gql, cid, first=10, last=2)
    assert [n["seq"] for n in page["nodes"]] == [5, 6]
    assert page["pageInfo"]["hasNextPage"] is False
    assert (await messages_page(gql, cid, first=0, last=2))["nodes"] == []
    assert (await messages_page(gql, cid, first=2, last=0))["nodes"] == []


async def test_messages_connection_defaults_and_caps_at_100(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns(*["x"] * 150))
    everything = await messages_page(gql, cid)
    assert len(everything["nodes"]) == 100 and everything["pageInfo"]["hasNextPage"] is True
    capped = await messages_page(gql, cid, first=500)
    assert [n["seq"] for n in capped["nodes"]] == list(range(1, 101))
    capped_back = await messages_page(gql, cid, last=500)
    assert [n["seq"] for n in capped_back["nodes"]] == list(range(51, 151))
    assert capped["totalCount"] == 150


async def test_messages_of_an_empty_conversation(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    page = await messages_page(gql, cid)
    assert page == {
        "edges": [],
        "nodes": [],
        "totalCount": 0,
        "pageInfo": {
            "hasNextPage": False,
            "hasPreviousPage": False,
            "startCursor": None,
            "endCursor": None,
        },
    }


@pytest.mark.parametrize(
    ("arg", "value"),
    [
        ("after", "bogus"),
        ("before", "bogus"),
        ("after", forge_cursor("a")),
        ("after", forge_cursor(10**30)),
        ("before", forge_cursor(-1)),
        ("after", forge_cursor(True)),
        ("after", forge_cursor(1, 2)),
        ("first", -1),
        ("last", -3),
    ],
)
async def test_messages_with_bad_paging_arguments_is_an_error(
    gql: GraphQLClient, arg: str, value: Any
) -> None:
    cid = await conversation_with(gql, turns("a"))
    response = await gql.post(MESSAGES, {"id": cid, arg: value})
    body = response.json()
    assert body["errors"]
    assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


async def test_transcript_from_seq_returns_the_tail(gql: GraphQLClient) -> None:
    messages = turns("a", "b", "c", "d")
    cid = await conversation_with(gql, messages)

    async def transcript(from_seq: int | None) -> Any:
        variables: dict[str, Any] = {"id": cid}
        if from_seq is not None:
            variables["from"] = from_seq
        return (await gql(TRANSCRIPT, variables))["conversation"]["transcript"]

    assert await transcript(None) == messages
    assert await transcript(1) == messages
    assert await transcript(3) == messages[2:]
    assert await transcript(4) == messages[3:]
    assert await transcript(5) == []
    assert await transcript(0) == messages
    assert await transcript(-7) == messages


async def test_transcripts_of_several_conversations_in_one_query(gql: GraphQLClient) -> None:
    a = await conversation_with(gql, turns("a1", "a2", "a3"))
    b = await conversation_with(gql, turns("b1", "b2"))
    data = await gql(
        "query($a: ID!, $b: ID!) { a: conversation(id: $a) { all: transcript tail: transcript"
        "(fromSeq: 2) } b: conversation(id: $b) { all: transcript tail: transcript(fromSeq: 2) } }",
        {"a": a, "b": b},
    )
    assert data == {
        "a": {"all": turns("a1", "a2", "a3"), "tail": turns("a2", "a3")},
        "b": {"all": turns("b1", "b2"), "tail": turns("b2")},
    }


# -- snapshots --------------------------------------------------------------------------------


async def test_save_snapshot_counts_the_messages_itself(gql: GraphQLClient) -> None:
    cid = await conversation_with(gql, turns("live"))
    history = [ODD_MESSAGE, *turns("a", "b")]
    snapshot = await save_snapshot(gql, cid, history)
    assert snapshot["messageCount"] == 3
    assert snapshot["messages"] == history
    assert [list(m) for m in snapshot["messages"]] == [list(m) for m in history]
    assert snapshot["conversation"] == {"id": cid}
    # A snapshot records history; it leaves the live transcript alone.
    current = await state(gql, cid)
    assert current["transcript"] == turns("live")
    assert current["version"] == 3


async def test_save_snapshot_rejects_invalid_messages_and_writes_nothing(
    gql: GraphQLClient,
) -> None:
    cid = (await create(gql))["id"]
    data = await gql(
        "mutation($id: ID!, $m: [JSON!]!) { saveSnapshot(input: {conversationId: $id, "
        "messages: $m}) { snapshot { id } userErrors { code field } } }",
        {"id": cid, "m": [*turns("a"), {"role": ""}]},
    )
    assert data["saveSnapshot"] == {
        "snapshot": None,
        "userErrors": [{"code": "INVALID_INPUT", "field": ["messages", "1"]}],
    }
    assert (await gql(SNAPSHOTS, {"id": cid}))["conversation"]["snapshots"]["totalCount"] == 0


async def test_save_snapshot_to_an_unknown_conversation_is_not_found(gql: GraphQLClient) -> None:
    data = await gql(
        "mutation($id: ID!) { saveSnapshot(input: {conversationId: $id, messages: []}) "
        "{ snapshot { id } userErrors { code field } } }",
        {"id": str(uuid.uuid4())},
    )
    assert data["saveSnapshot"]["userErrors"] == [
        {"code": "NOT_FOUND", "field": ["conversationId"]}
    ]


async def test_snapshots_connection_lists_them_oldest_first(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    saved = [await save_snapshot(gql, cid, turns(*["x"] * n)) for n in (1, 2, 3)]
    page = (await gql(SNAPSHOTS, {"id": cid, "first": 2}))["conversation"]["snapshots"]
    assert [e["node"]["id"] for e in page["edges"]] == [saved[0]["id"], saved[1]["id"]]
    assert [e["node"]["messageCount"] for e in page["edges"]] == [1, 2]
    assert page["totalCount"] == 3
    assert page["pageInfo"]["hasNextPage"] is True
    rest = (await gql(SNAPSHOTS, {"id": cid, "first": 2, "after": page["pageInfo"]["endCursor"]}))[
        "conversation"
    ]["snapshots"]
    assert [e["node"]["id"] for e in rest["edges"]] == [saved[2]["id"]]
    assert rest["pageInfo"] == {
        "hasNextPage": False,
        "hasPreviousPage": True,
        "endCursor": rest["edges"][0]["cursor"],
    }


async def test_a_page_of_snapshots_reads_no_other_snapshots_messages(
    gql: GraphQLClient, server: Server
) -> None:
    """Each snapshot holds a whole history: a page of them, and their count, read every
    snapshot of the conversation with its messages (`snapshots(first: 1) { totalCount }`
    of a conversation compacted a hundred times read a hundred histories)."""
    cid = (await create(gql))["id"]
    saved = [await save_snapshot(gql, cid, turns(f"history {n}")) for n in range(3)]
    heads = """query($id: ID!) { conversation(id: $id) {
      snapshots(first: 1) { totalCount nodes { id messageCount } } } }"""
    async with server.statements(lambda s: "snapshot" in s) as seen:
        page = (await gql(heads, {"id": cid}))["conversation"]["snapshots"]
    assert page == {"totalCount": 3, "nodes": [{"id": saved[0]["id"], "messageCount": 1}]}
    assert seen and not [s for s in seen if "snapshot.messages" in s], seen
    # The messages of a page's snapshots, those of a list's conversations at once.
    other = (await create(gql))["id"]
    await save_snapshot(gql, other, turns("elsewhere"))
    both = await gql(
        """query($a: ID!, $b: ID!, $after: String) {
          a: conversation(id: $a) { snapshots(first: 1, after: $after) { nodes { messages } } }
          b: conversation(id: $b) { snapshots { nodes { messages } } } }""",
        {
            "a": cid,
            "b": other,
            "after": (await gql(SNAPSHOTS, {"id": cid, "first": 1}))["conversation"]["snapshots"][
                "pageInfo"
            ]["endCursor"],
        },
    )
    assert both == {
        "a": {"snapshots": {"nodes": [{"messages": turns("history 1")}]}},
        "b": {"snapshots": {"nodes": [{"messages": turns("elsewhere")}]}},
    }


async def test_node_resolves_a_snapshot(gql: GraphQLClient) -> None:
    cid = (await create(gql))["id"]
    snapshot = await save_snapshot(gql, cid, turns("a", "b"))
    data = await gql(
        "query($id: ID!) { node(id: $id) { __typename id ... on Snapshot { messageCount "
        "messages conversation { id } } } }",
        {"id": snapshot["id"]},
    )
    assert data["node"] == {
        "__typename": "Snapshot",
        "id": snapshot["id"],
        "messageCount": 2,
        "messages": turns("a", "b"),
        "conversation": {"id": cid},
    }


async def test_another_owners_snapshot_reads_as_null(server: Server, gql: GraphQLClient) -> None:
    bob = await other_owner(server, gql)
    theirs = (await create(bob))["id"]
    snapshot = await save_snapshot(bob, theirs, turns("secret"))
    data = await gql("query($id: ID!) { node(id: $id) { id } }", {"id": snapshot["id"]})
    assert data["node"] is None
