"""Record ids: UUIDv4 strings, in their canonical form."""

from __future__ import annotations

import uuid

from graph.domain.errors import not_found


def new_id() -> str:
    return str(uuid.uuid4())


def canonical(value: object) -> str | None:
    """The canonical form of a UUID given in any form `uuid.UUID` reads, or None."""
    try:
        return str(uuid.UUID(value))  # type: ignore[arg-type]
    except (ValueError, AttributeError, TypeError):
        return None


def parse(value: object, *, what: str, field: str) -> str:
    """`value` as a canonical id; anything else names no record, so it is NOT_FOUND."""
    found = canonical(value)
    if found is None:
        raise not_found(what, field)
    return found
