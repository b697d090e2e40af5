"""A bound on the field values one execution completes: the answer's size, as it is built.

The other limits (limits.py) bound the document; this bounds its answer. A list multiplies
what is selected inside it, and a walk down a tree and back up (`delegations { nodes {
parentConversation { delegations { … } } } }`) multiplies the same stored rows again at
each turn: a document of 200 bytes over one conversation's hundred delegations completed a
million objects, hundreds of megabytes, holding the event loop for as long. Counting what
the answer holds, not what the document could ask for at the most, lets a real tree of any
depth be read in one query while such a walk stops at the bound.

Every object's fields are counted as graphql-core is about to complete them, and a long text
(a task, a summary, a stored message or transcript) one more per KiB it holds: a transcript
is one field however long, and the same one read again at each turn would go unseen. Past
the bound no object is completed further (each costs nothing more), and the answer carries
one LIMIT_EXCEEDED error placed where it was cut. A query's or an event's answer is then no
data at all (a partial answer would be wrong in places nobody is told of); a mutation's
writes were made, so its answer is kept as far as it was built and the error says so. An
event of a subscription is counted apart (graphql-core copies the executor per event), under
a bound that holds the largest event the server sends itself (a transcript replaced whole).

graphql-core's executor is extended at three methods it documents as private
(`execute_fields`, `complete_leaf_value`, `build_response`): pyproject.toml bounds its
version, and tests/test_answer_size.py fails if any changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphql import ExecutionResult, GraphQLError, OperationType
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from graph.domain.errors import ErrorCode
from graph.domain.jsoncodec import RawJSON, RawJSONArray

# What a leaf value counts beyond itself: one per KiB of text (kept to a shift: every leaf
# of every answer is looked up here).
_SIZES: dict[type, Callable[[Any], int]] = {
    str: lambda text: len(text) >> 10,
    RawJSON: lambda raw: len(raw.text) >> 10,
    RawJSONArray: lambda raw: sum(map(len, raw.texts)) >> 10,
}


def bounded(limit: int, *, event_limit: int) -> type[StrawberryGraphQLCoreExecutionContext]:
    """Strawberry's executor class, cutting an answer of more than `limit` field values (an
    event's: `event_limit`)."""

    # Called as functions, not through super(): these run for every object and every leaf.
    execute_fields = StrawberryGraphQLCoreExecutionContext.execute_fields
    complete_leaf_value = StrawberryGraphQLCoreExecutionContext.complete_leaf_value

    class Bounded(StrawberryGraphQLCoreExecutionContext):
        completed = 0
        over = False
        cut: Any = None  # the path of the first object left out

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            subscription = self.operation.operation is OperationType.SUBSCRIPTION
            self.limit = event_limit if subscription else limit

        def execute_fields(
            self, parent_type: Any, source_value: Any, path: Any, fields: Any, *rest: Any
        ) -> Any:
            self.completed += len(fields)
            if self.completed > self.limit:
                if not self.over:
                    self.over, self.cut = True, path
                return {}
            return execute_fields(self, parent_type, source_value, path, fields, *rest)

        def complete_leaf_value(self, return_type: Any, result: Any) -> Any:  # type: ignore[override]
            size = _SIZES.get(result.__class__)
            if size is not None:
                self.completed += size(result)
            return complete_leaf_value(return_type, result)

        def build_response(self, data: Any, *rest: Any) -> Any:
            response = super().build_response(data, *rest)
            if not self.over and self.completed <= self.limit:
                return response
            cut = self.cut.as_list() if self.cut is not None else list(data or ())[:1]
            kind = self.operation.operation
            error = too_large(self.limit, kind, path=cut or None)
            if kind is OperationType.MUTATION:  # its writes were made: say what they answered
                return ExecutionResult(data, [*(getattr(response, "errors", None) or ()), error])
            return ExecutionResult(None, [error])

    return Bounded


def too_large(limit: int, kind: OperationType, *, path: list[Any] | None) -> GraphQLError:
    what = {
        OperationType.MUTATION: "the operation's writes were made; its answer is cut here, past",
        OperationType.SUBSCRIPTION: "this event's answer holds more than",
    }.get(kind, "the answer holds more than")
    return GraphQLError(
        f"{what} {limit:,} field values: ask for smaller pages (`first`, `last`), fewer "
        "fields or fewer aliases; a query that walks a tree down and back up "
        "(`parentConversation`, `parent`) reads the same records again at each turn",
        path=path,
        extensions={"code": ErrorCode.LIMIT_EXCEEDED.value},
    )
