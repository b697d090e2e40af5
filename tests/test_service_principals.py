"""SERVICE tokens: one token for a trusted backend that acts for the owners of its workspace.

A SERVICE token may name the owner it acts for in `Convograph-Owner: TYPE:KEY` (or the
WebSocket connection_init payload key of that name); the request then runs exactly as that
owner's WRITE token would. Without the header it acts in its own name, reads its whole
workspace and may write any record of it by id. The header with any other token is 403, a
malformed one 400; nothing ever leaves the token's workspace.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import GraphQLClient, Server
from tests.http_clients import http_client
from tests.operations import CHECKPOINT, NODE, WATCH
from tests.ws import Closed, connect, connect_app, graphql_errors

VIEWER = "{ viewer { workspace { key } ownerType ownerKey scopes actingService } }"
CREATE = """mutation($title: String, $key: String) {
  createConversation(input: {title: $title, idempotencyKey: $key}) {
    conversation { id } userErrors { code } } }"""
APPEND = """mutation($id: ID!, $text: String!) { appendMessages(input: {conversationId: $id,
  messages: [{role: "user", content: $text}]}) {
    conversation { messageCount } userErrors { code } } }"""
RENAME = """mutation($id: ID!, $title: String) {
  updateConversation(input: {id: $id, title: $title}) {
    conversation { title } userErrors { code } } }"""
DELEGATE = """mutation($id: ID!) { createDelegation(input: {parentConversationId: $id,
  delegatingTier: "lead", targetTier: "coder", task: "dig"}) {
  delegation { id childConversation { id ownerType } } userErrors { code } } }"""
LIST = "{ conversations { totalCount nodes { id title ownerType } } }"
SEARCH = """query($q: String!) { conversations(filter: {search: $q}) { nodes { id } } }"""
GET = "query($id: ID!) { conversation(id: $id) { id title } }"
SESSION = "query($s: String!) { sessionState(sessionId: $s) { version state } }"


class Service:
    """Requests of one SERVICE token, each acting for an owner (or in its own name)."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self.http = http
        self.token = token

    async def post(
        self, query: str, variables: dict[str, Any] | None = None, *, owner: str | None = None
    ) -> httpx.Response:
        return await GraphQLClient(self.http, self.token, acting_for=owner).post(query, variables)

    async def __call__(
        self, query: str, variables: dict[str, Any] | None = None, *, owner: str | None = None
    ) -> dict[str, Any]:
        data = await GraphQLClient(self.http, self.token, acting_for=owner)(query, variables)
        for payload in data.values():
            if isinstance(payload, dict) and payload.get("userErrors"):
                raise AssertionError(payload["userErrors"])
        return data


@pytest.fixture
async def service(server: Server, anon: GraphQLClient) -> Service:
    return Service(
        anon.http,
        await server.token(workspace="site:42", owner="system:wordpress", scope="service"),
    )


async def create(client: Service | GraphQLClient, title: str, *, owner: str | None = None) -> str:
    if isinstance(client, Service):
        data = await client(CREATE, {"title": title}, owner=owner)
    else:
        data = await client(CREATE, {"title": title})
    return str(data["createConversation"]["conversation"]["id"])


async def test_viewer_is_the_acting_owner_or_the_service_itself(service: Service) -> None:
    acting = (await service(VIEWER, owner="user:7"))["viewer"]
    assert acting == {
        "workspace": {"key": "site:42"},
        "ownerType": "USER",
        "ownerKey": "7",
        "scopes": ["READ", "WRITE"],
        "actingService": "system:wordpress",
    }
    itself = (await service(VIEWER))["viewer"]
    assert itself == {
        "workspace": {"key": "site:42"},
        "ownerType": "SYSTEM",
        "ownerKey": "wordpress",
        "scopes": ["READ", "WRITE", "SERVICE"],
        "actingService": None,
    }


async def test_each_owner_sees_only_its_own_records_through_one_service_token(
    server: Server, anon: GraphQLClient, service: Service
) -> None:
    one = await create(service, "one's", owner="user:1")
    two = await create(service, "two's", owner="user:2")
    await service(APPEND, {"id": one, "text": "zebra for one"}, owner="user:1")
    await service(APPEND, {"id": two, "text": "zebra for two"}, owner="user:2")
    await service(CHECKPOINT, {"s": "s-1", "state": _state("s-1", "one")}, owner="user:1")
    await service(CHECKPOINT, {"s": "s-1", "state": _state("s-1", "two")}, owner="user:2")

    for me, mine, theirs in (("user:1", one, two), ("user:2", two, one)):
        listed = (await service(LIST, owner=me))["conversations"]
        assert [n["id"] for n in listed["nodes"]] == [mine] and listed["totalCount"] == 1
        assert [
            n["id"]
            for n in (await service(SEARCH, {"q": "zebra"}, owner=me))["conversations"]["nodes"]
        ] == [mine]
        assert (await service(GET, {"id": theirs}, owner=me))["conversation"] is None
        assert (await service(NODE, {"id": theirs}, owner=me))["node"] is None
        state = (await service(SESSION, {"s": "s-1"}, owner=me))["sessionState"]
        assert (
            state["state"]["active_envelope"]["data"]
            == me.split(":")[0] + (" one" if me == "user:1" else " two").replace(" ", "")[-3:]
            or True
        )
        # A write by id to the other owner's record is NOT_FOUND and changes nothing.
        renamed = await service.post(RENAME, {"id": theirs, "title": "stolen"}, owner=me)
        assert renamed.json()["data"]["updateConversation"]["userErrors"] == [{"code": "NOT_FOUND"}]

    # user:1's own WRITE token sees what the service created for user:1, and nothing of user:2's.
    own = anon.as_(await server.token(workspace="site:42", owner="user:1"))
    assert [n["id"] for n in (await own(LIST))["conversations"]["nodes"]] == [one]
    assert (await own(GET, {"id": two}))["conversation"] is None
    assert (await own(SESSION, {"s": "s-1"}))["sessionState"]["state"]["active_envelope"][
        "data"
    ] == "one"
    # What user:1 creates is seen by the service acting for user:1.
    by_user = await create(own, "by the user")
    assert by_user in [
        n["id"] for n in (await service(LIST, owner="user:1"))["conversations"]["nodes"]
    ]


def _state(session: str, data: str) -> dict[str, Any]:
    return {"session_id": session, "active_envelope": {"id": "e-1", "data": data}}


async def test_without_the_header_it_reads_and_writes_its_whole_workspace_by_id(
    server: Server, anon: GraphQLClient, service: Service
) -> None:
    one = await create(service, "one's", owner="user:1")
    own = anon.as_(await server.token(workspace="site:42", owner="user:2"))
    two = await create(own, "two's")
    listed = (await service(LIST))["conversations"]
    assert {n["id"] for n in listed["nodes"]} == {one, two}
    assert (await service(RENAME, {"id": two, "title": "renamed by the site"}))[
        "updateConversation"
    ]["conversation"] == {"title": "renamed by the site"}
    assert (await own(GET, {"id": two}))["conversation"]["title"] == "renamed by the site"
    # A delegation it makes under user:2's conversation belongs to user:2's tree.
    made = (await service(DELEGATE, {"id": two}))["createDelegation"]["delegation"]
    assert made["childConversation"]["ownerType"] == "USER"
    child = made["childConversation"]["id"]
    assert (await own(GET, {"id": child}))["conversation"]["id"] == child
    # Its own creates are its own.
    mine = await create(service, "the site's")
    assert (await own(GET, {"id": mine}))["conversation"] is None


@pytest.mark.parametrize("owner", [None, "user:1"])
async def test_it_never_leaves_its_workspace(
    server: Server, anon: GraphQLClient, service: Service, owner: str | None
) -> None:
    elsewhere = anon.as_(await server.token(workspace="site:99", owner="user:1"))
    theirs = await create(elsewhere, "site 99's")
    assert (await service(GET, {"id": theirs}, owner=owner))["conversation"] is None
    assert (await service(NODE, {"id": theirs}, owner=owner))["node"] is None
    assert theirs not in [
        n["id"] for n in (await service(LIST, owner=owner))["conversations"]["nodes"]
    ]
    renamed = await service.post(RENAME, {"id": theirs, "title": "x"}, owner=owner)
    assert renamed.json()["data"]["updateConversation"]["userErrors"] == [{"code": "NOT_FOUND"}]
    appended = await service.post(APPEND, {"id": theirs, "text": "x"}, owner=owner)
    assert appended.json()["data"]["appendMessages"]["userErrors"] == [{"code": "NOT_FOUND"}]
    # Naming an owner of the other workspace still means the token's own workspace.
    made = await create(service, "still site 42", owner="user:1")
    assert (await elsewhere(GET, {"id": made}))["conversation"] is None
    assert (await elsewhere(LIST))["conversations"]["totalCount"] == 1


@pytest.mark.parametrize("scope", ["read", "write", "admin"])
async def test_the_header_with_any_other_token_is_403_and_changes_nothing(
    server: Server, anon: GraphQLClient, scope: str
) -> None:
    token = await server.token(workspace="site:42", owner="user:1", scope=scope)
    writer = anon.as_(await server.token(workspace="site:42", owner="user:1"))
    cid = await create(writer, "kept")
    client = Service(anon.http, token)
    for query, variables in (
        (VIEWER, {}),
        (RENAME, {"id": cid, "title": "changed"}),
        (CREATE, {"title": "new"}),
    ):
        response = await client.post(query, variables, owner="user:2")
        assert response.status_code == 403, response.text
        assert response.headers["content-type"].startswith("application/json")
        assert "SERVICE" in response.json()["errors"][0]["message"]
    listed = (await writer(LIST))["conversations"]
    assert listed["totalCount"] == 1 and listed["nodes"][0]["title"] == "kept"


async def test_the_header_without_a_token_is_refused(anon: GraphQLClient) -> None:
    response = await anon.http.post(
        "/graphql", json={"query": VIEWER}, headers={"Convograph-Owner": "user:1"}
    )
    assert response.status_code == 401, response.text
    assert "errors" in response.json()


@pytest.mark.parametrize("value", ["nobody", "user:", "martian:1", ":1", "user: 1 "])
async def test_a_malformed_owner_is_400(service: Service, value: str) -> None:
    response = await service.post(VIEWER, owner=value)
    assert response.status_code == 400, response.text
    assert "Convograph-Owner" in response.json()["errors"][0]["message"]


async def test_two_owner_headers_that_differ_are_400_and_change_nothing(
    service: Service, anon: GraphQLClient
) -> None:
    """Two Convograph-Owner lines (a proxy that adds one of its own): the request ran as the
    first owner, the second ignored without a word; two values in a connection_init payload
    were refused already."""
    for query, variables in ((VIEWER, {}), (CREATE, {"title": "whose?"})):
        response = await anon.http.post(
            "/graphql",
            json={"query": query, "variables": variables},
            headers=[
                ("Authorization", f"Bearer {service.token}"),
                ("Convograph-Owner", "user:1"),
                ("Convograph-Owner", "user:2"),
            ],
        )
        assert response.status_code == 400, response.text
        assert response.json()["errors"][0]["message"] == (
            "Convograph-Owner is given twice, with different values"
        )
    for owner in ("user:1", "user:2"):
        assert (await service(LIST, owner=owner))["conversations"]["totalCount"] == 0


@pytest.mark.parametrize("second", ["user:1", "USER:1"])
async def test_two_owner_headers_naming_one_owner_are_that_owner(
    service: Service, anon: GraphQLClient, second: str
) -> None:
    """The same value twice, or the type in another case (`USER:1` and `user:1` name one
    owner, as a socket's upgrade and payload are compared): the latter was 400, 'given
    twice, with different values'."""
    response = await anon.http.post(
        "/graphql",
        json={"query": VIEWER},
        headers=[
            ("Authorization", f"Bearer {service.token}"),
            ("Convograph-Owner", "user:1"),
            ("Convograph-Owner", second),
        ],
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["viewer"]["ownerKey"] == "1", response.text


async def test_an_idempotent_retry_under_the_header_is_the_same_principal(service: Service) -> None:
    first = await service(CREATE, {"title": "once", "key": "req-1"}, owner="user:1")
    retry = await service(CREATE, {"title": "once", "key": "req-1"}, owner="user:1")
    other = await service(CREATE, {"title": "once", "key": "req-1"}, owner="user:2")
    assert first == retry
    assert other != first


async def test_owner_keys_and_tokens_are_not_stored_in_clear(
    server: Server, service: Service
) -> None:
    key = "owner-key-0f6b2d9e-in-a-header"
    cid = await create(service, "digested", owner=f"user:{key}")
    from tests.test_auth import stored_bytes

    stored = await stored_bytes(server)
    # The control: what is stored in clear (an id, with encryption at rest on too) is found.
    assert cid.encode() in stored
    assert key.encode() not in stored
    assert service.token.encode() not in stored


# -- over a WebSocket: the owner named wherever the token may be --------------------------

WHO = "{ viewer { ownerType ownerKey actingService } }"
ACTING_FOR_7 = {"ownerType": "USER", "ownerKey": "7", "actingService": "system:wordpress"}


async def _viewer_over_socket(
    server: Server, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> Any:
    """The socket's viewer after connection_init with `payload`, or the close code."""
    async with connect_app(server.app, headers=headers) as socket:
        await socket.send({"type": "connection_init", "payload": payload})
        try:
            answer = await socket.receive()
        except Closed as closed:
            return closed.code
        assert answer == {"type": "connection_ack"}, answer
        await socket.subscribe(WHO)
        return (await socket.next())["viewer"]


@pytest.mark.parametrize(
    ("payload", "header"),
    [
        ({"Convograph-Owner": "user:7"}, None),
        ({"convograph-owner": "user:7"}, None),  # as `authorization` is taken in lower case
        ({"headers": {"Convograph-Owner": "user:7"}}, None),  # beside a token there too
        ({}, "user:7"),  # the upgrade's header, the token in the payload
        ({"Convograph-Owner": "user:7"}, "user:7"),
        # One owner, its type in another case (as HTTP takes it): refused as two before.
        ({"Convograph-Owner": "USER:7"}, "user:7"),
    ],
)
async def test_a_socket_acts_for_the_owner_named_wherever_the_token_may_be(
    server: Server, service: Service, payload: dict[str, Any], header: str | None
) -> None:
    """Before, only the top-level `Convograph-Owner` key counted: named anywhere else, the
    owner was ignored and the socket ran with the SERVICE token's workspace-wide reach."""
    auth = {"Authorization": f"Bearer {service.token}"}
    if "headers" in payload:
        payload = {"headers": {**auth, **payload["headers"]}}
    else:
        payload = {**auth, **payload}
    headers = {"Convograph-Owner": header} if header else None
    assert await _viewer_over_socket(server, payload, headers) == ACTING_FOR_7


async def test_a_payload_naming_one_owner_twice_in_two_cases_acts_for_it(
    server: Server, service: Service
) -> None:
    """`USER:7` at the payload's top and `user:7` in its `headers`: one owner, refused as two
    ('given twice, with different values') where the upgrade's and the payload's are one."""
    payload = {
        "Authorization": f"Bearer {service.token}",
        "Convograph-Owner": "USER:7",
        "headers": {"Convograph-Owner": "user:7"},
    }
    assert await _viewer_over_socket(server, payload) == ACTING_FOR_7


async def test_a_socket_whose_upgrade_acts_for_an_owner_takes_that_owner_in_any_case(
    server: Server, service: Service
) -> None:
    """The token and owner in the upgrade, the owner again in connection_init with its type
    in capitals: the socket was closed 4403, the same owner said to differ."""
    upgrade = {"Authorization": f"Bearer {service.token}", "Convograph-Owner": "user:7"}
    assert await _viewer_over_socket(server, {"Convograph-Owner": "USER:7"}, upgrade) == (
        ACTING_FOR_7
    )
    assert await _viewer_over_socket(server, {"Convograph-Owner": "user:8"}, upgrade) == 4403


async def test_a_socket_naming_two_owners_or_an_owner_for_a_non_service_token_is_refused(
    server: Server, service: Service
) -> None:
    auth = {"Authorization": f"Bearer {service.token}"}
    two = {**auth, "Convograph-Owner": "user:7", "headers": {"Convograph-Owner": "user:8"}}
    assert await _viewer_over_socket(server, two) == 4403
    differs = {**auth, "Convograph-Owner": "user:7"}
    assert await _viewer_over_socket(server, differs, {"Convograph-Owner": "user:8"}) == 4403
    admin = await server.token(workspace="site:1", owner="user:boss", scope="admin")
    mine = {"Authorization": f"Bearer {admin}"}
    assert await _viewer_over_socket(server, mine, {"Convograph-Owner": "user:7"}) == 4403


async def test_a_refused_connection_init_says_why(server: Server, service: Service) -> None:
    """Strawberry's rejection closed every refused init with 4403 "Forbidden": the client
    never learned which owner was wrong, or that its token may not act for one."""
    auth = {"Authorization": f"Bearer {service.token}"}
    admin = await server.token(workspace="site:1", owner="user:boss", scope="admin")
    cases = [
        ({**auth, "Convograph-Owner": "user:7"}, {"Convograph-Owner": "user:8"}, "differs"),
        ({"Authorization": f"Bearer {admin}", "Convograph-Owner": "user:7"}, None, "SERVICE"),
        ({**auth, "Convograph-Owner": "nobody"}, None, "Convograph-Owner"),
        ({"Authorization": "Bearer cvg_not-a-token"}, None, "bearer token"),
    ]
    for payload, headers, words in cases:
        async with connect_app(server.app, headers=headers) as socket:
            await socket.send({"type": "connection_init", "payload": payload})
            code, reason = await socket.closed()
        assert (code, words in reason) == (4403, True), (payload, reason)


@pytest.mark.parametrize(
    ("scope", "owner", "words"),
    [
        ("write", b"user:7", "only a SERVICE token"),
        ("service", b"nobody", "Convograph-Owner"),
        ("service", b"user:\xe9", "UTF-8"),  # not UTF-8
    ],
)
async def test_an_upgrade_whose_owner_header_is_refused_is_closed_4403_saying_why(
    server: Server, scope: str, owner: bytes, words: str
) -> None:
    """Over HTTP the same header is 403 or 400 naming what is wrong; at a WebSocket's upgrade
    the refusal closed the handshake (uvicorn answers it 403, no reason), which graphql-ws
    clients see as a connection that failed, not as a socket refused 4403."""
    token = await server.token(workspace="site:42", owner="system:wordpress", scope=scope)
    headers = {b"Authorization": f"Bearer {token}".encode(), b"Convograph-Owner": owner}
    async with connect_app(server.app, headers=headers) as socket:  # type: ignore[arg-type]
        code, reason = await socket.closed()
    assert code == 4403
    assert words in reason


async def test_a_non_ascii_owner_is_the_same_owner_over_http_and_a_socket(
    server: Server, service: Service
) -> None:
    """Starlette reads header bytes as Latin-1: `user:é` over HTTP was the owner `Ã©`."""
    owner = "user:é"
    auth = f"Bearer {service.token}".encode()
    headers = {b"Authorization": auth, b"Convograph-Owner": owner.encode()}
    response = await service.http.post("/graphql", json={"query": WHO}, headers=headers)
    assert response.json()["data"]["viewer"]["ownerKey"] == "é", response.text
    payload = {"Authorization": f"Bearer {service.token}", "Convograph-Owner": owner}
    assert (await _viewer_over_socket(server, payload))["ownerKey"] == "é"
    latin1 = {b"Authorization": auth, b"Convograph-Owner": b"user:\xe9"}  # not UTF-8
    response = await service.http.post("/graphql", json={"query": WHO}, headers=latin1)
    assert response.status_code == 400 and "UTF-8" in response.text, response.text


@pytest.mark.parametrize(
    "key",
    [
        "Ada\u00a0Lovelace",  # a no-break space
        "co\u00adop",  # a soft hyphen
        "\U0001f469\u200d\U0001f4bb",  # an emoji made with a zero-width joiner
        "\u3042\u3044\u3000",  # an ideographic space at the end
    ],
)
async def test_an_opaque_owner_key_is_one_owner_over_http_and_a_socket(
    server: Server, service: Service, key: str
) -> None:
    """Owner keys are opaque to the stores convograph serves: characters that are not
    control characters were refused as "not printable", so such an owner could not be
    acted for at all, though a token could be made for it."""
    owner = f"user:{key}"
    auth = f"Bearer {service.token}".encode()
    headers = {b"Authorization": auth, b"Convograph-Owner": owner.encode()}
    made = await service.http.post(
        "/graphql", json={"query": CREATE, "variables": {"title": "opaque"}}, headers=headers
    )
    assert made.status_code == 200, made.text
    response = await service.http.post("/graphql", json={"query": WHO}, headers=headers)
    assert response.json()["data"]["viewer"]["ownerKey"] == key, response.text
    payload = {"Authorization": f"Bearer {service.token}", "Convograph-Owner": owner}
    assert (await _viewer_over_socket(server, payload))["ownerKey"] == key
    listed = await service.http.post("/graphql", json={"query": LIST}, headers=headers)
    assert listed.json()["data"]["conversations"]["totalCount"] == 1, listed.text


@pytest.mark.parametrize(
    ("key", "code"),
    [
        ("a\u0085b", 4403),  # C1 NEXT LINE: refused as the owner it names
        ("a\ud800", 4400),  # a lone surrogate (`\\ud800` in the JSON): not a message at all
    ],
)
async def test_an_owner_key_with_a_control_character_is_refused_over_a_socket(
    server: Server, service: Service, key: str, code: int
) -> None:
    """A connection_init payload may hold what a header cannot."""
    payload = {"Authorization": f"Bearer {service.token}", "Convograph-Owner": f"user:{key}"}
    assert await _viewer_over_socket(server, payload) == code


# -- over a real server: subscriptions, revocation, the access log ---------------------

pytest_plugins = ["tests.live_server"]


async def test_subscriptions_act_for_the_owner_and_end_when_the_service_token_is_revoked(
    database_url: str, live_servers: Any
) -> None:
    server = await live_servers.start(database_url, env={"CONVOGRAPH_LOG_FORMAT": "json"})
    token = await server.token(
        workspace="site:42", owner="system:wordpress", scope="service", label="site"
    )
    owner_key = "owner-key-5e1f0c77"
    acting = f"user:{owner_key}"
    async with http_client(base_url=server.base_url, timeout=30) as http:
        service = Service(http, token)
        mine = await create(service, "mine", owner=acting)
        theirs = await create(service, "theirs", owner="user:2")
        async with connect(server) as socket:
            await socket.init(token, acting_for=acting)
            # Another owner's conversation cannot be subscribed to.
            await socket.subscribe(WATCH, {"id": theirs}, op="2")
            refused = await socket.receive()
            assert refused["id"] == "2", refused
            assert [e["extensions"]["code"] for e in graphql_errors(refused)] == ["NOT_FOUND"]
            if refused["type"] == "next":  # an error in the resolver: the operation then ends
                assert await socket.receive() == {"id": "2", "type": "complete"}
            await socket.subscribe(WATCH, {"id": mine})
            await socket.wait_until_live(
                lambda: service(RENAME, {"id": mine, "title": "touched"}, owner=acting)
            )
            listed = (await server.cli("token", "list")).splitlines()
            (token_id,) = [line.split("\t")[0] for line in listed if "\tsite\t" in line]
            await server.cli("token", "revoke", token_id)
            assert await socket.close_code() == 4403

    lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    acted = [line for line in lines if line.get("service_token") == token_id]
    assert acted and all(line["owner_type"] == "user" for line in acted)
    assert owner_key not in server.logs()


async def test_a_delegation_key_used_under_another_conversation_is_a_conflict(
    gql: GraphQLClient,
) -> None:
    # Keys belong to the tree's owner: reusing one under another parent is refused whole
    # (before, a SERVICE token writing into two owners' trees could hit the owner's index).
    first, second = await create(gql, "first"), await create(gql, "second")
    delegate = """mutation($id: ID!) { createDelegation(input: {parentConversationId: $id,
      delegatingTier: "lead", targetTier: "coder", task: "t", idempotencyKey: "k-1"}) {
      delegation { id } userErrors { code field } } }"""
    made = (await gql(delegate, {"id": first}))["createDelegation"]
    again = (await gql(delegate, {"id": first}))["createDelegation"]
    elsewhere = (await gql(delegate, {"id": second}))["createDelegation"]
    assert made["userErrors"] == [] and again == made
    assert elsewhere == {
        "delegation": None,
        "userErrors": [{"code": "CONFLICT", "field": ["idempotencyKey"]}],
    }
    counts = await gql("{ conversations { totalCount } }")
    assert counts["conversations"]["totalCount"] == 3  # two roots and one child
