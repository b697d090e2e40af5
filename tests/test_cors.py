"""Browser pages of other origins (CONVOGRAPH_CORS_ORIGINS): a dashboard served from its own
origin calls /graphql with a bearer token. Without the setting no origin but the server's
own is let in (no CORS headers at all); with it, exactly the origins it names."""

from __future__ import annotations

import httpx
import pytest

from graph.settings import Settings, SettingsError, cors_origins
from tests.conftest import GraphQLClient
from tests.operations import VIEWER

DASHBOARD = "https://dash.example.org"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization,content-type",
}


async def post(gql: GraphQLClient, origin: str, token: str | None = None) -> httpx.Response:
    """The viewer query as a page of `origin` sends it."""
    headers = {"Authorization": f"Bearer {token or gql.token}", "Origin": origin}
    return await gql.http.post("/graphql", json={"query": VIEWER}, headers=headers)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.replace(cors_origins=f"{DASHBOARD}, http://localhost:5173")


async def test_a_page_of_a_named_origin_may_call_the_api(gql: GraphQLClient) -> None:
    preflight = await gql.http.options("/graphql", headers={"Origin": DASHBOARD, **PREFLIGHT})
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == DASHBOARD
    allowed = preflight.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "convograph-owner"} <= set(allowed.split(", "))
    assert "access-control-allow-credentials" not in preflight.headers  # bearer, no cookies

    response = await post(gql, DASHBOARD)
    assert response.status_code == 200 and "errors" not in response.json()
    assert response.headers["access-control-allow-origin"] == DASHBOARD
    exposed = response.headers["access-control-expose-headers"].lower()
    assert "retry-after" in exposed and "x-request-id" in exposed
    # A refusal is readable by the page too (it must see the 401 to ask for a token).
    refused = await post(gql, DASHBOARD, token="not-a-token")
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == DASHBOARD


async def test_a_page_of_another_origin_is_not_let_in(gql: GraphQLClient) -> None:
    other = "https://evil.example"
    preflight = await gql.http.options("/graphql", headers={"Origin": other, **PREFLIGHT})
    assert preflight.status_code == 400
    assert "access-control-allow-origin" not in preflight.headers
    response = await post(gql, other)
    assert "access-control-allow-origin" not in response.headers


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/ui"])
async def test_only_the_api_is_opened_to_other_origins(gql: GraphQLClient, path: str) -> None:
    """/metrics is open to loopback by default: a page of an allowed origin (or of any, with
    `*`) in a browser on the server's host read it once CORS covered every path."""
    response = await gql.http.get(path, headers={"Origin": DASHBOARD})
    assert "access-control-allow-origin" not in response.headers
    preflight = await gql.http.options(path, headers={"Origin": DASHBOARD, **PREFLIGHT})
    assert "access-control-allow-origin" not in preflight.headers


def test_origins_are_kept_as_a_browser_sends_them() -> None:
    given = "HTTPS://Dash.Example.org:443, http://localhost:5173, http://a.example:80"
    assert cors_origins(given) == [DASHBOARD, "http://localhost:5173", "http://a.example"]


def test_without_the_setting_no_origin_is_let_in() -> None:
    """The default: the app has no CORS middleware, so no page of another origin reads it."""
    from graph.app import cors

    assert cors(Settings()) == []


@pytest.mark.parametrize(
    "value",
    [
        "dash.example.org",
        "https://dash.example.org/app",
        "ftp://x",
        "*, https://a.b",
        "https://a b",
        "https://user@a.example",
    ],
)
def test_a_malformed_origin_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CONVOGRAPH_CORS_ORIGINS", value)
    with pytest.raises(SettingsError, match="CONVOGRAPH_CORS_ORIGINS"):
        Settings.from_env()
