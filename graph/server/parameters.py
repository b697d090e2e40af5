"""The GraphQL-over-HTTP request parameters, each of the type the specification gives it.

`query` is a string, `operationName` a string, `variables` and `extensions` objects (maps);
any of them but `query` may be null or left out. A request with a parameter of another type
is not a well-formed GraphQL-over-HTTP request: HTTP 400, with a message that names the
parameter, whatever the media type of the answer. Strawberry checks `query`, `variables` and
`extensions` of a JSON body; `operationName` and the JSON-encoded values of a GET's query
string are checked here.

An empty `operationName` is no operation name (the specification says so of GET; no
operation can be named "" anyway), and so are empty `variables` and `extensions` in a GET.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from cross_web import HTTPException
from strawberry.http import GraphQLRequestData

ENCODED = ("variables", "extensions")


class RefusedNumber(json.JSONDecodeError):
    """JSON text, but with a number the codec does not hold (jsoncodec.NumberOutOfRange): a
    JSONDecodeError still for Strawberry (a WebSocket's frame), which a body's and a GET's
    parameters answer with the codec's words, not as text that is no JSON."""


def wrong_type(parameter: str, expected: str) -> HTTPException:
    return HTTPException(
        400, f"The GraphQL operation's `{parameter}` must be {expected} or null, if provided."
    )


def query_text_problem(query: object, *, max_chars: int, max_lines: int) -> str | None:
    """Why a query text is refused before it is parsed, or None. graphql-core locates each
    of up to 100 errors by walking every line break before it in Python, and comments are
    lexed but not counted as tokens: a text of 256 KiB of line breaks and a hundred bad
    fields held the event loop for seconds. So its length and its lines are bounded."""
    if not isinstance(query, str):
        return None
    if len(query) > max_chars:
        return f"query text exceeds {max_chars} characters; pass large values as variables"
    # Lines as GraphQL counts them: \r\n, \n and \r each end one.
    if query.count("\n") + query.count("\r") - query.count("\r\n") > max_lines:
        return f"query text exceeds {max_lines} lines"
    return None


def check_operation_name(item: GraphQLRequestData) -> None:
    name: object = item.operation_name
    if name is None or isinstance(name, str):
        if name == "":
            item.operation_name = None
        return
    raise wrong_type("operationName", "a string")


def decode_query_params(
    params: Mapping[str, Any], decode: Callable[[str], object]
) -> dict[str, Any]:
    """A GET's parameters, with `variables` and `extensions` decoded from their JSON."""
    decoded = dict(params)
    for name in ENCODED:
        value = decoded.get(name)
        if value == "":
            decoded[name] = None
        elif isinstance(value, str):
            try:
                decoded[name] = decode(value)
            except RefusedNumber as refused:
                raise HTTPException(
                    400, f"The GraphQL operation's `{name}`: {refused.msg}"
                ) from None
            except json.JSONDecodeError:
                raise wrong_type(name, "a JSON-encoded object") from None
    return decoded
