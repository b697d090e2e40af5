"""Which media type a GraphQL response goes out in: content negotiation on `Accept`.

GraphQL over HTTP names two response types. `application/graphql-response+json` is the
specification's own: its status codes tell a request error (400, no `data`) from an
executed operation (200). `application/json` is for legacy clients: 200 for every
well-formed request, errors or not. The client's `Accept` header chooses (RFC 9110 §12.5.1):
each type takes the q-value of the most specific range that matches it (`type/subtype`,
then `type/*`, then `*/*`), the highest q wins, and on a tie the more specific match. Of two
types named outright with the same q, the specification's own wins; of two reached only by a
wildcard (`*/*`, `application/*`), `application/json`, which every client reads. No
`Accept` is read as `application/json`, as before. When `Accept` allows neither, there is no
media type (the endpoint answers 406).

Most requests send one of a few headers (`application/json`, `*/*`, none): those are a
dictionary lookup; any other header is parsed once and remembered.
"""

from __future__ import annotations

from functools import lru_cache

GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
JSON = "application/json"
SERVED = (GRAPHQL_RESPONSE_JSON, JSON)

_COMMON: dict[str, str] = {
    "": JSON,
    "*/*": JSON,
    JSON: JSON,
    GRAPHQL_RESPONSE_JSON: GRAPHQL_RESPONSE_JSON,
}


def negotiate(accept: str | None) -> str | None:
    """The media type to answer in, or None when `accept` allows none of SERVED."""
    if accept is None:
        return JSON
    common = _COMMON.get(accept)
    return common if common is not None else _negotiated(accept)


@lru_cache(maxsize=256)
def _negotiated(accept: str) -> str | None:
    ranges = _ranges(accept)
    if not ranges:
        return JSON  # a blank header says nothing: as if there were none
    best: tuple[float, int, bool] | None = None
    chosen = None
    for media_type in SERVED:
        q, specificity = _quality(media_type, ranges)
        if q <= 0:
            continue
        preferred = (media_type == GRAPHQL_RESPONSE_JSON) == (specificity == 2)
        key = (q, specificity, preferred)
        if best is None or key > best:
            best, chosen = key, media_type
    return chosen


def _ranges(accept: str) -> list[tuple[str, str, float]]:
    """The media ranges of an Accept header: (type, subtype, q); malformed ones left out."""
    ranges = []
    for part in accept.split(","):
        media_range, *params = part.split(";")
        kind, slash, subtype = media_range.strip().lower().partition("/")
        if not slash or not kind or not subtype or (kind == "*" and subtype != "*"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = -1.0
        if 0 <= q <= 1:
            ranges.append((kind, subtype, q))
    return ranges


def _quality(media_type: str, ranges: list[tuple[str, str, float]]) -> tuple[float, int]:
    """The q-value the most specific matching range gives `media_type`, and how specific
    that range is (2 for `type/subtype`, 1 for `type/*`, 0 for `*/*`, -1 for none)."""
    kind, _, subtype = media_type.partition("/")
    q, specificity = 0.0, -1
    for range_kind, range_subtype, range_q in ranges:
        if range_kind == kind and range_subtype == subtype:
            level = 2
        elif range_kind == kind and range_subtype == "*":
            level = 1
        elif range_kind == "*":
            level = 0
        else:
            continue
        if level > specificity or (level == specificity and range_q > q):
            q, specificity = range_q, level
    return q, specificity
