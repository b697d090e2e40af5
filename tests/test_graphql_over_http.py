"""GraphQL over HTTP, to the specification: media types, status codes, parameters.

`application/graphql-response+json` answers a request error (a document that does not
parse or validate, an operation that cannot be chosen, variables that do not coerce) with
400 and no `data`; `application/json` keeps answering them with 200 and `"data": null`.
The Accept header chooses between them (q-values, wildcards), and one that allows neither
is 406. A parameter of the wrong type is 400 naming it, whatever the media type. A document
of several operations runs only the one `operationName` names.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from strawberry.types import ExecutionContext

from graph.api.execution.documents import provided_operation_name
from graph.server.negotiation import GRAPHQL_RESPONSE_JSON, JSON, negotiate
from graph.server.response_status import shape
from graph.store.db import DatabaseBusy
from tests.conftest import GraphQLClient, Server
from tests.operations import VIEWER

CREATE = 'mutation Create { createConversation(input: {title: "t"}) { conversation { id } } }'
COUNT = "query Count { conversations { totalCount } }"
REQUEST_ERRORS = {
    "parse": ({"query": "{ viewer { ownerKey "}, "syntax"),
    "validation": ({"query": "{ viewer { nosuchfield } }"}, "nosuchfield"),
    "variable coercion": (
        {"query": "query($n: Int!) { conversations(first: $n) { totalCount } }"},
        "$n",
    ),
    "no operation chosen": ({"query": f"{CREATE} {COUNT}"}, "operation name"),
    "an unknown operation": ({"query": COUNT, "operationName": "Nope"}, "operation"),
}


async def post(
    client: GraphQLClient, body: Any, accept: str | None = GRAPHQL_RESPONSE_JSON
) -> httpx.Response:
    """POST `body` as JSON with this Accept header (None: no Accept header at all)."""
    request = client.http.build_request(
        "POST", "/graphql", json=body, headers={"Authorization": f"Bearer {client.token}"}
    )
    if accept is None:
        del request.headers["accept"]
    else:
        request.headers["accept"] = accept
    return await client.http.send(request)


def media_type(response: httpx.Response) -> str:
    return response.headers["content-type"].split(";")[0].strip()


def message(response: httpx.Response) -> str:
    return str(response.json()["errors"][0]["message"]).lower()


async def count_conversations(gql: GraphQLClient) -> int:
    return int((await gql(COUNT))["conversations"]["totalCount"])


# -- content negotiation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, JSON),
        ("", JSON),
        ("*/*", JSON),
        ("application/*", JSON),
        ("application/json", JSON),
        ("application/json; charset=utf-8", JSON),
        (GRAPHQL_RESPONSE_JSON, GRAPHQL_RESPONSE_JSON),
        ("Application/GraphQL-Response+JSON; charset=utf-8", GRAPHQL_RESPONSE_JSON),
        # The specification's recommended header: both named, its own type first.
        (f"{GRAPHQL_RESPONSE_JSON}; charset=utf-8, {JSON}; charset=utf-8", GRAPHQL_RESPONSE_JSON),
        (f"{JSON}, {GRAPHQL_RESPONSE_JSON}", GRAPHQL_RESPONSE_JSON),
        # q-values decide, before the order and the preference.
        (f"{GRAPHQL_RESPONSE_JSON};q=0.5, {JSON}", JSON),
        (f"{JSON};q=0.9, {GRAPHQL_RESPONSE_JSON}", GRAPHQL_RESPONSE_JSON),
        (f"{JSON};q=0.2, */*;q=0.1", JSON),
        # A type named outright takes its own q, not the wildcard's.
        (f"{JSON};q=0, */*", GRAPHQL_RESPONSE_JSON),
        (f"{JSON}, */*", JSON),
        (f"{GRAPHQL_RESPONSE_JSON}, */*;q=0.8", GRAPHQL_RESPONSE_JSON),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", JSON),
        (f"text/html, {GRAPHQL_RESPONSE_JSON};q=0.3", GRAPHQL_RESPONSE_JSON),
        # Nothing served is acceptable.
        ("text/html", None),
        ("application/xml, text/*", None),
        (f"{JSON};q=0", None),
        (f"{JSON};q=0, {GRAPHQL_RESPONSE_JSON};q=0.000", None),
        ("*/*;q=0", None),
        # Malformed ranges say nothing; a header of only those is no header.
        (f"{JSON};q=high, {GRAPHQL_RESPONSE_JSON}", GRAPHQL_RESPONSE_JSON),
        (f"{GRAPHQL_RESPONSE_JSON};q=2, {JSON}", JSON),
        ("json", JSON),
    ],
)
def test_accept_chooses_the_media_type(accept: str | None, chosen: str | None) -> None:
    assert negotiate(accept) == chosen


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, JSON),
        ("*/*", JSON),
        (JSON, JSON),
        (GRAPHQL_RESPONSE_JSON, GRAPHQL_RESPONSE_JSON),
        (f"{JSON};q=0.5, {GRAPHQL_RESPONSE_JSON}", GRAPHQL_RESPONSE_JSON),
    ],
)
async def test_the_response_is_in_the_media_type_chosen(
    gql: GraphQLClient, accept: str | None, chosen: str
) -> None:
    response = await post(gql, {"query": VIEWER}, accept)
    assert response.status_code == 200, response.text
    assert media_type(response) == chosen
    assert response.json() == {"data": {"viewer": {"ownerKey": "alice"}}}
    if chosen == GRAPHQL_RESPONSE_JSON:
        assert response.headers["content-type"] == f"{GRAPHQL_RESPONSE_JSON}; charset=utf-8"


@pytest.mark.parametrize("accept", ["text/html", f"{JSON};q=0", "application/xml, text/*"])
async def test_an_accept_nothing_satisfies_is_406_and_runs_nothing(
    gql: GraphQLClient, accept: str
) -> None:
    response = await post(gql, {"query": CREATE}, accept)
    assert response.status_code == 406, response.text
    assert media_type(response) == JSON
    assert GRAPHQL_RESPONSE_JSON in message(response) and JSON in message(response)
    assert await count_conversations(gql) == 0


async def test_a_get_is_negotiated_too(gql: GraphQLClient) -> None:
    auth = {"Authorization": f"Bearer {gql.token}"}
    response = await gql.http.get(
        "/graphql", params={"query": VIEWER}, headers={**auth, "Accept": GRAPHQL_RESPONSE_JSON}
    )
    assert response.status_code == 200, response.text
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    response = await gql.http.get(
        "/graphql", params={"query": VIEWER}, headers={**auth, "Accept": "text/csv"}
    )
    assert response.status_code == 406, response.text


# -- status codes and shapes -----------------------------------------------------------------


@pytest.mark.parametrize("case", REQUEST_ERRORS)
async def test_a_request_error_is_400_without_data_in_graphql_response_json(
    gql: GraphQLClient, case: str
) -> None:
    body, words = REQUEST_ERRORS[case]
    response = await post(gql, body, GRAPHQL_RESPONSE_JSON)
    assert response.status_code == 400, response.text
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    answer = response.json()
    assert "data" not in answer, answer
    assert answer["errors"] and words in message(response)
    assert await count_conversations(gql) == 0


@pytest.mark.parametrize("case", REQUEST_ERRORS)
@pytest.mark.parametrize("accept", [JSON, None, "*/*"])
async def test_a_request_error_is_200_with_null_data_in_application_json(
    gql: GraphQLClient, case: str, accept: str | None
) -> None:
    body, words = REQUEST_ERRORS[case]
    response = await post(gql, body, accept)
    # An unknown operation name too (strawberry's 400 before any GraphQL runs, until now).
    assert response.status_code == 200, response.text
    assert media_type(response) == JSON
    answer = response.json()
    assert answer["data"] is None and words in message(response), answer


async def test_a_field_error_keeps_its_data_and_200(server: Server, gql: GraphQLClient) -> None:
    created = await gql(CREATE)
    cid = created["createConversation"]["conversation"]["id"]
    # A real failure inside one resolver: a table it reads is gone.
    async with server.services.db.write() as conn:
        await conn.execute(text("DROP TABLE snapshot"))
    query = "query($id: ID!) { conversation(id: $id) { title snapshots { totalCount } } }"
    response = await post(gql, {"query": query, "variables": {"id": cid}})
    assert response.status_code == 200, response.text
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    answer = response.json()
    assert answer["data"] == {"conversation": None} or answer["data"]["conversation"]["title"]
    assert answer["errors"][0]["path"] == ["conversation", "snapshots"]
    assert answer["errors"][0]["extensions"]["code"] == "INTERNAL"


@pytest.mark.parametrize(
    ("code", "status"), [("INTERNAL", 500), ("DATABASE_UNAVAILABLE", 503), ("LIMIT_EXCEEDED", 400)]
)
def test_a_server_fault_before_execution_is_5xx(code: str, status: int) -> None:
    # Before execution the server can fail too (the database going away as the search index
    # is brought up to date): without data, the status says whose fault it is.
    body: Any = {"data": None, "errors": [{"message": "m", "extensions": {"code": code}}]}
    assert shape(GRAPHQL_RESPONSE_JSON, body) == status
    assert "data" not in body
    legacy: Any = {"data": None, "errors": [{"message": "m", "extensions": {"code": code}}]}
    assert shape(JSON, legacy) == 200 and legacy["data"] is None


async def test_an_operation_the_database_stopped_before_it_ran_is_503_with_retry_after(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search brings the index up to date before it runs: the file's write lock held by
    another process past busy_timeout stops it there. The client is told when to ask again."""

    async def busy() -> None:
        raise DatabaseBusy("BEGIN IMMEDIATE", None, sqlite3.OperationalError("database is locked"))

    monkeypatch.setattr(server.services.search_index, "ready", busy)
    search = {"query": '{ conversations(filter: {search: "refund"}) { totalCount } }'}
    response = await post(gql, search)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["errors"][0]["extensions"]["code"] == "DATABASE_UNAVAILABLE"
    legacy = await post(gql, search, accept=JSON)  # 200 there, as every request error is
    assert legacy.status_code == 200 and "retry-after" not in legacy.headers


async def test_a_mutation_over_get_is_405_in_both_media_types(gql: GraphQLClient) -> None:
    for accept in (GRAPHQL_RESPONSE_JSON, JSON):
        response = await gql.http.get(
            "/graphql",
            params={"query": CREATE},
            headers={"Authorization": f"Bearer {gql.token}", "Accept": accept},
        )
        assert response.status_code == 405, response.text
        assert media_type(response) == accept
    assert await count_conversations(gql) == 0


SUBSCRIBE = 'subscription { conversationEvents(conversationId: "x") { kind } }'


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_subscription_over_http_is_400_pointing_to_the_websocket(
    gql: GraphQLClient, method: str
) -> None:
    """Executed once as Strawberry would over HTTP, its stream was no value: masked INTERNAL."""
    headers = {"Authorization": f"Bearer {gql.token}", "Accept": GRAPHQL_RESPONSE_JSON}
    if method == "GET":
        response = await gql.http.get("/graphql", params={"query": SUBSCRIBE}, headers=headers)
    else:
        response = await gql.http.post("/graphql", json={"query": SUBSCRIBE}, headers=headers)
    assert response.status_code == 400, response.text
    [error] = response.json()["errors"]
    assert "WebSocket" in error["message"] and "graphql-transport-ws" in error["message"]


async def test_head_is_the_pages_headers_or_405_naming_the_methods(gql: GraphQLClient) -> None:
    """A 405 without `Allow` broke RFC 9110; a browser's HEAD of the page was a 401."""
    page = await gql.http.head("/graphql", headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.content == b""
    assert page.headers["x-frame-options"] == "DENY"
    token = {"Authorization": f"Bearer {gql.token}"}
    query = await gql.http.head("/graphql", params={"query": "{ __typename }"}, headers=token)
    assert query.status_code == 405
    assert query.headers["allow"] == "GET, POST"


# -- parameters of the wrong type ------------------------------------------------------------


WRONG_TYPES: list[tuple[str, Any]] = [
    *[("operationName", v) for v in ({"obj": "ect"}, 0, False, ["array"])],
    *[("query", v) for v in ({"obj": "ect"}, 0, False, ["array"])],
    *[("variables", v) for v in ("string", 0, False, ["array"])],
    *[("extensions", v) for v in ("string", 0, False, ["array"])],
]


@pytest.mark.parametrize(("parameter", "value"), WRONG_TYPES)
@pytest.mark.parametrize("accept", [GRAPHQL_RESPONSE_JSON, JSON])
async def test_a_parameter_of_the_wrong_type_is_400_naming_it(
    gql: GraphQLClient, parameter: str, value: Any, accept: str
) -> None:
    body = {"query": CREATE, parameter: value}
    response = await post(gql, body, accept)
    assert response.status_code == 400, response.text
    assert media_type(response) == accept
    assert f"`{parameter.lower()}`" in message(response), response.text
    assert "expected string or bytes" not in message(response)
    assert await count_conversations(gql) == 0


@pytest.mark.parametrize("parameter", ["operationName", "variables", "extensions"])
async def test_a_null_parameter_is_no_parameter(gql: GraphQLClient, parameter: str) -> None:
    response = await post(gql, {"query": VIEWER, parameter: None})
    assert response.status_code == 200, response.text
    assert response.json() == {"data": {"viewer": {"ownerKey": "alice"}}}


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("variables", "{not json"),
        ("variables", '"a string"'),
        ("variables", "[1]"),
        ("extensions", "{not json"),
        ("extensions", "5"),
    ],
)
async def test_a_get_parameter_of_the_wrong_type_is_400_naming_it(
    gql: GraphQLClient, parameter: str, value: str
) -> None:
    response = await gql.http.get(
        "/graphql",
        params={"query": VIEWER, parameter: value},
        headers={"Authorization": f"Bearer {gql.token}"},
    )
    assert response.status_code == 400, response.text
    assert f"`{parameter}`" in message(response), response.text


async def test_a_get_variable_with_a_number_the_service_does_not_keep_says_which_limit(
    gql: GraphQLClient,
) -> None:
    """It was "must be a JSON-encoded object" for valid JSON (a POST body says the limit)."""
    for number, limit in (("1" * 4301, "at most 4300 digits"), ("1e400", "must be finite")):
        response = await gql.http.get(
            "/graphql",
            params={"query": VIEWER, "variables": f'{{"n": {number}}}'},
            headers={"Authorization": f"Bearer {gql.token}"},
        )
        assert response.status_code == 400, response.text
        assert "`variables`" in message(response) and limit in message(response), response.text


async def test_empty_get_parameters_are_no_parameters(gql: GraphQLClient) -> None:
    response = await gql.http.get(
        "/graphql",
        params={"query": VIEWER, "operationName": "", "variables": "", "extensions": ""},
        headers={"Authorization": f"Bearer {gql.token}"},
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"data": {"viewer": {"ownerKey": "alice"}}}


# -- several operations ----------------------------------------------------------------------


async def test_several_operations_without_an_operation_name_run_none(gql: GraphQLClient) -> None:
    # Before, the first operation ran: here it would have created a conversation.
    for name in (None, ""):
        response = await post(gql, {"query": f"{CREATE} {COUNT}", "operationName": name}, JSON)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["data"] is None
        assert answer["errors"] == [
            {
                "message": "Must provide operation name if query contains multiple operations.",
                "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"},
            }
        ]
    assert await count_conversations(gql) == 0


@pytest.mark.parametrize(
    ("query", "variables", "code"),
    [
        ("{ conversation(", None, "GRAPHQL_PARSE_FAILED"),
        ("{ nope }", None, "GRAPHQL_VALIDATION_FAILED"),
        ("{ conversations(first: 99999999999) { totalCount } }", None, "GRAPHQL_VALIDATION_FAILED"),
        (
            "query($n: Int!) { conversations(first: $n) { totalCount } }",
            {"n": 2**40},
            "GRAPHQL_VALIDATION_FAILED",
        ),
    ],
)
async def test_a_request_error_says_its_code(
    gql: GraphQLClient, query: str, variables: dict[str, Any] | None, code: str
) -> None:
    """graphql-core's own refusals carried no `extensions.code`: a client could tell them
    from a failure worth a retry only by the absence of one."""
    response = await post(gql, {"query": query, "variables": variables}, JSON)
    answer = response.json()
    assert answer["data"] is None
    assert [e["extensions"] for e in answer["errors"]] == [{"code": code}], answer


async def test_several_operations_run_the_one_named(gql: GraphQLClient) -> None:
    document = f"{COUNT} {CREATE}"
    created = await post(gql, {"query": document, "operationName": "Create"})
    assert created.status_code == 200, created.text
    assert created.json()["data"]["createConversation"]["conversation"]["id"]
    counted = await post(gql, {"query": document, "operationName": "Count"})
    assert counted.json() == {"data": {"conversations": {"totalCount": 1}}}


async def test_one_operation_needs_no_name(gql: GraphQLClient) -> None:
    response = await post(gql, {"query": CREATE}, JSON)
    assert response.status_code == 200, response.text
    assert "errors" not in response.json()


def test_the_operation_name_the_request_gave_is_readable() -> None:
    # strawberry keeps it in a private attribute (its `operation_name` falls back to the
    # first operation's): this fails if a strawberry release moves it.
    schema: Any = None  # only the attribute is read
    for name in ("Count", None):
        execution = ExecutionContext(
            query=COUNT, schema=schema, allowed_operations=(), provided_operation_name=name
        )
        assert provided_operation_name(execution) == name


PERSISTED = {"persistedQuery": {"version": 1, "sha256Hash": "0" * 64}}


@pytest.mark.parametrize("accept", [GRAPHQL_RESPONSE_JSON, JSON])
async def test_a_persisted_query_by_its_hash_alone_says_persisted_queries_are_not_kept(
    gql: GraphQLClient, accept: str
) -> None:
    """An automatic persisted query (Apollo's and urql's links send the hash first) got
    "No GraphQL query found", which no such client understands: its query failed instead
    of being sent again with its text. Now the answer is the one they look for."""
    refused = {
        "errors": [
            {
                "message": "PersistedQueryNotSupported",
                "extensions": {"code": "PERSISTED_QUERY_NOT_SUPPORTED"},
            }
        ]
    }
    response = await post(gql, {"extensions": PERSISTED}, accept)
    assert (response.status_code, response.json()) == (400, refused)
    response = await gql.http.get(
        "/graphql",
        params={"extensions": json.dumps(PERSISTED)},
        headers={"Authorization": f"Bearer {gql.token}", "Accept": accept},
    )
    assert (response.status_code, response.json()) == (400, refused)
    # The client's retry, with the text: run as any query (the hash is not looked at).
    response = await post(gql, {"query": VIEWER, "extensions": PERSISTED}, accept)
    assert response.status_code == 200 and "errors" not in response.json()
