"""A GraphQL response's HTTP status and shape, by the media type it goes out in.

`application/json`: 200 for every well-formed request, request errors included, with
`"data": null` as before (legacy clients read the body whatever the status).

`application/graphql-response+json`: a response whose operation never ran (a document that
does not parse or validate, an operation that cannot be chosen, variables that do not
coerce) has no `data` entry and a 4xx or 5xx status: 400, or 500 and 503 when what stopped
it was the server's fault (an unexpected error, the database unreachable). An operation that
ran is 200, even with field errors and `data` null.

An operation ran when its response has data, or one of its errors has a `path` (a field
error): the errors raised before execution never have one.
"""

from __future__ import annotations

from strawberry.http import GraphQLHTTPResponse

from graph.server.negotiation import GRAPHQL_RESPONSE_JSON

# A request error's code, when the server is to blame, and the status that says so.
SERVER_FAULTS = {"DATABASE_UNAVAILABLE": 503, "INTERNAL": 500}
# Seconds a client should wait before retrying a 503: a database away (a restart, a
# failover, another process's write lock) is most often back within about that.
UNAVAILABLE_RETRY_AFTER = "1"


def shape(media_type: str, body: GraphQLHTTPResponse) -> int:
    """Shape `body` for `media_type` (a request error loses its `data` entry) and return the
    status it goes out with."""
    if media_type != GRAPHQL_RESPONSE_JSON or body.get("data") is not None:
        return 200
    errors = body.get("errors") or ()
    if not errors or any(isinstance(e, dict) and "path" in e for e in errors):
        return 200
    body.pop("data", None)
    status = 400
    for error in errors:
        extensions = error.get("extensions") if isinstance(error, dict) else None
        code = extensions.get("code") if isinstance(extensions, dict) else None
        if isinstance(code, str):
            status = max(status, SERVER_FAULTS.get(code, 400))
    return status
