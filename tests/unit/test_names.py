"""The schema's name converter: Strawberry's names, computed once."""

from __future__ import annotations

from strawberry.schema.name_converter import NameConverter

from graph.api.names import CachedNames
from graph.api.schema import build_schema


def test_the_cached_names_are_strawberrys() -> None:
    cached, plain = CachedNames(), NameConverter()
    for name in ("first", "from_seq", "include_descendants", "idempotency_key", "x_y_z", "_a"):
        assert cached.apply_naming_config(name) == plain.apply_naming_config(name)
        assert cached.apply_naming_config(name) == plain.apply_naming_config(name)


def test_the_schema_converts_names_with_it() -> None:
    schema = build_schema()
    assert isinstance(schema.config.name_converter, CachedNames)
    assert "includeDescendants" in schema.as_str()
