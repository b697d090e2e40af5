"""The JSON scalar: stored documents go out as raw JSON text, never re-parsed.

`serialize` leaves a stored document as the RawJSON (or RawJSONArray) the type gave it:
the server encodes responses with jsoncodec.dumps, which writes those as they are.
"""

from __future__ import annotations

import math
from typing import Any, NewType

import strawberry
from graphql import ValueNode, value_from_ast_untyped

from graph.domain.jsoncodec import RawJSON

JSON = NewType("JSON", object)


def _serialize(value: Any) -> Any:
    return value


def _parse_value(value: Any) -> Any:
    return value


def _parse_literal(node: ValueNode, variables: dict[str, Any] | None = None) -> Any:
    value = value_from_ast_untyped(node, variables)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("JSON numbers must be finite")
    return value


JSON_SCALAR = strawberry.scalar(
    name="JSON",
    description="Any JSON value, stored and returned losslessly.",
    serialize=_serialize,
    parse_value=_parse_value,
    parse_literal=_parse_literal,
)

SCALAR_MAP: dict[object, Any] = {JSON: JSON_SCALAR}

__all__ = ["JSON", "SCALAR_MAP", "RawJSON"]
