"""Bounds on what one document may cost, checked before graphql-core's own validation.

graphql-core's validation is ~30 rules over every node: a 20,000-field document costs a
second of CPU, during which the process answers nobody. So a linear walk of the document
measures it first (depth, aliases, directives, fields after fragment expansion, across all
its operations and fragments) and a document over a limit is refused without the rest.

Strawberry's QueryDepthLimiter and MaxAliasesLimiter walk every fragment spread afresh, so
n fragments that each spread the previous one twice cost 2**n steps; the walk here measures
each fragment once (memoised by name).

graphql-core's check that same-named fields can merge is pairwise; it stops at a budget that
costs about a second by default. `bound_merge_checks` lowers that budget, and a document
that runs out of it is told what to change instead of graphql-core's "Validation aborted.".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import graphql.validation.rules.overlapping_fields_can_be_merged as merging
from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)


@dataclass(frozen=True, slots=True)
class Limits:
    max_depth: int
    max_aliases: int
    max_fields: int
    max_directives: int
    # The field values one execution may complete (answer_size.py), and one event's.
    max_values: int = 200_000
    max_event_values: int = 1_000_000


@dataclass(frozen=True, slots=True)
class Measure:
    depth: int = 0  # levels of nested selections, introspection excluded
    aliases: int = 0
    fields: int = 0  # selections after expanding every fragment spread
    directives: int = 0


def _combine(parts: list[Measure]) -> Measure:
    return Measure(
        depth=max((p.depth for p in parts), default=0),
        aliases=sum(p.aliases for p in parts),
        fields=sum(p.fields for p in parts),
        directives=sum(p.directives for p in parts),
    )


class _Measurer:
    def __init__(self, fragments: dict[str, FragmentDefinitionNode]) -> None:
        self.fragments = fragments
        self.memo: dict[str, Measure] = {}
        self.visiting: set[str] = set()

    def selection_set(self, node: SelectionSetNode | None) -> Measure:
        if node is None:
            return Measure()
        return _combine([self.selection(s) for s in node.selections])

    def selection(self, node: Any) -> Measure:
        directives = len(node.directives or ())
        if isinstance(node, FieldNode):
            below = self.selection_set(node.selection_set)
            # As graphql-depth-limit counts: a leaf field adds no depth, `{ a { b } }` is 1.
            nested = node.selection_set is not None and not node.name.value.startswith("__")
            return Measure(
                depth=below.depth + 1 if nested else 0,
                aliases=below.aliases + (1 if node.alias is not None else 0),
                fields=below.fields + 1,
                directives=below.directives + directives,
            )
        if isinstance(node, InlineFragmentNode):
            inner = self.selection_set(node.selection_set)
        elif isinstance(node, FragmentSpreadNode):
            inner = self.fragment(node.name.value)
        else:
            return Measure()
        return _combine([inner, Measure(directives=directives)])

    def fragment(self, name: str) -> Measure:
        if name in self.memo:
            return self.memo[name]
        definition = self.fragments.get(name)
        if definition is None or name in self.visiting:
            return Measure()  # unknown fragments and cycles are reported by the standard rules
        self.visiting.add(name)
        # The definition's own directives (`fragment F on T @a @b`) count as a field's do.
        measure = _combine(
            [
                self.selection_set(definition.selection_set),
                Measure(directives=len(definition.directives or ())),
            ]
        )
        self.visiting.discard(name)
        self.memo[name] = measure
        return measure


def measure(document: DocumentNode) -> Measure:
    """What the whole document asks for: its operations with fragments expanded, plus any
    fragment no operation spreads (graphql-core validates those too)."""
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    measurer = _Measurer(fragments)
    parts = [
        _combine(
            [measurer.selection_set(d.selection_set), Measure(directives=len(d.directives or ()))]
        )
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    ]
    parts += [measurer.fragment(name) for name in fragments if name not in measurer.memo]
    return _combine(parts)


def over_limits(document: DocumentNode, limits: Limits) -> list[GraphQLError]:
    found = measure(document)
    return [
        GraphQLError(f"the document exceeds the maximum {what}: {value} > {limit}")
        for value, limit, what in (
            (found.depth, limits.max_depth, "depth"),
            (found.aliases, limits.max_aliases, "aliases"),
            (found.fields, limits.max_fields, "fields (fragments expanded)"),
            (found.directives, limits.max_directives, "directives"),
        )
        if value > limit
    ]


def bound_merge_checks(budget: int) -> None:
    """Set graphql-core's field-merging budget (process-wide: it is a module setting)."""
    merging.MAX_COMPLEXITY_BUDGET = budget
