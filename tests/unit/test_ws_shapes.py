"""The shapes of graphql-transport-ws messages refused before strawberry reads them."""

from __future__ import annotations

from typing import Any

import pytest

from graph.server.ws_shapes import problem


@pytest.mark.parametrize(
    "message",
    [
        {"type": "connection_init"},
        {"type": "connection_init", "payload": {"Authorization": "Bearer x"}},
        {"type": "ping"},
        {"type": "complete", "id": "1"},
        {"type": "subscribe", "id": "1", "payload": {"query": "subscription { a }"}},
        {
            "type": "subscribe",
            "id": "1",
            "payload": {
                "query": "subscription { a }",
                "variables": None,
                "operationName": None,
                "extensions": None,
            },
        },
        {
            "type": "subscribe",
            "id": "1",
            "payload": {
                "query": "subscription A { a }",
                "variables": {"x": 1},
                "operationName": "A",
                "extensions": {"k": "v"},
            },
        },
        # What the protocol requires but does not shape (a missing id, payload or query)
        # strawberry itself refuses with 4400; an unknown type too.
        {"type": "subscribe"},
        {"type": "subscribe", "id": "1"},
        {"type": "subscribe", "id": "1", "payload": {}},
        {"type": "nonsense"},
        {},
    ],
)
def test_shapes_the_protocol_specifies_pass(message: dict[str, Any]) -> None:
    assert problem(message) is None


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ([], "JSON object"),
        (None, "JSON object"),
        ("subscribe", "JSON object"),
        (5, "JSON object"),
        ({"type": "complete", "id": 1}, "id of a complete"),
        ({"type": "subscribe", "id": None, "payload": {"query": "q"}}, "id of a subscribe"),
        ({"type": "subscribe", "id": "1", "payload": "q"}, "payload"),
        ({"type": "subscribe", "id": "1", "payload": None}, "payload"),
        ({"type": "subscribe", "id": "1", "payload": {"query": None}}, "query"),
        ({"type": "subscribe", "id": "1", "payload": {"query": "q", "variables": []}}, "variables"),
        ({"type": "subscribe", "id": "1", "payload": {"query": "q", "operationName": 1}}, "opera"),
        ({"type": "subscribe", "id": "1", "payload": {"query": "q", "extensions": "e"}}, "exten"),
    ],
)
def test_other_shapes_are_named(message: Any, named: str) -> None:
    found = problem(message)
    assert found is not None and named in found
