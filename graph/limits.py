"""Validation rules that bound an operation's depth, aliases and size after fragment expansion.

Strawberry's QueryDepthLimiter and MaxAliasesLimiter walk every fragment spread afresh, so
n fragments that each spread the previous one twice cost 2**n steps: a 2 KB document held
a worker for minutes. These rules measure each fragment once (memoised by name), so their
cost is linear in the document, and the expanded size itself is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
)


@dataclass(frozen=True, slots=True)
class Measure:
    depth: int = 0  # levels of nested selections, introspection excluded
    aliases: int = 0
    fields: int = 0  # selections after expanding every fragment spread


def _combine(parts: list[Measure]) -> Measure:
    return Measure(
        depth=max((p.depth for p in parts), default=0),
        aliases=sum(p.aliases for p in parts),
        fields=sum(p.fields for p in parts),
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
        if isinstance(node, FieldNode):
            below = self.selection_set(node.selection_set)
            # As graphql-depth-limit counts: a leaf field adds no depth, `{ a { b } }` is 1.
            nested = node.selection_set is not None and not node.name.value.startswith("__")
            return Measure(
                depth=below.depth + 1 if nested else 0,
                aliases=below.aliases + (1 if node.alias is not None else 0),
                fields=below.fields + 1,
            )
        if isinstance(node, InlineFragmentNode):
            return self.selection_set(node.selection_set)
        if isinstance(node, FragmentSpreadNode):
            return self.fragment(node.name.value)
        return Measure()

    def fragment(self, name: str) -> Measure:
        if name in self.memo:
            return self.memo[name]
        definition = self.fragments.get(name)
        if definition is None or name in self.visiting:
            return Measure()  # unknown fragments and cycles are reported by the standard rules
        self.visiting.add(name)
        measure = self.selection_set(definition.selection_set)
        self.visiting.discard(name)
        self.memo[name] = measure
        return measure


def operation_limits(*, max_depth: int, max_aliases: int, max_fields: int) -> type[ValidationRule]:
    """A validation rule class refusing operations past the limits (build it once)."""

    class OperationLimits(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            fragments = {
                d.name.value: d
                for d in context.document.definitions
                if isinstance(d, FragmentDefinitionNode)
            }
            self.measurer = _Measurer(fragments)

        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            measure = self.measurer.selection_set(node.selection_set)
            name = node.name.value if node.name else "anonymous"
            for value, limit, what in (
                (measure.depth, max_depth, "depth"),
                (measure.aliases, max_aliases, "aliases"),
                (measure.fields, max_fields, "fields (fragments expanded)"),
            ):
                if value > limit:
                    self.report_error(
                        GraphQLError(
                            f"'{name}' exceeds the maximum operation {what}: {value} > {limit}",
                            node,
                        )
                    )

    return OperationLimits
