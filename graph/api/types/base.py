"""GraphQL types over store models: a type wraps its model instead of copying its fields.

A wrapper's plain fields (declared on the type, with no resolver) are read from the model by
`field_value`, the schema's default resolver; fields that compute something are resolvers
reading `self._row`.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from strawberry.types import Info as StrawberryInfo

from graph.api.context import Context

M = TypeVar("M")
W = TypeVar("W", bound="Wraps[Any]")

# The `info` of every resolver here: our context, no root value.
Info = StrawberryInfo[Context, None]


class Wraps(Generic[M]):
    _row: M

    @classmethod
    def of(cls: type[W], row: Any) -> W:
        wrapper = cls.__new__(cls)
        wrapper._row = row
        return wrapper


def field_value(source: Any, name: str) -> Any:
    """The value of plain field `name` of `source` (StrawberryConfig.default_resolver)."""
    if isinstance(source, Wraps):
        return getattr(source._row, name)
    return getattr(source, name)
