"""One structured log line per request: request id, operation, outcome, the principal's
workspace and owner type (never the token or the owner key), duration; levels by setting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from graph.server.logs import JSONFormatter, configure_logging
from graph.settings import Settings, SettingsError
from tests.conftest import GraphQLClient, Server
from tests.operations import WATCH, touch
from tests.raw_http import graphql_post_head
from tests.ws import connect

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

ACCESS = "convograph.access"
VIEWER = "query WhoAmI { viewer { workspace { key } ownerType } }"
APPEND = """mutation Append($id: ID!) {
  appendMessages(input: {conversationId: $id, messages: [{role: "user", content: "hi"}]}) {
    userErrors { code } } }"""
CREATE = """mutation Create { createConversation(input: {title: "t"}) {
  conversation { id } userErrors { code } } }"""


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The access records as the JSON format writes them."""
    formatter = JSONFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == ACCESS]


@pytest.fixture
def access_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger=ACCESS)
    return caplog


async def test_a_request_is_one_line_with_its_id_operation_and_principal(
    server: Server, gql: GraphQLClient, access_log: pytest.LogCaptureFixture
) -> None:
    token = await server.token(workspace="site:7", owner="runtime:agent-secret-key")
    response = await gql.post(VIEWER, token=token)
    assert response.status_code == 200

    [line] = access_lines(access_log)
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["level"] == "info"
    assert (line["method"], line["path"], line["status"]) == ("POST", "/graphql", 200)
    assert (line["operation"], line["operation_type"], line["outcome"]) == (
        "WhoAmI",
        "query",
        "ok",
    )
    assert (line["workspace"], line["owner_type"]) == ("site:7", "runtime")
    assert line["user_errors"] == []
    assert 0 < line["duration_ms"] < 60_000

    raw = "\n".join(JSONFormatter().format(r) for r in access_log.records)
    assert token not in raw and "agent-secret-key" not in raw


async def test_user_errors_and_refusals_are_named(
    gql: GraphQLClient, access_log: pytest.LogCaptureFixture
) -> None:
    refused = await gql(APPEND, {"id": str(uuid.UUID(int=5))})
    assert refused["appendMessages"]["userErrors"] == [{"code": "NOT_FOUND"}]
    unauthenticated = await gql.post(VIEWER, token="cvg_unknown")
    assert unauthenticated.status_code == 401

    mutation, rejected = access_lines(access_log)
    assert mutation["outcome"] == "user_error" and mutation["user_errors"] == ["NOT_FOUND"]
    assert mutation["operation"] == "Append"
    assert rejected["status"] == 401 and rejected["outcome"] == "user_error"
    assert rejected["level"] == "info"
    assert "workspace" not in rejected and "operation" not in rejected
    assert rejected["request_id"] == unauthenticated.headers["x-request-id"]


async def test_probes_are_logged_at_debug_level(
    anon: GraphQLClient, access_log: pytest.LogCaptureFixture
) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await anon.http.get(path)).status_code == 200

    lines = access_lines(access_log)
    assert [(line["path"], line["level"]) for line in lines] == [
        ("/healthz", "debug"),
        ("/readyz", "debug"),
        ("/metrics", "debug"),
    ]


async def test_what_clients_send_cannot_forge_log_lines(
    gql: GraphQLClient, access_log: pytest.LogCaptureFixture
) -> None:
    forged = "Me\n2025-01-01 00:00:00,000 INFO convograph.access: forged"
    response = await gql.http.post(
        "/graphql",
        json={"query": VIEWER, "operationName": forged},
        headers={"Authorization": f"Bearer {gql.token}"},
    )
    assert response.status_code in (200, 400)
    assert (await gql.http.get("/nothing%0Ahere")).status_code == 404

    named, missing = access_lines(access_log)
    assert named["operation"] == "invalid"
    assert missing["path"] == "/nothing\\nhere" and missing["status"] == 404
    text = logging.Formatter("%(message)s")
    for record in access_log.records:
        assert "\n" not in text.format(record)


# -- configure_logging ---------------------------------------------------------------


@pytest.fixture
def stderr(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[], str]]:
    """What configure_logging's handler wrote; the loggers' handlers and levels are restored."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger(ACCESS).level)
    yield lambda: capsys.readouterr().err
    root.handlers[:], root.level = saved[0], saved[1]
    logging.getLogger(ACCESS).setLevel(saved[2])


def test_json_format_and_per_logger_levels(stderr: Callable[[], str]) -> None:
    configure_logging(
        Settings(log_format="json", log_level="warning", log_levels="convograph.access=info")
    )
    logging.getLogger(ACCESS).info("kept", extra={"request_id": "r1", "status": 200})
    logging.getLogger("convograph.other").info("dropped: below the root's warning")
    logging.getLogger("convograph.other").warning("kept too")

    lines = [json.loads(line) for line in stderr().splitlines()]
    assert [(line["logger"], line["message"]) for line in lines] == [
        (ACCESS, "kept"),
        ("convograph.other", "kept too"),
    ]
    assert lines[0]["request_id"] == "r1" and lines[0]["status"] == 200


def test_text_format_is_for_people(stderr: Callable[[], str]) -> None:
    configure_logging(Settings(log_format="text", log_level="info"))
    logging.getLogger(ACCESS).info("POST /graphql 200", extra={"request_id": "r1"})
    output = stderr()
    assert "INFO convograph.access: POST /graphql 200" in output
    assert not output.lstrip().startswith("{")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CONVOGRAPH_LOG_FORMAT", "xml"),
        ("CONVOGRAPH_LOG_LEVEL", "verbose"),
        ("CONVOGRAPH_LOG_LEVELS", "convograph.access"),
        ("CONVOGRAPH_LOG_LEVELS", "convograph.access=loud"),
    ],
)
def test_bad_logging_settings_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env()


# -- a real server -------------------------------------------------------------------


def json_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for raw in text.splitlines():
        if raw.startswith("{"):
            lines.append(json.loads(raw))
    return lines


async def test_a_live_server_writes_json_lines_for_http_and_websocket_operations(
    live_servers: Any, database_url: str
) -> None:
    server: LiveServer = await live_servers.start(
        database_url, env={"CONVOGRAPH_LOG_FORMAT": "json"}
    )
    token = await server.token(workspace="site:3", owner="user:carol-owner-key")
    async with server.client(token) as gql:
        response = await gql.post(CREATE)
        assert response.status_code == 200, response.text
        conversation_id = response.json()["data"]["createConversation"]["conversation"]["id"]

    async with connect(server) as socket:
        await socket.init(token)
        await socket.subscribe(WATCH, {"id": conversation_id})
        async with server.client(token) as gql:
            # Delivered: `subscribe` has no acknowledgement of its own.
            await socket.wait_until_live(lambda: touch(gql, conversation_id))
        await socket.complete()

    for _ in range(50):  # the WebSocket line is written when the server sees the end
        lines = json_lines(server.logs())
        if any(line.get("operation") == "Watch" for line in lines):
            break
        await asyncio.sleep(0.1)

    [http_line] = [
        line for line in lines if line.get("request_id") == response.headers["x-request-id"]
    ]
    assert http_line["logger"] == ACCESS
    assert (http_line["operation"], http_line["outcome"]) == ("Create", "ok")
    assert (http_line["workspace"], http_line["owner_type"]) == ("site:3", "user")
    [ws_line] = [line for line in lines if line.get("operation") == "Watch"]
    assert ws_line["operation_type"] == "subscription" and ws_line["outcome"] == "ok"
    assert (ws_line["workspace"], ws_line["owner_type"]) == ("site:3", "user")
    assert ws_line["request_id"]
    assert token not in server.logs() and "carol-owner-key" not in server.logs()


async def test_a_client_gone_mid_body_is_logged_as_499_not_as_a_server_error(
    live_servers: Any, database_url: str
) -> None:
    """A client that announces a body, sends part of it and hangs up did nothing wrong to the
    server: one line with nginx's 499 (client closed request) below error, no traceback, a
    499 in the metrics apart from the 5xx, and nothing stored."""
    server: LiveServer = await live_servers.start(
        database_url, env={"CONVOGRAPH_LOG_FORMAT": "json"}
    )
    token = await server.token()
    body = json.dumps({"query": CREATE}).encode()
    _, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(graphql_post_head(token, len(body)) + body[: len(body) // 2])
    await writer.drain()
    await asyncio.sleep(0.2)  # the server is reading the body when the client hangs up
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()

    line: dict[str, Any] = {}
    for _ in range(50):  # the line is written when the server sees the end
        found = [x for x in json_lines(server.logs()) if x.get("method") == "POST"]
        if found:
            [line] = found
            break
        await asyncio.sleep(0.1)
    assert line, server.logs()
    assert (line["status"], line["outcome"], line["level"]) == (499, "client_closed", "info")
    assert "exception" not in line
    logged = json_lines(server.logs())
    assert [x for x in logged if x["level"] in ("error", "critical")] == [], server.logs()
    assert "Traceback" not in server.logs()

    async with server.client(token) as gql:
        data = await gql("{ conversations(first: 1) { totalCount } }")
        assert data["conversations"]["totalCount"] == 0
        metrics = (await gql.http.get("/metrics")).text
    requests = [m for m in metrics.splitlines() if m.startswith("convograph_http_requests_total{")]
    assert any('route="/graphql"' in m and 'status="499"' in m for m in requests), requests
    assert not any('status="5' in m for m in requests), requests
