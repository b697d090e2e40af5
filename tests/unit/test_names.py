"""The schema's name converter (Strawberry's names, computed once), and one schema per set
of limits in a process."""

from __future__ import annotations

from typing import Any

from strawberry.schema.name_converter import NameConverter

from graph.api.execution.documents import CachedDocuments, DocumentCache
from graph.api.names import CachedNames
from graph.api.schema import build_schema
from graph.settings import Settings


def test_the_cached_names_are_strawberrys() -> None:
    cached, plain = CachedNames(), NameConverter()
    for name in ("first", "from_seq", "include_descendants", "idempotency_key", "x_y_z", "_a"):
        assert cached.apply_naming_config(name) == plain.apply_naming_config(name)
        assert cached.apply_naming_config(name) == plain.apply_naming_config(name)


def test_the_schema_converts_names_with_it() -> None:
    schema = build_schema()
    assert isinstance(schema.config.name_converter, CachedNames)
    assert "includeDescendants" in schema.as_str()


def _documents(schema: Any) -> DocumentCache:
    (cache,) = [
        e.keywords["cache"]
        for e in schema.extensions
        if getattr(e, "func", None) is CachedDocuments
    ]
    return cache


def test_apps_with_the_same_limits_share_one_schema_and_others_get_their_own() -> None:
    default = build_schema(Settings())
    assert build_schema(Settings()) is default
    shallow = build_schema(Settings(max_query_depth=3))
    assert shallow is not default
    assert _documents(shallow).limits.max_depth == 3
    assert _documents(default).limits.max_depth == Settings().max_query_depth != 3
