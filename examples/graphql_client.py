"""The few lines of GraphQL over HTTP that the examples share: httpx, no generated code.

client = connect("entropic_client.py: ...")   # URL and token from argv or the environment
data = client.query("query { viewer { scopes } }")
payload = client.mutate("mutation ...", "createConversation", input={...})
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000/graphql"
USAGE = """usage: {prog} [URL [TOKEN]]

URL defaults to $CONVOGRAPH_URL, else {default}; TOKEN defaults to $CONVOGRAPH_TOKEN
(make one with `convograph token create --workspace site:1 --owner user:alice --scope write`)."""


class Failed(Exception):
    """The server refused a request, or answered something the flow did not expect."""


def check(condition: bool, what: str) -> None:
    """Fail the flow unless `condition` holds (an assert would vanish under `python -O`)."""
    if not condition:
        raise Failed(what)


class Client:
    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def query(self, document: str, **variables: Any) -> dict[str, Any]:
        """Run an operation; its `data`. Any GraphQL or HTTP error fails the flow."""
        response = self.http.post(self.url, json={"query": document, "variables": variables})
        if response.status_code != 200:
            raise Failed(f"HTTP {response.status_code} from {self.url}: {response.text[:500]}")
        body = response.json()
        if body.get("errors"):
            raise Failed(f"GraphQL errors: {body['errors']}")
        data: dict[str, Any] = body["data"]
        return data

    def mutate(
        self, document: str, field: str, *, expect: str | None = None, **variables: Any
    ) -> dict[str, Any]:
        """Run a mutation; the payload of `field`.

        Its `userErrors` must be empty, or hold exactly one error with the code `expect`.
        """
        payload: dict[str, Any] = self.query(document, **variables)[field]
        codes = [error["code"] for error in payload["userErrors"]]
        wanted = [expect] if expect else []
        check(codes == wanted, f"{field}: userErrors {payload['userErrors']}, expected {wanted}")
        return payload


def connect(argv: list[str] | None = None) -> Client:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        raise SystemExit(USAGE.format(prog=os.path.basename(sys.argv[0]), default=DEFAULT_URL))
    url = args[0] if args else os.environ.get("CONVOGRAPH_URL", DEFAULT_URL)
    token = args[1] if len(args) > 1 else os.environ.get("CONVOGRAPH_TOKEN", "")
    if not token:
        raise SystemExit(
            "no token: " + USAGE.format(prog=os.path.basename(sys.argv[0]), default=DEFAULT_URL)
        )
    return Client(url, token)


def run(flow: Callable[[Client], None]) -> None:
    """Run `flow` against the server named on the command line; exit 1 on any failure."""
    client = connect()
    try:
        flow(client)
    except (Failed, httpx.HTTPError) as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print("OK")
