"""The documents kept between requests: by query text, long texts not at all."""

from __future__ import annotations

from graphql import parse

from graph.api.execution import observer
from graph.api.execution.documents import MAX_KEPT_CHARS, DocumentCache
from graph.api.execution.limits import Limits

LIMITS = Limits(max_depth=15, max_aliases=30, max_fields=500, max_directives=50)


def test_a_query_text_is_kept_once_and_a_long_one_not_at_all() -> None:
    """One client's distinct 250 KB queries (a long comment each) kept half a gigabyte: 512
    documents, each holding its text twice."""
    cache = DocumentCache(LIMITS, max_tokens=10_000, maxsize=512)
    short = "{ viewer { ownerKey } }"
    assert cache.parse(short) is cache.parse(short)
    assert len(cache) == 1
    for i in range(3):
        long = f"# {i:04}{'x' * MAX_KEPT_CHARS}\n{{ viewer {{ ownerKey }} }}"
        entry = cache.parse(long)
        assert entry.operations == 1  # parsed for its request
    assert len(cache) == 1


def test_the_observer_keeps_no_long_document_alive() -> None:
    """Its userErrors paths, kept per document, kept 1,000 documents the cache had let go."""
    long = parse(f"# {'x' * MAX_KEPT_CHARS}\nmutation {{ m {{ userErrors {{ code }} }} }}")
    short = parse("mutation { m { userErrors { code } } }")
    before = dict(observer._PATHS)
    try:
        observer._PATHS.clear()
        assert observer._error_paths(long, None) == [("m", [("userErrors", "code")])]
        assert observer._error_paths(short, None) == [("m", [("userErrors", "code")])]
        assert [document for document, _ in observer._PATHS.values()] == [short]
    finally:
        observer._PATHS.clear()
        observer._PATHS.update(before)
