"""graphql-transport-ws messages checked for shape before strawberry handles them.

The protocol closes the socket with 4400 on "a message of a type or format which is not
specified". strawberry's handler checks the type and that the keys it reads are present,
but not what they hold: a frame of JSON that is not an object, a `subscribe` whose payload
is not an object, or whose `query`, `variables`, `operationName` or `extensions` are of
another type than the GraphQL over HTTP request's, got an unhandled TypeError (the socket
dropped without a close frame, a traceback in the log) or a masked INTERNAL error. Each is
now closed with 4400 and a reason naming what is wrong, as HTTP answers the same request
with a 400.

A close frame holds at most 123 bytes of reason (RFC 6455 5.5: a control frame's payload is
125 bytes, two of them the code). Strawberry's reasons quote what the client sent (a
duplicate operation id, an unknown message type or operation name): past that length
uvicorn raised "control frame too long", and the socket dropped with no close frame at all.
`close_reason` shortens a reason to fit.
"""

from __future__ import annotations

from typing import Any

# What a close frame's reason may hold, in bytes of UTF-8.
MAX_CLOSE_REASON_BYTES = 123
_ELLIPSIS = "…"

# The subscribe payload's fields: the types a GraphQL over HTTP request allows for them.
_OPTIONAL_OBJECTS = ("variables", "extensions")


def problem(message: Any) -> str | None:
    """What makes `message` (a decoded frame) malformed, or None if its shape is one the
    protocol specifies (its type and required keys are strawberry's to check)."""
    if not isinstance(message, dict):
        return "a message must be a JSON object"
    kind = message.get("type")
    if kind not in ("subscribe", "complete"):
        return None
    if not isinstance(message.get("id", ""), str):
        return f"the id of a {kind} message must be a string"
    if kind == "complete":
        return None
    payload = message.get("payload", {})
    if not isinstance(payload, dict):
        return "the payload of a subscribe message must be an object"
    if not isinstance(payload.get("query", ""), str):
        return "the subscribe payload's query must be a string"
    if not isinstance(payload.get("operationName"), str | None):
        return "the subscribe payload's operationName must be a string or null"
    for key in _OPTIONAL_OBJECTS:
        if not isinstance(payload.get(key), dict | None):
            return f"the subscribe payload's {key} must be an object or null"
    return None


def close_reason(reason: str) -> str:
    """`reason` as a close frame can carry it: cut at a character, marked with an ellipsis,
    when its UTF-8 is longer than a close frame holds."""
    encoded = reason.encode("utf-8", "replace")
    if len(encoded) <= MAX_CLOSE_REASON_BYTES:
        return reason
    room = MAX_CLOSE_REASON_BYTES - len(_ELLIPSIS.encode())
    return encoded[:room].decode("utf-8", "ignore") + _ELLIPSIS
