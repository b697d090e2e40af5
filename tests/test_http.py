"""The HTTP edges of /graphql: malformed requests get a clear 4xx with a JSON body, never a 500."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from graph.app import create_app
from graph.settings import Settings
from tests.conftest import GraphQLClient, Server
from tests.operations import VIEWER

LIMIT = 4096


def assert_json_error(response: httpx.Response, status: int, *words: str) -> str:
    """A JSON body `{"errors": [{"message": …, "extensions": {"code": …}}]}` with `status`;
    returns the message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["errors"][0]
    assert isinstance(error["extensions"]["code"], str), error  # every error names its code
    message: str = error["message"]
    for word in words:
        assert word.lower() in message.lower(), message
    return message


def headers(client: GraphQLClient, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {client.token}", **extra}


async def post_raw(client: GraphQLClient, body: Any, content_type: str) -> httpx.Response:
    return await client.http.post(
        "/graphql", content=body, headers=headers(client, **{"Content-Type": content_type})
    )


async def count_conversations(gql: GraphQLClient) -> int:
    return int((await gql("{ conversations { totalCount } }"))["conversations"]["totalCount"])


# -- malformed requests ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b'{"query": "{ viewer { ownerKey } }"', b"[1, 2", b"nan", b"\x00"],
)
async def test_malformed_json_is_400(gql: GraphQLClient, body: bytes) -> None:
    response = await post_raw(gql, body, "application/json")
    assert_json_error(response, 400, "JSON")
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        # JSON allows the escape; it is no Unicode text, and the answer said only "Unable to
        # parse request body as JSON", where the same escape in the query text is named.
        (b'{"query": "{ viewer { ownerKey } }", "variables": {"s": "\\ud800"}}', "surrogate"),
        (b'{"query": "{ viewer { ownerKey } }",}', "trailing comma"),
        (b'{"query": "\xff"}', "UTF-8"),
    ],
)
async def test_malformed_json_says_what_and_where(
    gql: GraphQLClient, body: bytes, words: str
) -> None:
    message = assert_json_error(await post_raw(gql, body, "application/json"), 400, words)
    assert "column" in message or "UTF-8" in message, message


@pytest.mark.parametrize("accept", ["application/json", "application/graphql-response+json"])
@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"query": "query A { viewer { ownerKey } }", "operationName": "B"}, 'named "B"'),
        ({"query": "fragment F on Query { viewer { ownerKey } }"}, "no operation"),
    ],
)
async def test_an_operation_that_cannot_be_chosen_is_a_validation_failure(
    gql: GraphQLClient, accept: str, body: dict[str, Any], words: str
) -> None:
    """They had no `extensions.code`, where every other request error has one; a document
    of fragments only was "Can't get GraphQL operation type"."""
    response = await gql.http.post("/graphql", json=body, headers=headers(gql, Accept=accept))
    assert response.status_code == (200 if accept == "application/json" else 400), response.text
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED", error
    assert words in error["message"], error


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("OPTIONS", "/graphql", 405, "METHOD_NOT_ALLOWED"),
        ("PUT", "/graphql", 405, "METHOD_NOT_ALLOWED"),
        ("DELETE", "/healthz", 405, "METHOD_NOT_ALLOWED"),
        ("GET", "/no-such-path", 404, "NOT_FOUND"),
    ],
)
async def test_a_path_or_method_that_is_not_served_is_a_json_refusal(
    anon: GraphQLClient, method: str, path: str, status: int, code: str
) -> None:
    """Starlette's own refusals were plain text, and named a route's methods in any order."""
    response = await anon.http.request(method, path)
    assert_json_error(response, status)
    assert response.json()["errors"][0]["extensions"]["code"] == code
    if status == 405:
        methods = response.headers["allow"].split(", ")
        assert methods == sorted(methods), methods


@pytest.mark.parametrize(
    "body",
    [
        b'{"query": "{ viewer { ownerKey } }", "variables": {"a": "\xff\xfe"}}',
        b'{"query": "{ viewer { ownerKey } }\xc3"}',
        b'{"query": "{ viewer { ownerKey } }", "variables": {"a": "\xed\xa0\x80"}}',
    ],
)
async def test_invalid_utf8_is_400(gql: GraphQLClient, body: bytes) -> None:
    assert_json_error(await post_raw(gql, body, "application/json"), 400)


SEARCH_BODY = (
    b'{"query": "query($s: String) { conversations(filter: {search: $s}) { totalCount } }",'
    b' "variables": {"s": "%s", "unused": 12345678901234567890}}'
)


@pytest.mark.parametrize("escaped", [rb"\ud800", rb"\uDFFF", rb"a\udc00b"])
async def test_a_lone_surrogate_is_400_with_a_long_number_beside_it(
    gql: GraphQLClient, escaped: bytes
) -> None:
    """A body with a 16+ digit number is parsed exactly (json, not orjson), which took a
    lone surrogate that orjson refuses: the search then failed as a masked INTERNAL."""
    response = await post_raw(gql, SEARCH_BODY % escaped, "application/json")
    assert_json_error(response, 400, "JSON")


async def test_an_escaped_surrogate_pair_beside_a_long_number_is_a_character(
    gql: GraphQLClient,
) -> None:
    response = await post_raw(gql, SEARCH_BODY % rb"\ud83d\ude00", "application/json")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["conversations"]["totalCount"] == 0


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"[]", ()),
        (b'[{"query": "{ viewer { ownerKey } }"}]', ("batch",)),
        (b'{"variables": {}}', ("query",)),
        (b'{"query": 5}', ("query",)),
        (b'{"query": "{ viewer { ownerKey } }", "variables": [1]}', ("variables",)),
        (b'"just a string"', ("object",)),
        (b"42", ("object",)),
        (b"null", ("object",)),
    ],
)
async def test_json_that_is_not_a_request_is_400(
    gql: GraphQLClient, body: bytes, words: tuple[str, ...]
) -> None:
    assert_json_error(await post_raw(gql, body, "application/json"), 400, *words)


@pytest.mark.parametrize("variables", ["{not json", "5", "[1]"])
async def test_bad_variables_over_get_are_400(gql: GraphQLClient, variables: str) -> None:
    response = await gql.http.get(
        "/graphql", params={"query": VIEWER, "variables": variables}, headers=headers(gql)
    )
    assert_json_error(response, 400)


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "image/png"])
async def test_wrong_content_type_is_4xx(gql: GraphQLClient, content_type: str) -> None:
    response = await post_raw(gql, b'{"query": "{ viewer { ownerKey } }"}', content_type)
    assert 400 <= response.status_code < 500, response.text
    assert_json_error(response, response.status_code, "content type")


# A mutation whose title is "Ã©": in UTF-8, the bytes C3 83 C2 A9. Sent as ISO-8859-1 it is
# the two bytes C3 A9, which read as UTF-8 are "é", another title.
TITLED = (
    '{"query": "mutation { createConversation(input: {title: \\"\u00c3\u00a9\\"}) '
    '{ conversation { title } } }"}'
)


@pytest.mark.parametrize(
    "content_type",
    [
        "APPLICATION/JSON",
        "Application/Json; Charset=UTF-8",
        'application/json; charset="utf-8"',
        "application/json;charset=utf8",
        "application/json ; charset=UTF-8",
    ],
)
async def test_application_json_is_read_in_any_case_with_a_utf8_charset(
    gql: GraphQLClient, content_type: str
) -> None:
    # Media types and charset names are case-insensitive (RFC 9110 8.3.1): "APPLICATION/JSON"
    # was 400 "Unsupported content type".
    response = await post_raw(gql, TITLED.encode(), content_type)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["createConversation"]["conversation"]["title"] == "Ã©"


@pytest.mark.parametrize(
    ("content_type", "body", "words"),
    [
        # Read as UTF-8 regardless, it stored "é" where the client sent "Ã©".
        ("application/json; charset=iso-8859-1", TITLED.encode("latin-1"), ("iso-8859-1",)),
        ("application/json; charset=utf-16", TITLED.encode("utf-16"), ("utf-16",)),
        ("application/json; charset=windows-1252", TITLED.encode("cp1252"), ("windows-1252",)),
        # Only `application/json` is JSON: these were read as JSON since they contain it.
        ("application/jsonx", TITLED.encode(), ("content type",)),
        ("application/json-seq", TITLED.encode(), ("content type",)),
        ("text/application/json", TITLED.encode(), ("content type",)),
        ("", TITLED.encode(), ("content type",)),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
async def test_a_body_in_another_media_type_or_charset_is_415_and_writes_nothing(
    gql: GraphQLClient, content_type: str, body: bytes, words: tuple[str, ...]
) -> None:
    response = await post_raw(gql, body, content_type)
    assert_json_error(response, 415, *words)
    assert await count_conversations(gql) == 0


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(TITLED.encode())),  # was 400 "Unable to parse … as JSON"
        ("deflate", zlib.compress(TITLED.encode())),
        ("br", TITLED.encode()),  # the coding was ignored: a plain body was run
        ("gzip, identity", TITLED.encode()),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
async def test_a_compressed_body_is_415_naming_the_coding_and_writes_nothing(
    gql: GraphQLClient, encoding: str, body: bytes
) -> None:
    response = await gql.http.post(
        "/graphql",
        content=body,
        headers=headers(gql, **{"Content-Type": "application/json", "Content-Encoding": encoding}),
    )
    assert_json_error(response, 415, "Content-Encoding", encoding)
    assert response.headers["accept-encoding"] == "identity"
    assert await count_conversations(gql) == 0
    # The identity coding is no coding at all.
    identity = {"Content-Type": "application/json", "Content-Encoding": "identity"}
    response = await gql.http.post(
        "/graphql", content=TITLED.encode(), headers=headers(gql, **identity)
    )
    assert response.status_code == 200, response.text
    assert await count_conversations(gql) == 1


async def test_mutation_over_get_is_405_and_writes_nothing(gql: GraphQLClient) -> None:
    mutation = 'mutation { createConversation(input: {title: "via GET"}) { conversation { id } } }'
    response = await gql.http.get("/graphql", params={"query": mutation}, headers=headers(gql))
    assert_json_error(response, 405, "mutation", "GET")
    assert response.headers["allow"] == "POST"
    assert await count_conversations(gql) == 0


async def test_query_over_get_works(gql: GraphQLClient) -> None:
    await gql('mutation { createConversation(input: {title: "t"}) { conversation { id } } }')
    response = await gql.http.get(
        "/graphql",
        params={
            "query": "query($n: Int) { viewer { ownerKey } "
            "conversations(first: $n) { totalCount } }",
            "variables": '{"n": 1}',
        },
        headers=headers(gql),
    )
    assert response.status_code == 200, response.text
    assert response.json() == {
        "data": {"viewer": {"ownerKey": "alice"}, "conversations": {"totalCount": 1}}
    }


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("{ viewer { ownerKey ", ("syntax",)),
        ("{ viewer { nosuchfield } }", ("nosuchfield",)),
        ("query($n: Int!) { conversations(first: $n) { totalCount } }", ("$n",)),
        ("{ conversations(first: 99999999999999999999) { totalCount } }", ("32-bit",)),
    ],
)
async def test_graphql_errors_are_errors_not_500(
    gql: GraphQLClient, query: str, words: tuple[str, ...]
) -> None:
    response = await gql.post(query)
    assert response.status_code in (200, 400), response.text
    body = response.json()
    assert body.get("data") is None
    assert_json_error(response, response.status_code, *words)


async def test_query_depth_over_the_limit_is_refused(server: Server, gql: GraphQLClient) -> None:
    depth = server.settings.max_query_depth
    # Each level of the tree adds two: `childConversation { delegations { nodes {`.
    inner = "id"
    for _ in range(depth):
        inner = f"delegations {{ nodes {{ childConversation {{ {inner} }} }} }}"
    response = await gql.post(f"{{ conversations {{ nodes {{ {inner} }} }} }}")
    assert response.status_code in (200, 400), response.text
    assert response.json().get("data") is None
    assert_json_error(response, response.status_code, "depth")
    # A query within the limit still runs.
    assert await gql("{ conversations { nodes { delegations { nodes { id } } } } }")


async def test_aliases_over_the_limit_are_refused(server: Server, gql: GraphQLClient) -> None:
    limit = server.settings.max_aliases
    many = " ".join(f"a{i}: viewer {{ ownerKey }}" for i in range(limit + 1))
    response = await gql.post(f"{{ {many} }}")
    assert response.status_code in (200, 400), response.text
    assert response.json().get("data") is None
    assert_json_error(response, response.status_code, "alias")
    enough = " ".join(f"a{i}: viewer {{ ownerKey }}" for i in range(limit))
    assert len(await gql(f"{{ {enough} }}")) == limit


async def test_thousands_of_same_named_fields_are_refused_with_a_reason(gql: GraphQLClient) -> None:
    # graphql-core checks same-named fields pairwise; past the merge budget the document is
    # refused with what to change, not graphql-core's bare "Validation aborted."
    response = await gql.post("{ " + "viewer { ownerKey } " * 1000 + "}")
    assert response.status_code in (200, 400), response.text
    assert response.json().get("data") is None
    assert_json_error(response, response.status_code, "response name", "distinct aliases")
    # A field selected a few times over, as fragments do, is fine.
    data = await gql("{ " + "viewer { ownerKey } " * 20 + "}")
    assert data["viewer"]["ownerKey"]


async def test_query_text_over_the_limit_is_413(server: Server, gql: GraphQLClient) -> None:
    limit = server.settings.max_query_chars
    padded = "{ viewer { ownerKey } }\n#" + "x" * limit
    response = await gql.post(padded)
    assert_json_error(response, 413, "query text", str(limit))
    # A short document with a comment runs.
    assert await gql("{ viewer { ownerKey } }\n# a comment")


async def test_a_document_of_too_many_tokens_is_refused(server: Server, gql: GraphQLClient) -> None:
    limit = server.settings.max_query_tokens
    response = await gql.post("{ " + "viewer { ownerKey } " * (limit // 4) + "}")
    assert response.status_code in (200, 400), response.text
    assert response.json().get("data") is None
    assert_json_error(response, response.status_code, "tokens", str(limit))


# -- body size -------------------------------------------------------------------------------


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[Server, httpx.AsyncClient]]:
    """An app built from `settings`, started, and an HTTP client talking to it in-process."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield Server(app, settings), http


@pytest.fixture
async def small(settings: Settings) -> AsyncIterator[tuple[Server, GraphQLClient]]:
    """An app whose request bodies may hold at most LIMIT bytes."""
    async with serving(settings.replace(max_body_bytes=LIMIT)) as (server, http):
        yield server, GraphQLClient(http, await server.token())


def body_of(size: int) -> bytes:
    """A createConversation request of exactly `size` bytes."""
    start = b'{"query": "mutation($t: String) { createConversation(input: {title: $t}) '
    start += b'{ conversation { id } } }", "variables": {"t": "'
    end = b'"}}'
    return start + b"x" * (size - len(start) - len(end)) + end


async def test_body_at_the_limit_is_accepted(small: tuple[Server, GraphQLClient]) -> None:
    _, client = small
    response = await post_raw(client, body_of(LIMIT), "application/json")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["createConversation"]["conversation"]["id"]


async def test_body_over_the_limit_is_413(small: tuple[Server, GraphQLClient]) -> None:
    _, client = small
    response = await post_raw(client, body_of(LIMIT + 1), "application/json")
    assert_json_error(response, 413, str(LIMIT))
    assert await count_conversations(client) == 0


async def test_streamed_body_over_the_limit_is_413(small: tuple[Server, GraphQLClient]) -> None:
    # No Content-Length to trust: the limit holds while the body is read.
    _, client = small
    body = body_of(3 * LIMIT)

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 1000):
            yield body[i : i + 1000]

    response = await post_raw(client, chunks(), "application/json")
    assert "content-length" not in response.request.headers
    assert_json_error(response, 413, str(LIMIT))
    assert await count_conversations(client) == 0


async def test_a_large_body_without_a_token_is_401(small: tuple[Server, GraphQLClient]) -> None:
    # Credentials are checked before anything is read.
    _, client = small
    response = await client.http.post(
        "/graphql", content=body_of(LIMIT + 1), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 401


# -- failures --------------------------------------------------------------------------------


def assert_masked(response: httpx.Response, *internals: str) -> dict[str, Any]:
    body = response.json()
    error: dict[str, Any] = body["errors"][0]
    assert error["message"] == "Unexpected error."
    for word in ("Traceback", "File ", ".py", "sqlalchemy", "SELECT", *internals):
        assert word.lower() not in response.text.lower(), word
    assert error["extensions"]["requestId"] == response.headers["x-request-id"]
    return body


async def test_an_internal_error_is_masked(server: Server, gql: GraphQLClient) -> None:
    created = await gql(
        'mutation { createConversation(input: {title: "t"}) { conversation { id } } }'
    )
    cid = created["createConversation"]["conversation"]["id"]
    # A real failure inside a resolver: a table the query needs is gone.
    async with server.services.db.write() as conn:
        await conn.execute(text("DROP TABLE snapshot"))
    response = await gql.post(
        "query($id: ID!) { conversation(id: $id) { title snapshots { totalCount } } }", {"id": cid}
    )
    assert response.status_code == 200, response.text
    body = assert_masked(response, "no such table", "does not exist")
    assert body["errors"][0]["path"] == ["conversation", "snapshots"]


async def test_a_failure_while_authenticating_is_masked(server: Server, gql: GraphQLClient) -> None:
    async with server.services.db.write() as conn:
        await conn.execute(text("DROP TABLE api_token"))
    response = await gql.post(VIEWER)
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/json")
    assert_masked(response, "api_token", "no such table", "does not exist")


# -- request ids -----------------------------------------------------------------------------


async def test_every_response_carries_a_request_id(
    gql: GraphQLClient, small: tuple[Server, GraphQLClient]
) -> None:
    _, limited = small
    responses = {
        "ok": await gql.post(VIEWER),
        "get": await gql.http.get("/graphql", params={"query": VIEWER}, headers=headers(gql)),
        "graphql error": await gql.post("{ nope }"),
        "no token": await gql.post(VIEWER, token="cvg_nope"),
        "bad json": await post_raw(gql, b"{", "application/json"),
        "content type": await post_raw(gql, b"{}", "text/plain"),
        "mutation over GET": await gql.http.get(
            "/graphql", params={"query": "mutation { __typename }"}, headers=headers(gql)
        ),
        "too large": await post_raw(limited, body_of(LIMIT + 1), "application/json"),
        "graphiql": await gql.http.get("/graphql", headers={"Accept": "text/html"}),
    }
    ids = {name: r.headers.get("x-request-id") for name, r in responses.items()}
    assert all(ids.values()), ids
    assert len(set(ids.values())) == len(ids), ids


async def test_health_endpoints_carry_a_request_id(anon: GraphQLClient) -> None:
    for path in ("/healthz", "/readyz", "/graphiql-assets/VERSIONS.txt"):
        response = await anon.http.get(path)
        assert response.status_code == 200, path
        assert len(response.headers["x-request-id"]) == 16, path
