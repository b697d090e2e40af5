"""The JSON scalar's literals: what a query writes inline is a JSON value or refused."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import GraphQLError, parse_value

from graph.api.scalars import JSON, SCALAR_MAP
from graph.domain import jsoncodec


def literal(text: str) -> Any:
    parse = SCALAR_MAP[JSON].parse_literal
    assert parse is not None
    return parse(parse_value(text), None)


def test_a_literal_reads_as_its_json_value() -> None:
    assert literal('{role: "user", n: 12345678901234567890, xs: [1.5, true, null]}') == {
        "role": "user",
        "n": 12345678901234567890,
        "xs": [1.5, True, None],
    }


@pytest.mark.parametrize(
    "text", ["1e400", "-1e400", "{score: 1e400}", "[1, [-1e999]]", "{a: {b: [{c: 1e309}]}}"]
)
def test_a_literal_with_a_non_finite_number_anywhere_is_refused(text: str) -> None:
    # Regression: only a top-level number was checked; a nested one reached the store and
    # was written as null.
    # GraphQLError: graphql-core reports it as the literal's error (a ValueError would be
    # an internal one).
    with pytest.raises(GraphQLError, match="finite"):
        literal(text)


def test_a_literal_integer_past_the_digits_python_reads_is_refused_saying_the_limit() -> None:
    # graphql-core read it as NaN, which was then refused as "JSON numbers must be finite".
    for text in ("1" * 4301, "{n: [-" + "9" * 5000 + "]}"):
        with pytest.raises(GraphQLError, match="JSON integers may have at most 4300 digits"):
            literal(text)
    assert literal("{n: " + "7" * 4300 + "}") == {"n": int("7" * 4300)}


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("1e-400", b"1e-400"),
        ("-4e-324", b"-4e-324"),
        ("2.2250738585072014e-309", b"2.2250738585072014e-309"),
        ("5e-324", b"5e-324"),
    ],
)
def test_a_literal_number_past_a_floats_smallest_normal_keeps_its_text(
    text: str, stored: bytes
) -> None:
    # It was the float: 1e-400 was stored as 0.0, 4e-324 as 5e-324.
    assert jsoncodec.dumps_document({"n": literal(text)}) == b'{"n":' + stored + b"}"
