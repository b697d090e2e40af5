"""Store models built from result rows: SQLModel instances without validation or a Session.

The repositories read with SQLAlchemy Core (or on SQLite's driver, see prepared.py), not
through an ORM Session, and the values they read are already the columns' Python values.
Pydantic validation and SQLAlchemy's per-instance bookkeeping (`Model(**values)`) would cost
tens of microseconds per row; an instance made by the model's own `__new__` (SQLModel sets
pydantic's private attributes there) and filled with the row costs a few. It has no ORM
state: nothing flushes it, and it is never assigned to (SQLAlchemy's attribute setter would
need that state); reads find their values in its `__dict__`, as on any loaded instance.
tests/test_prepared.py fails if SQLAlchemy changes what this relies on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import inspect
from sqlmodel import SQLModel

from graph.store.tables import EnumText, UTCDateTime

M = TypeVar("M", bound=SQLModel)


class Builder(Generic[M]):
    """Builds instances of one model from rows whose keys are its columns' keys."""

    def __init__(self, model: type[M]) -> None:
        mapper = inspect(model)
        self._new: Callable[[], M] = functools.partial(model.__new__, model)
        # Column keys (what a result row is keyed by) to attribute names: they differ only
        # where a column's name is taken in Python (`metadata` -> `meta`).
        self._attributes = {
            column.key: prop.key for prop in mapper.column_attrs for column in prop.columns
        }
        self._columns: dict[str, str] = {a: key for key, a in self._attributes.items()}
        self._key_cache: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._decoders: dict[str, Callable[[Any], Any]] = {}
        for prop in mapper.column_attrs:
            column_type = prop.columns[0].type
            if isinstance(column_type, UTCDateTime):
                self._decoders[prop.key] = datetime.fromisoformat
            elif isinstance(column_type, EnumText):
                self._decoders[prop.key] = column_type.enum_type

    def column(self, attribute: str) -> str:
        """The column key of attribute `attribute`."""
        return self._columns[attribute]

    def attributes(self, keys: Sequence[str]) -> tuple[str, ...]:
        """The attribute names of result columns `keys` (other columns keep their key)."""
        found = self._key_cache.get(tuple(keys))
        if found is None:
            found = tuple(self._attributes.get(k, k) for k in keys)
            self._key_cache[tuple(keys)] = found
        return found

    def one(self, attributes: Sequence[str], values: Iterable[Any]) -> M:
        instance: M = self._new()
        instance.__dict__.update(zip(attributes, values, strict=True))
        return instance

    def many(self, keys: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[M]:
        attributes = self.attributes(keys)
        new = self._new
        out = []
        for row in rows:
            instance: M = new()
            instance.__dict__.update(zip(attributes, row, strict=True))
            out.append(instance)
        return out

    def load(self, values: Mapping[str, Any]) -> M:
        """An instance from `dump`'s values after a JSON round trip (an event from another
        replica): timestamps and enums are turned back into their Python values."""
        instance: M = self._new()
        instance.__dict__.update(
            (k, self._decoders[k](v) if v is not None and k in self._decoders else v)
            for k, v in values.items()
        )
        return instance


def dump(instance: SQLModel) -> dict[str, Any]:
    """The column values an instance holds, by attribute name (for an event's payload)."""
    return {k: v for k, v in instance.__dict__.items() if not k.startswith("_")}
