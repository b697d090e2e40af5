"""Parse and validate each query text once: documents cached by their text.

graphql-core hashes a parsed document by walking all of it, which cost more than anything
else in a cached request, so the cache is keyed by the query text. A document is parsed
with a token cap and measured against the limits (limits.py) before graphql-core's own
rules validate it; both results are kept.

A document of several operations runs only the one the request names: without
`operationName` it is a request error (GraphQL's GetOperation), where strawberry would run
the first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import graphql.validation.rules.overlapping_fields_can_be_merged as merging
from graphql import (
    ASTValidationRule,
    DocumentNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    parse,
)
from graphql.validation.validate import ValidationAbortedError
from strawberry.extensions import SchemaExtension
from strawberry.schema.schema import validate_document
from strawberry.types import ExecutionContext

from graph.api.execution.limits import Limits, over_limits

Rules = tuple[type[ASTValidationRule], ...]

# Longer query texts are parsed for their request and not kept: a document holds its text
# (twice, with a long comment's token), and 512 texts of 256 KiB, distinct from one client,
# kept half a gigabyte. Clients' own queries are a few kilobytes; generated ones repeat.
MAX_KEPT_CHARS = 16 * 1024


def kept(query: str) -> bool:
    """Whether a document parsed from `query` is kept beyond its request."""
    return len(query) <= MAX_KEPT_CHARS


# graphql-core's words (and graphql-js's), which clients may know.
NAME_THE_OPERATION = "Must provide operation name if query contains multiple operations."


@dataclass(slots=True)
class DocumentEntry:
    document: DocumentNode
    operations: int  # how many operations it defines
    # The rules it was validated with, and what they found (until first validated).
    validated: tuple[Rules, list[GraphQLError]] | None = None
    may_search: bool | None = None  # until first executed (see search_gate.py)


class DocumentCache:
    """Documents parsed (token-capped) and validated (limits first), by query text."""

    def __init__(self, limits: Limits, *, max_tokens: int, maxsize: int) -> None:
        self.limits = limits
        self.max_tokens = max_tokens
        self.maxsize = maxsize
        self._entries: OrderedDict[str, DocumentEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def parse(self, query: str) -> DocumentEntry:
        entry = self._entries.get(query)
        if entry is not None:
            self._entries.move_to_end(query)
            return entry
        document = parse(query, max_tokens=self.max_tokens)  # raises GraphQLSyntaxError
        operations = sum(isinstance(d, OperationDefinitionNode) for d in document.definitions)
        entry = DocumentEntry(document, operations)
        if not kept(query):
            return entry
        self._entries[query] = entry
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return entry

    def validate(
        self, entry: DocumentEntry, schema: GraphQLSchema, rules: Rules
    ) -> list[GraphQLError]:
        if entry.validated is None or entry.validated[0] != rules:
            refused = over_limits(entry.document, self.limits)
            errors = refused or [
                _explained(e) for e in validate_document(schema, entry.document, rules)
            ]
            entry.validated = (rules, errors)
        return entry.validated[1]

    def entry(self, query: str | None) -> DocumentEntry | None:
        """The entry of a query text already parsed, if it is cached."""
        return None if query is None else self._entries.get(query)


def provided_operation_name(execution: ExecutionContext) -> str | None:
    """The operation name the request gave: strawberry's `operation_name` falls back to the
    first operation's (tests/test_graphql_over_http.py fails if this attribute goes)."""
    name: str | None = execution._provided_operation_name
    return name


def _explained(error: GraphQLError) -> GraphQLError:
    # The same error class also reports "too many validation errors", which reads well as is.
    if not (isinstance(error, ValidationAbortedError) and error.message == "Validation aborted."):
        return error
    return GraphQLError(
        "the operation has too many fields of one response name to check that they merge "
        f"(budget {merging.MAX_COMPLEXITY_BUDGET}); give them distinct aliases or select "
        "each once"
    )


class CachedDocuments(SchemaExtension):
    """Parsing and validation through a DocumentCache (in place of strawberry's own)."""

    def __init__(self, *, cache: DocumentCache) -> None:
        self.cache = cache
        self.entry: DocumentEntry | None = None

    def on_parse(self) -> Iterator[None]:
        execution = self.execution_context
        if execution.query is not None and execution.graphql_document is None:
            try:
                self.entry = self.cache.parse(execution.query)
            except GraphQLError:
                # Left to strawberry's own parse, with the same token limit, which fails
                # the same way inside the stage and makes the error the operation's result
                # (raised from here it escaped a WebSocket's operation: `complete`, no error).
                execution.parse_options = {
                    **execution.parse_options,
                    "max_tokens": self.cache.max_tokens,
                }
            else:
                execution.graphql_document = self.entry.document
        yield

    def on_validate(self) -> Iterator[None]:
        if self.entry is not None:
            execution = self.execution_context
            # strawberry's own validation reads the GraphQLSchema the same way.
            errors = self.cache.validate(
                self.entry, execution.schema._schema, tuple(execution.validation_rules)
            )
            # After validation, as GraphQL's ExecuteRequest chooses the operation after it.
            if not errors and self.entry.operations > 1 and not provided_operation_name(execution):
                errors = [GraphQLError(NAME_THE_OPERATION)]
            execution.pre_execution_errors = errors
        yield
