"""The scalars the schema adds or overrides: JSON, DateTime and BigInt.

JSON: stored documents go out as raw JSON text, never re-parsed. `serialize` leaves a
stored document as the RawJSON (or RawJSONArray) the type gave it: the server encodes
responses with jsoncodec.dumps, which writes those as they are.

DateTime: every instant the service stores is in UTC, so an input without a UTC offset
(`2000-01-01`, `2000-01-01T12:00`) is read as UTC, the way the store reads one, instead
of reaching the domain as a naive datetime that cannot be compared with the clock.

BigInt: a total that may outgrow GraphQL's Int, which is 32 bits (a workspace's tokens pass
2**31 long before its messages do). It goes out as a plain JSON number.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NewType

import strawberry
from graphql import (
    FloatValueNode,
    GraphQLError,
    IntValueNode,
    ListValueNode,
    ObjectValueNode,
    Undefined,
    ValueNode,
    value_from_ast_untyped,
)

from graph.domain.jsoncodec import NumberOutOfRange, RawJSON, check_finite, exact_float, exact_int

JSON = NewType("JSON", object)
BigInt = NewType("BigInt", int)
BIGINT_MAX = 2**63 - 1


def _serialize(value: Any) -> Any:
    return value


def _parse_value(value: Any) -> Any:
    return value


def _literal(node: ValueNode, variables: dict[str, Any] | None) -> Any:
    """A JSON literal's value, as graphql-core reads it but for two things: a variable the
    request did not provide is left out of an object (as an input object's field would be)
    and null in a list; a number keeps the digits a float would lose (jsoncodec), or is
    refused in the codec's words (graphql-core read an integer past 4,300 digits as NaN,
    which was then refused as "JSON numbers must be finite")."""
    if isinstance(node, FloatValueNode):
        return exact_float(node.value)
    if isinstance(node, IntValueNode):
        try:
            return exact_int(node.value)
        except NumberOutOfRange as exc:
            raise GraphQLError(str(exc), node) from None
    if isinstance(node, ObjectValueNode):
        fields = ((f.name.value, _literal(f.value, variables)) for f in node.fields)
        return {name: value for name, value in fields if value is not Undefined}
    if isinstance(node, ListValueNode):
        items = (_literal(item, variables) for item in node.values)
        return [None if item is Undefined else item for item in items]
    return value_from_ast_untyped(node, variables)


def _parse_literal(node: ValueNode, variables: dict[str, Any] | None = None) -> Any:
    value = _literal(node, variables)
    try:
        # Anywhere in the literal (`{score: 1e400}`), not only at its top.
        check_finite(value)
    except ValueError as exc:
        # GraphQLError: reported as the literal's error, not as an internal one, in the
        # codec's words (the range), as a variable's 1e400 is.
        raise GraphQLError(str(exc), node) from None
    return value


def _parse_datetime(value: Any) -> datetime:
    # GraphQLError, not ValueError: graphql-core reports it as the literal's or variable's
    # error (a plain exception from a literal would surface as an internal one).
    if not isinstance(value, str):
        raise GraphQLError(f"DateTime must be an ISO 8601 string, not {type(value).__name__}")
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise GraphQLError(f"DateTime must be an ISO 8601 date and time: {value!r}") from None
    if at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    try:
        return at.astimezone(UTC)
    except OverflowError:
        # 9999-12-31T23:59-14:00 is a valid text but no instant Python (or the store) holds.
        raise GraphQLError(
            f"DateTime must fall within the years 1 to 9999 in UTC: {value!r}"
        ) from None


def _serialize_datetime(value: datetime) -> str:
    # Always with microseconds: isoformat() leaves the fraction out when it is zero, and a
    # client reading a fixed width got two shapes.
    return value.isoformat(timespec="microseconds")


def _bigint(value: Any) -> int:
    if type(value) is not int or not -BIGINT_MAX - 1 <= value <= BIGINT_MAX:
        raise ValueError(f"BigInt must be a whole number of at most 64 bits: {value!r}")
    return value


DATETIME_SCALAR = strawberry.scalar(
    name="DateTime",
    description="An ISO 8601 date and time; one without a UTC offset is read as UTC.",
    serialize=_serialize_datetime,
    parse_value=_parse_datetime,
)

JSON_SCALAR = strawberry.scalar(
    name="JSON",
    description="Any JSON value, stored and returned losslessly.",
    serialize=_serialize,
    parse_value=_parse_value,
    parse_literal=_parse_literal,
)

BIGINT_SCALAR = strawberry.scalar(
    name="BigInt",
    description="A whole number of up to 64 bits (GraphQL's Int has 32), as a JSON number: "
    "JavaScript reads it exactly up to 2^53.",
    serialize=_bigint,
    parse_value=_bigint,
)

SCALAR_MAP: dict[object, Any] = {
    JSON: JSON_SCALAR,
    datetime: DATETIME_SCALAR,
    BigInt: BIGINT_SCALAR,
}

__all__ = ["JSON", "SCALAR_MAP", "BigInt", "RawJSON"]
