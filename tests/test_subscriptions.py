"""`conversationEvents` over a real WebSocket (graphql-transport-ws) to a real uvicorn process,
with the writes made over HTTP to the same server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from graph.settings import Settings
from tests.conftest import GraphQLClient
from tests.operations import (
    APPEND,
    COMPLETE,
    CONVERSATION_EVENTS,
    DELETE,
    READ,
    REPLACE,
    UPDATE,
    VIEWER,
    append,
    create,
    delegate,
    read,
    touch,
)
from tests.ws import PROTOCOL, SYNC_TIMEOUT, Closed, Session, connect, subscribed, until_live

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

# The live-server fixtures; imported as a plugin, not by name, so that pytest rewrites its asserts.
pytest_plugins = ["tests.live_server"]

SNAPSHOT = """mutation($id: ID!, $m: [JSON!]!) {
  saveSnapshot(input: {conversationId: $id, messages: $m}) {
    snapshot { id messageCount } userErrors { code } } }"""


async def watch(socket: Session, conversation_id: str, *, op: str = "1") -> None:
    """Subscribe `op` to every field of the conversation's events."""
    await socket.subscribe(CONVERSATION_EVENTS, {"id": conversation_id}, op=op)


async def expect_committed(gql: GraphQLClient, conversation_id: str, event: dict[str, Any]) -> None:
    """An event arrives after its commit: a read made on receiving it already sees the write."""
    stored = await read(gql, conversation_id)
    assert stored is not None and stored["version"] == event["version"], (stored, event)


# -- authentication of the WebSocket ---------------------------------------


@pytest.fixture
async def alice(live_server: LiveServer) -> AsyncIterator[GraphQLClient]:
    """A WRITE client of user:alice in site:1 over HTTP to the live server."""
    async with live_server.client(await live_server.token()) as gql:
        yield gql


async def test_token_in_upgrade_header(live_server: LiveServer, alice: GraphQLClient) -> None:
    cid = await create(alice)
    async with subscribed(live_server, alice, cid) as socket:
        appended = await append(alice, cid, "hello")
        event = await socket.event()
    assert event["kind"] == "MESSAGES_APPENDED"
    assert event["messages"] == appended["messages"]


async def test_token_in_connection_init_payload(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    cid = await create(alice)
    async with connect(live_server) as socket:
        await socket.init(alice.token)
        await watch(socket, cid)
        await until_live(socket, alice, cid)
        appended = await append(alice, cid, "over init")
        event = await socket.event()
    assert (event["kind"], event["conversationId"]) == ("MESSAGES_APPENDED", cid)
    assert event["messages"] == appended["messages"]


async def test_bad_token_in_header_is_closed(live_server: LiveServer) -> None:
    valid = await live_server.token()
    async with connect(live_server, token="cvg_not-a-token") as socket:
        # A good token in connection_init must not rescue a bad one in the header.
        with contextlib.suppress(Closed):
            await socket.send_init(valid)
        assert await socket.close_code() in (4401, 4403)


async def test_bad_token_in_connection_init_is_closed_4403(live_server: LiveServer) -> None:
    async with connect(live_server) as socket:
        await socket.send_init("cvg_not-a-token")
        assert await socket.close_code() == 4403


async def test_an_oversized_message_closes_the_socket_1009(live_server: LiveServer) -> None:
    token = await live_server.token()
    async with connect(live_server, token=token) as socket:
        await socket.init()
        query = "subscription { __typename }\n#" + "x" * (5 * Settings().max_query_chars)
        with contextlib.suppress(Closed):
            await socket.subscribe(query)
        assert await socket.close_code() == 1009  # "message too big"
    async with connect(live_server, token=token) as socket:
        await socket.init()  # the server still takes new sockets


async def test_revoked_token_is_closed(live_server: LiveServer) -> None:
    token = await live_server.token(label="soon revoked")
    async with live_server.client(token) as gql:
        assert (await gql(VIEWER))["viewer"] == {"ownerKey": "alice"}
        listed = (await live_server.cli("token", "list")).splitlines()
        (token_id,) = [line.split("\t")[0] for line in listed if "\tsoon revoked\t" in line]
        await live_server.cli("token", "revoke", token_id)
        assert (await gql.post(VIEWER)).status_code == 401
    async with connect(live_server) as socket:
        await socket.send_init(token)
        assert await socket.close_code() == 4403


async def test_no_token_is_closed_4403_after_connection_init(live_server: LiveServer) -> None:
    async with connect(live_server) as socket:
        await socket.send_init()
        assert await socket.close_code() == 4403


async def test_subscribe_before_connection_init_is_refused(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    cid = await create(alice)
    async with connect(live_server, token=alice.token) as socket:
        await watch(socket, cid)
        assert await socket.close_code() == 4401


# Never run: each frame below is refused for its shape before it is parsed.
_SUBSCRIPTION = "subscription { __typename }"


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ("[]", "a message must be a JSON object"),
        ("5", "a message must be a JSON object"),
        ('"subscribe"', "a message must be a JSON object"),
        ("null", "a message must be a JSON object"),
        ('{"id": "1", "type": "subscribe", "payload": "x"}', "payload of a subscribe"),
        ('{"id": ["1"], "type": "subscribe", "payload": {"query": "{ a }"}}', "id of a"),
        ('{"id": 1, "type": "complete"}', "id of a complete"),
        ('{"id": "1", "type": "subscribe", "payload": {"query": 5}}', "query must be"),
        (
            f'{{"id": "1", "type": "subscribe", "payload": {{"query": "{_SUBSCRIPTION}", '
            '"variables": 5}}',
            "variables must be",
        ),
        (
            f'{{"id": "1", "type": "subscribe", "payload": {{"query": "{_SUBSCRIPTION}", '
            '"operationName": 5}}',
            "operationName must be",
        ),
        (
            f'{{"id": "1", "type": "subscribe", "payload": {{"query": "{_SUBSCRIPTION}", '
            '"extensions": []}}',
            "extensions must be",
        ),
        # JSON, with a number the service does not keep: was "must be valid JSON".
        (
            '{"id": "1", "type": "subscribe", "payload": {"query": "{ a }", '
            f'"variables": {{"n": {"7" * 4301}}}}}}}',
            "JSON integers may have at most 4300 digits",
        ),
        ('{"type": "ping", "payload": {"n": 1e400}}', "JSON numbers must be finite"),
        ("{", "WebSocket message must be valid JSON"),
    ],
)
async def test_a_malformed_message_closes_the_socket_4400(
    live_server: LiveServer, frame: str, reason: str
) -> None:
    """As the protocol asks, with a reason; not a dropped connection nor an INTERNAL error."""
    async with connect(live_server, token=await live_server.token()) as socket:
        await socket.init()
        await socket.send_raw(frame)
        code, said = await socket.closed()
    assert code == 4400
    assert reason in said


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"query": "{"}, "Syntax Error"),
        ({"query": "query A { viewer { ownerKey } }", "operationName": "B"}, "Unknown operation"),
    ],
)
async def test_an_operation_that_cannot_run_closes_the_socket_4400_saying_why(
    live_server: LiveServer, payload: dict[str, Any], reason: str
) -> None:
    """Strawberry's protocol handling: a syntax error escaped the operation (only `complete`
    came, the reason in the server's log), an unknown operation was a masked INTERNAL."""
    async with connect(live_server, token=await live_server.token()) as socket:
        await socket.init()
        await socket.send({"id": "1", "type": "subscribe", "payload": payload})
        code, said = await socket.closed()
    assert code == 4400
    assert reason in said


_LONG = "é" * 100  # 200 bytes of UTF-8


@pytest.mark.parametrize(
    ("frame", "code", "reason"),
    [
        # The reasons strawberry gives name what the client sent, and a close frame holds
        # 123 bytes of reason: uvicorn raised "control frame too long", the socket dropped
        # without a close frame (the client saw no code) and the log got a traceback.
        (
            {"id": _LONG, "type": "subscribe", "payload": {"query": VIEWER}},
            4409,
            "Subscriber for éé",
        ),
        ({"type": _LONG}, 4400, "Unknown message type: éé"),
        (
            {"id": "1", "type": "subscribe", "payload": {"query": VIEWER, "operationName": _LONG}},
            4400,
            "Unknown operation named",
        ),
    ],
)
async def test_a_close_whose_reason_names_a_long_value_is_sent_shortened(
    live_server: LiveServer, alice: GraphQLClient, frame: dict[str, Any], code: int, reason: str
) -> None:
    cid = await create(alice)
    async with connect(live_server, token=alice.token) as socket:
        await socket.init()
        if code == 4409:  # the same id as an operation still running
            await watch(socket, cid, op=_LONG)
            await until_live(socket, alice, cid, op=_LONG)
        await socket.send(frame)
        closed, said = await socket.closed()
    assert (closed, said[: len(reason)]) == (code, reason)
    assert len(said.encode()) <= 123 and said.endswith("…"), said
    assert "Traceback" not in live_server.logs()


async def test_an_operation_without_a_query_is_an_error_message(live_server: LiveServer) -> None:
    async with connect(live_server, token=await live_server.token()) as socket:
        await socket.init()
        await socket.send({"id": "1", "type": "subscribe", "payload": {"query": ""}})
        message = await socket.receive()
    assert message["type"] == "error" and message["id"] == "1", message
    assert "query" in message["payload"][0]["message"]
    assert message["payload"][0]["extensions"] == {"code": "GRAPHQL_VALIDATION_FAILED"}, message


async def test_a_variable_that_does_not_coerce_is_a_request_error_naming_it(
    live_server: LiveServer,
) -> None:
    """As over HTTP: the message names the variable, the error points at its definition and
    has no path (no field ran). It came placed at the subscription's field, its message
    without the variable's name."""
    query = "subscription Follow($id: ID!) { conversationEvents(conversationId: $id) { kind } }"
    async with connect(live_server, token=await live_server.token()) as socket:
        await socket.init()
        for variables in ({}, {"id": None}, {"id": [1]}):
            await socket.send(
                {
                    "id": "1",
                    "type": "subscribe",
                    "payload": {"query": query, "variables": variables},
                }
            )
            message = await socket.receive()
            assert message["type"] == "error" and message["id"] == "1", message
            (error,) = message["payload"]
            assert error["message"].startswith("Variable '$id'"), error
            assert error["locations"] == [{"line": 1, "column": 21}], error  # `$id: ID!`
            assert "path" not in error, error
            assert error["extensions"] == {"code": "GRAPHQL_VALIDATION_FAILED"}, error


async def test_a_subscribe_may_give_its_optional_fields_as_null(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    cid = await create(alice)
    async with connect(live_server, token=alice.token) as socket:
        await socket.init()
        payload = {"query": CONVERSATION_EVENTS, "variables": {"id": cid}}
        await socket.send(
            {
                "id": "1",
                "type": "subscribe",
                "payload": {**payload, "operationName": None, "extensions": None},
            }
        )
        await until_live(socket, alice, cid)
        appended = await append(alice, cid, "still served")
        assert (await socket.event())["messages"] == appended["messages"]


async def test_legacy_graphql_ws_protocol_is_not_offered(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    async with connect(live_server, token=alice.token, subprotocols=["graphql-ws"]) as socket:
        assert socket.subprotocol is None
        # The legacy protocol's opening message gets no answer but the close.
        with contextlib.suppress(Closed):
            await socket.send_init()
        assert await socket.close_code() == 4406
    # A client offering both gets the current protocol.
    async with connect(live_server, token=alice.token, subprotocols=["graphql-ws", PROTOCOL]) as (
        socket
    ):
        assert socket.subprotocol == PROTOCOL
        await socket.init()


# -- events of every write ---------------------------------------------------


async def test_every_write_delivers_one_event_after_commit(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    cid = await create(alice)
    async with subscribed(live_server, alice, cid, descendants=False) as socket:
        appended = await append(alice, cid, "one", "two")
        event = await socket.event()
        await expect_committed(alice, cid, event)
        assert event["kind"] == "MESSAGES_APPENDED"
        assert event["conversationId"] == cid
        assert event["version"] == appended["conversation"]["version"]
        assert event["messages"] == appended["messages"]
        assert [m["seq"] for m in event["messages"]] == [1, 2]
        assert event["delegation"] is None

        # A full-transcript save that keeps "one" rewrites from seq 2 on.
        replaced = await alice(
            REPLACE,
            {
                "id": cid,
                "m": [
                    {"role": "user", "content": "one"},
                    {"role": "assistant", "content": "2'"},
                    {"role": "user", "content": "three"},
                ],
            },
        )
        event = await socket.event()
        await expect_committed(alice, cid, event)
        assert event["kind"] == "TRANSCRIPT_REPLACED"
        assert event["version"] == replaced["replaceTranscript"]["conversation"]["version"]
        assert [(m["seq"], m["data"]["content"]) for m in event["messages"]] == [
            (2, "2'"),
            (3, "three"),
        ]

        updated = await alice(UPDATE, {"id": cid, "title": "renamed"})
        event = await socket.event()
        await expect_committed(alice, cid, event)
        assert event["kind"] == "CONVERSATION_UPDATED"
        assert event["version"] == updated["updateConversation"]["conversation"]["version"]
        assert event["messages"] is None

        snap = await alice(SNAPSHOT, {"id": cid, "m": [{"role": "user", "content": "old"}]})
        assert snap["saveSnapshot"]["userErrors"] == []
        event = await socket.event()
        await expect_committed(alice, cid, event)
        assert event["kind"] == "SNAPSHOT_SAVED"
        assert (event["messages"], event["delegation"]) == (None, None)

        delegation = await delegate(alice, cid, "research")
        event = await socket.event()
        await expect_committed(alice, cid, event)
        assert event["kind"] == "DELEGATION_CREATED"
        assert event["conversationId"] == cid
        assert event["version"] == delegation["parentConversation"]["version"]
        assert event["delegation"]["id"] == delegation["id"]
        assert event["delegation"]["status"] == "RUNNING"
        assert (
            event["delegation"]["childConversation"]["id"]
            == (delegation["childConversation"]["id"])
        )

        completed = await alice(COMPLETE, {"id": delegation["id"], "summary": "found it"})
        event = await socket.event()
        await expect_committed(alice, cid, event)
        assert event["kind"] == "DELEGATION_COMPLETED"
        assert (
            event["version"]
            == (completed["completeDelegation"]["delegation"]["parentConversation"]["version"])
        )
        assert (event["delegation"]["status"], event["delegation"]["summary"]) == (
            "COMPLETED",
            "found it",
        )

        # Nothing else was delivered in between: the next event is this write's.
        version = await touch(alice, cid)
        event = await socket.event()
        assert (event["kind"], event["version"]) == ("CONVERSATION_UPDATED", version)

        deleted = await alice(DELETE, {"id": cid})
        assert deleted["deleteConversation"]["deleted"] is True
        event = await socket.event()
        assert (event["kind"], event["conversationId"]) == ("CONVERSATION_DELETED", cid)
        assert await read(alice, cid) is None
        # The conversation is gone, so its stream ends.
        assert await socket.receive() == {"id": "1", "type": "complete"}


async def test_create_delegation_delivers_one_event_to_the_tree(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """With descendants included, the new child is announced by DELEGATION_CREATED alone."""
    cid = await create(alice)
    async with subscribed(live_server, alice, cid) as socket:
        delegation = await delegate(alice, cid)
        event = await socket.event()
        assert (event["kind"], event["conversationId"]) == ("DELEGATION_CREATED", cid)
        assert event["delegation"]["id"] == delegation["id"]
        version = await touch(alice, cid)
        event = await socket.event()
        assert (event["kind"], event["version"]) == ("CONVERSATION_UPDATED", version)


async def test_nested_fields_of_later_events_are_read_fresh(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """A connection lives long: what one event's fields loaded must not answer the next one."""
    cid = await create(alice)
    async with subscribed(live_server, alice, cid, descendants=False) as socket:
        delegation = await delegate(alice, cid)
        created = await socket.event()
        assert created["delegation"]["childConversation"]["messageCount"] == 0
        child = delegation["childConversation"]["id"]
        await append(alice, child, "work", "more work")
        await alice(COMPLETE, {"id": delegation["id"], "summary": "done"})
        completed = await socket.event()
    assert completed["kind"] == "DELEGATION_COMPLETED"
    assert completed["delegation"]["childConversation"]["messageCount"] == 2
    assert [m["content"] for m in completed["delegation"]["childConversation"]["transcript"]] == [
        "work",
        "more work",
    ]


# -- descendants ---------------------------------------------------------------


async def test_child_and_grandchild_events_reach_the_root(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    grandchild = (await delegate(alice, child))["childConversation"]["id"]
    async with subscribed(live_server, alice, root) as socket:
        appended = await append(alice, child, "from the child")
        event = await socket.event()
        assert (event["kind"], event["conversationId"]) == ("MESSAGES_APPENDED", child)
        assert event["version"] == appended["conversation"]["version"]
        assert event["messages"] == appended["messages"]
        await expect_committed(alice, child, event)

        appended = await append(alice, grandchild, "from the grandchild")
        event = await socket.event()
        assert (event["kind"], event["conversationId"]) == ("MESSAGES_APPENDED", grandchild)
        assert event["messages"] == appended["messages"]
        await expect_committed(alice, grandchild, event)


async def test_descendants_excluded_when_asked(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    async with subscribed(live_server, alice, root, descendants=False) as socket:
        await append(alice, child, "not for the root")
        await delegate(alice, child)  # a grandchild, under the excluded child
        appended = await append(alice, root, "for the root")
        event = await socket.event()
    # The child's writes came first; the first event is the root's own.
    assert (event["kind"], event["conversationId"]) == ("MESSAGES_APPENDED", root)
    assert event["messages"] == appended["messages"]


async def test_subscribing_to_a_child_sees_only_its_subtree(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    grandchild = (await delegate(alice, child))["childConversation"]["id"]
    async with subscribed(live_server, alice, child) as socket:
        await append(alice, root, "above the child")
        appended = await append(alice, grandchild, "below the child")
        event = await socket.event()
    assert (event["conversationId"], event["messages"]) == (grandchild, appended["messages"])


async def test_deleting_the_root_ends_a_child_subscription(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    async with subscribed(live_server, alice, child) as socket:
        await alice(DELETE, {"id": root})
        event = await socket.event()
        assert (event["kind"], event["conversationId"]) == ("CONVERSATION_DELETED", root)
        assert await socket.receive() == {"id": "1", "type": "complete"}
    assert await read(alice, child) is None


async def test_a_delete_s_event_is_at_the_time_of_the_delete(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """A delete's event carried the deleted row's updated_at, the time of its last write:
    a child transcript written to a while ago was announced deleted before the root's events
    that the stream had sent ahead of it."""
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    await append(alice, child, "written before")
    await asyncio.sleep(0.2)
    async with subscribed(live_server, alice, root) as socket:
        await touch(alice, root)
        touched = await socket.event()
        before = datetime.now(UTC)
        await alice(DELETE, {"id": child})
        event = await socket.event()
        assert (event["kind"], event["conversationId"]) == ("CONVERSATION_DELETED", child)
        assert datetime.fromisoformat(event["at"]) >= datetime.fromisoformat(touched["at"])
        assert datetime.fromisoformat(event["at"]) >= before - timedelta(seconds=1)


async def test_deleting_a_child_transcript_tells_its_parent_s_subscribers(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """The delete takes the child's delegation out of the parent's list: the parent's
    version moves and its stream says so, also a stream that leaves the descendants out,
    which was told nothing while its delegation list changed."""
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    async with (
        subscribed(live_server, alice, root, descendants=False) as own,
        subscribed(live_server, alice, root) as tree,
    ):
        # The second subscription's touches reached the first: read up to the last of them.
        live = (await read(alice, root) or {})["version"]
        while (await own.event())["version"] != live:
            pass
        assert (await alice(DELETE, {"id": child}))["deleteConversation"]["deleted"] is True
        version = (await read(alice, root) or {})["version"]
        event = await own.event()
        assert (event["kind"], event["conversationId"], event["version"]) == (
            "CONVERSATION_UPDATED",
            root,
            version,
        )
        deleted, updated = await tree.event(), await tree.event()
        assert (deleted["kind"], deleted["conversationId"]) == ("CONVERSATION_DELETED", child)
        assert (updated["kind"], updated["conversationId"], updated["version"]) == (
            "CONVERSATION_UPDATED",
            root,
            version,
        )
        # Nothing else came: the next event of either stream is the next write's.
        touched = await touch(alice, root)
        for socket in (own, tree):
            assert ((await socket.event())["version"]) == touched


async def test_completing_a_delegation_is_told_to_its_child_s_subscribers(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """The completion's DELEGATION_COMPLETED is the parent's event: a stream of the child
    (the inspector open on it, showing its delegation's status) was told nothing."""
    root = await create(alice)
    made = await delegate(alice, root)
    child = made["childConversation"]["id"]
    async with (
        subscribed(live_server, alice, child) as own,
        subscribed(live_server, alice, root) as tree,
    ):
        completed = await alice(COMPLETE, {"id": made["id"], "summary": "done"})
        assert completed["completeDelegation"]["userErrors"] == []
        event = await own.event()
        assert (event["kind"], event["conversationId"]) == ("CONVERSATION_UPDATED", child)
        await expect_committed(alice, child, event)
        # The tree's stream gets the parent's event, then the child's.
        seen = [await tree.event(), await tree.event()]
        assert [(e["kind"], e["conversationId"]) for e in seen] == [
            ("DELEGATION_COMPLETED", root),
            ("CONVERSATION_UPDATED", child),
        ]
        assert seen[1]["version"] == event["version"]


EXPIRE = """mutation($id: ID!, $at: DateTime) {
  updateConversation(input: {id: $id, expiresAt: $at}) {
    conversation { version } userErrors { code } } }"""


async def test_a_root_s_expiry_is_told_to_the_subscribers_of_each_child_it_reaches(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """The root's expiry is its child transcripts' too: a stream of a child (the inspector open
    on it, showing its expiry) was told nothing when it changed."""
    root = await create(alice)
    child = (await delegate(alice, root))["childConversation"]["id"]
    grandchild = (await delegate(alice, child))["childConversation"]["id"]
    at = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    async with subscribed(live_server, alice, child) as socket:
        updated = await alice(EXPIRE, {"id": root, "at": at})
        assert updated["updateConversation"]["userErrors"] == []
        seen = [await socket.event(), await socket.event()]
        assert [(e["kind"], e["conversationId"]) for e in seen] == [
            ("CONVERSATION_UPDATED", child),
            ("CONVERSATION_UPDATED", grandchild),
        ]
        for event in seen:
            await expect_committed(alice, event["conversationId"], event)
        # Nothing else came: the next event is the next write's.
        version = await touch(alice, child)
        assert (await socket.event())["version"] == version


# -- what must not be delivered ---------------------------------------------


async def test_failed_and_foreign_writes_deliver_nothing(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    cid = await create(alice)
    other = await create(alice, "another conversation")
    async with subscribed(live_server, alice, cid) as socket:
        stale = await alice(APPEND, {"id": cid, "m": [{"role": "user", "content": "x"}], "v": 1})
        assert stale["appendMessages"]["userErrors"][0]["code"] == "CONFLICT"
        invalid = await alice(APPEND, {"id": cid, "m": [{"content": "no role"}]})
        assert invalid["appendMessages"]["userErrors"][0]["code"] == "INVALID_INPUT"
        renamed = await alice(UPDATE, {"id": cid, "title": "late", "v": 1})
        assert renamed["updateConversation"]["userErrors"][0]["code"] == "CONFLICT"
        await append(alice, other, "elsewhere")
        appended = await append(alice, cid, "the only event")
        event = await socket.event()
    assert (event["kind"], event["messages"]) == ("MESSAGES_APPENDED", appended["messages"])
    stored = await read(alice, cid)
    assert stored is not None and [m["content"] for m in stored["transcript"]] == ["the only event"]


async def _subscription_error(socket: Session, conversation_id: str) -> dict[str, Any]:
    """The error a refused subscription gets, asserting it carries no data and then ends."""
    await watch(socket, conversation_id)
    message = await socket.receive()
    if message["type"] == "error":
        assert message["id"] == "1"
        return message["payload"][0]
    assert message["type"] == "next" and message["payload"]["data"] is None, message
    assert await socket.receive() == {"id": "1", "type": "complete"}
    return message["payload"]["errors"][0]


async def test_another_owner_cannot_subscribe(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    cid = await create(alice)
    for owner, workspace in (("user:bob", "site:1"), ("user:alice", "site:2")):
        token = await live_server.token(workspace=workspace, owner=owner)
        async with connect(live_server, token=token) as socket:
            await socket.init()
            error = await _subscription_error(socket, cid)
            assert error["extensions"]["code"] == "NOT_FOUND"
            # Writes to the conversation still reach nobody on this socket.
            await append(alice, cid, "private")
            with pytest.raises(TimeoutError):
                await socket.receive(within=SYNC_TIMEOUT)


async def test_unknown_conversation_cannot_be_subscribed(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    async with connect(live_server, token=alice.token) as socket:
        await socket.init()
        for unknown in ("00000000-0000-4000-8000-000000000000", "not-a-uuid"):
            error = await _subscription_error(socket, unknown)
            assert error["extensions"]["code"] == "NOT_FOUND"
            assert error["message"] == "conversation not found"


async def test_queries_over_one_socket_read_fresh_data(
    live_server: LiveServer, alice: GraphQLClient
) -> None:
    """A query sent over the WebSocket must not be answered from an earlier query's loads."""
    cid = await create(alice)
    async with connect(live_server, token=alice.token) as socket:
        await socket.init()
        versions = []
        for op in ("q1", "q2"):
            await socket.subscribe(READ, {"id": cid}, op=op)
            message = await socket.receive()
            assert message["type"] == "next" and message["id"] == op, message
            versions.append(message["payload"]["data"]["conversation"]["version"])
            assert await socket.receive() == {"id": op, "type": "complete"}
            await touch(alice, cid)
    assert versions == [1, 2]


# -- replicas ------------------------------------------------------------------


async def test_events_reach_subscribers_of_another_replica(
    database_url: str, live_servers: LiveServers
) -> None:
    """Two servers on one PostgreSQL: a write through one reaches a subscriber of the other,
    large messages included (beyond NOTIFY's 8000-byte payload)."""
    if database_url.startswith("sqlite"):
        pytest.skip("replicas share events through PostgreSQL LISTEN/NOTIFY only")
    reader, writer = await asyncio.gather(
        live_servers.start(database_url), live_servers.start(database_url)
    )
    token = await writer.token()
    async with reader.client(token) as via_reader, writer.client(token) as via_writer:
        cid = await create(via_writer)
        async with connect(reader, token=token) as socket:
            await socket.init()
            await watch(socket, cid)
            await until_live(socket, via_writer, cid)
            small = await append(via_writer, cid, "through the other replica")
            large = await append(via_writer, cid, "x" * 20_000)
            events = [await socket.event(), await socket.event()]
        assert [e["messages"] for e in events] == [small["messages"], large["messages"]]
        stored = await read(via_reader, cid)
        assert stored is not None and stored["version"] == events[-1]["version"]


EXPIRE = """mutation($id: ID!, $at: DateTime) {
  updateConversation(input: {id: $id, expiresAt: $at}) { userErrors { code } } }"""


@pytest.mark.parametrize("sweeper", ["server", "cli"])
async def test_the_retention_sweep_announces_what_it_deletes(
    database_url: str, live_servers: LiveServers, sweeper: str
) -> None:
    """An expired tree deleted by the sweep ends its subscriptions as a delete of its root
    does, one CONVERSATION_DELETED, whether the server's own sweep removes it or `convograph
    sweep` (through NOTIFY on PostgreSQL; a separate process on SQLite has nobody to tell).
    Each of the tree's conversations was announced that the delete's RETURNING held: one on
    SQLite, all three on PostgreSQL, counted the same way."""
    if sweeper == "cli" and database_url.startswith("sqlite"):
        pytest.skip("on SQLite only the server's own sweep reaches its subscribers")
    interval = "0.3" if sweeper == "server" else "0"
    server = await live_servers.start(
        database_url, env={"CONVOGRAPH_SWEEP_INTERVAL_SECONDS": interval}
    )
    async with server.client(await server.token()) as alice:
        cid = await create(alice)
        child = (await delegate(alice, cid))["childConversation"]["id"]
        await delegate(alice, child)
        async with subscribed(server, alice, cid) as socket:
            at = datetime.now(UTC) + timedelta(seconds=2)  # still ahead on a loaded machine
            assert (await alice(EXPIRE, {"id": cid, "at": at.isoformat()}))["updateConversation"][
                "userErrors"
            ] == []
            await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()) + 0.1)
            if sweeper == "cli":
                assert "removed 3 expired" in await server.cli("sweep")
            kinds: list[str] = []
            while not kinds or kinds[-1] != "CONVERSATION_DELETED":
                event = await socket.event()
                kinds.append(event["kind"])
            assert event["conversationId"] == cid
            # When the sweep deleted it: past its expiry, not its last write (the expiry's).
            assert datetime.fromisoformat(event["at"]) >= at
            assert await socket.receive() == {"id": "1", "type": "complete"}
        assert await read(alice, cid) is None
