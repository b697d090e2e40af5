"""The bounds on what one document may cost (graph/api/execution/limits.py): depth, aliases,
fields after fragment expansion and directives, across every operation and fragment;
measured in linear time however the fragments spread one another."""

from __future__ import annotations

import time

import graphql.validation.rules.overlapping_fields_can_be_merged as merging
import pytest
from graphql import build_schema, parse, validate

from graph.api.execution import limits
from graph.api.execution.limits import Limits, Measure

BIG = Limits(max_depth=1000, max_aliases=10**6, max_fields=10**12, max_directives=1000)


def measure(text: str) -> Measure:
    return limits.measure(parse(text))


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("{ a }", 0),
        ("{ a b c }", 0),
        ("{ a { b } }", 1),
        ("{ a { b { c } } d }", 2),
        ("{ a { b } c { d { e { f } } } }", 3),
        ("query { x { y } } mutation { m { n { o } } }", 2),
        # As graphql-depth-limit counts: an introspection field's subtree adds no depth.
        ("{ __schema { types { fields { type { ofType { name } } } } } }", 0),
        ('{ a { __type(name: "T") { fields { name } } } }', 1),
        ("{ __typename a { __typename } }", 1),
    ],
)
def test_depth_counts_nested_selections(text: str, depth: int) -> None:
    assert measure(text).depth == depth


def test_introspection_fields_still_count_as_fields() -> None:
    assert measure("{ __schema { types { fields { name } } } }").fields == 4


def test_depth_counts_through_fragments_and_inline_fragments() -> None:
    text = """
    query { a { ...F } }
    fragment F on T { b { ... on U { c { d } } } }
    """
    assert measure(text).depth == 3


def test_fields_are_counted_after_expanding_every_spread() -> None:
    text = """
    { a { ...F ...F } b: a { ...F } }
    fragment F on T { x y z }
    """
    found = measure(text)
    assert found.fields == 2 + 3 * 3
    assert found.aliases == 1


def test_aliases_are_counted_in_every_operation_and_fragment() -> None:
    text = """
    query One { a: f b: f { c: g } }
    query Two { d: f }
    fragment Unused on T { e: f g: f }
    """
    assert measure(text).aliases == 6


def test_a_fragment_no_operation_spreads_is_measured_too() -> None:
    found = measure("{ a } fragment Deep on T { x { y { z } } }")
    assert found.depth == 2
    assert found.fields == 4


def test_directives_are_counted_wherever_they_are() -> None:
    # Regression: a fragment definition's own directives went uncounted, so any number of
    # them passed max_directives and reached graphql-core's validation.
    text = """
    query Q @a { f @b @c { ... on T @d { g } ...F @e } }
    fragment F on T @f { h @g }
    """
    assert measure(text).directives == 7


def test_directives_on_a_fragment_definition_are_bounded() -> None:
    text = "{ ...F } fragment F on Query " + "@include(if: true) " * 500 + "{ g }"
    (error,) = limits.over_limits(parse(text), Limits(10, 10, 10, max_directives=200))
    assert "directives" in error.message


def test_spreads_that_double_at_each_level_are_measured_in_linear_time() -> None:
    # F0 spreads F1 twice, F1 spreads F2 twice... 2**40 fields once expanded: a walk that
    # expands every spread afresh would never finish.
    levels = 40
    fragments = "\n".join(
        f"fragment F{i} on T {{ ...F{i + 1} ...F{i + 1} }}" for i in range(levels)
    )
    text = "{ a { ...F0 } }\n" + fragments + f"\nfragment F{levels} on T {{ leaf }}"
    started = time.perf_counter()
    found = measure(text)
    assert time.perf_counter() - started < 2
    assert found.fields == 1 + 2**levels
    (error,) = limits.over_limits(parse(text), Limits(100, 100, 1000, 100))
    assert "fields" in error.message


def test_cyclic_and_unknown_fragments_do_not_hang_the_measure() -> None:
    text = """
    { a { ...A ...Missing } }
    fragment A on T { x ...B }
    fragment B on T { y ...A }
    """
    found = measure(text)
    assert found.fields >= 3


def test_a_document_at_every_limit_passes() -> None:
    text = "{ a: f { b: g { h @skip(if: false) } } }"
    found = measure(text)
    exact = Limits(
        max_depth=found.depth,
        max_aliases=found.aliases,
        max_fields=found.fields,
        max_directives=found.directives,
    )
    assert (found.depth, found.aliases, found.fields, found.directives) == (2, 2, 3, 1)
    assert limits.over_limits(parse(text), exact) == []


@pytest.mark.parametrize(
    ("limit", "word"),
    [
        (Limits(max_depth=1, max_aliases=2, max_fields=3, max_directives=1), "depth"),
        (Limits(max_depth=2, max_aliases=1, max_fields=3, max_directives=1), "aliases"),
        (Limits(max_depth=2, max_aliases=2, max_fields=2, max_directives=1), "fields"),
        (Limits(max_depth=2, max_aliases=2, max_fields=3, max_directives=0), "directives"),
    ],
)
def test_one_over_a_limit_is_refused_naming_it(limit: Limits, word: str) -> None:
    (error,) = limits.over_limits(parse("{ a: f { b: g { h @skip(if: false) } } }"), limit)
    assert word in error.message
    assert "> " in error.message


def test_every_limit_exceeded_is_reported() -> None:
    errors = limits.over_limits(
        parse("{ a: f { b: g { h @skip(if: false) } } }"), Limits(0, 0, 0, 0)
    )
    assert len(errors) == 4


def test_a_huge_flat_document_is_measured_quickly() -> None:
    text = "{ " + " ".join(f"a{i}: f" for i in range(2_000)) + " }"
    document = parse(text)
    started = time.perf_counter()
    found = limits.measure(document)
    assert time.perf_counter() - started < 2
    assert (found.fields, found.aliases) == (2_000, 2_000)
    assert limits.over_limits(document, BIG) == []


SCHEMA = build_schema("type Query { f(x: Int): Query  g: Int }")


def test_a_lowered_merge_budget_makes_graphql_core_stop_early(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A private graphql-core setting (hence the upper version bound): this fails when it
    # stops being read.
    monkeypatch.setattr(merging, "MAX_COMPLEXITY_BUDGET", merging.MAX_COMPLEXITY_BUDGET)
    # Same-named fields that do merge: pairwise checks, and no error under a fair budget.
    document = parse("{ " + " ".join("f(x: 1) { g }" for _ in range(60)) + " }")
    limits.bound_merge_checks(100_000)
    assert validate(SCHEMA, document) == []
    limits.bound_merge_checks(10)
    assert merging.MAX_COMPLEXITY_BUDGET == 10
    assert any("aborted" in e.message for e in validate(SCHEMA, document))
