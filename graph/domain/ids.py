"""Record ids: UUIDv4 strings, in their canonical form."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable

from graph.domain.errors import not_found

# The canonical spelling itself, which every request that names a record sends: matched
# here it needs none of uuid.UUID's parsing (several times the cost, on every write).
_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").fullmatch


def new_id() -> str:
    return str(uuid.uuid4())


def canonical(value: object) -> str | None:
    """The canonical form of a UUID given in any form `uuid.UUID` reads, or None."""
    if type(value) is str and _CANONICAL(value):
        return value
    try:
        return str(uuid.UUID(value))  # type: ignore[arg-type]
    except (ValueError, AttributeError, TypeError):
        return None


def spellings(given: Iterable[str]) -> dict[str, list[str]]:
    """The ids of `given` that are UUIDs, canonical, each with every way it was spelled
    there: one request may name a record twice, in two forms (`a…` and `A…`), and each must
    find it."""
    found: dict[str, list[str]] = {}
    for value in given:
        if (key := canonical(value)) is not None:
            found.setdefault(key, []).append(value)
    return found


def parse(value: object, *, what: str, field: str) -> str:
    """`value` as a canonical id; anything else names no record, so it is NOT_FOUND."""
    found = canonical(value)
    if found is None:
        raise not_found(what, field)
    return found
