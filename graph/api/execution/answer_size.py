"""A bound on the field values one execution completes: the answer's size, as it is built.

The other limits (limits.py) bound the document; this bounds its answer. A list multiplies
what is selected inside it, and a walk down a tree and back up (`delegations { nodes {
parentConversation { delegations { … } } } }`) multiplies the same stored rows again at
each turn: a document of 200 bytes over one conversation's hundred delegations completed a
million objects, hundreds of megabytes, holding the event loop for as long. Counting what
the answer holds, not what the document could ask for at the most, lets a real tree of any
depth be read in one query while such a walk stops at the bound.

Every object's fields are counted as graphql-core is about to complete them, and a stored
JSON value (a message, a transcript) one more per KiB it holds: a transcript is one field
however long, and the same one read again at each turn of a walk would go unseen. Past the bound
the objects left are not completed (each costs nothing more) and the whole answer is one
LIMIT_EXCEEDED error, no data: a partial answer would be wrong in places nobody is told of.
A subscription counts each event apart (graphql-core copies the executor per event).

graphql-core's executor is extended at three methods it documents as private
(`execute_fields`, `complete_leaf_value`, `build_response`): pyproject.toml bounds its
version, and
tests/test_answer_size.py fails if either changes.
"""

from __future__ import annotations

from typing import Any

from graphql import ExecutionResult, GraphQLError
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from graph.domain.errors import ErrorCode
from graph.domain.jsoncodec import RawJSON, RawJSONArray


def bounded(limit: int) -> type[StrawberryGraphQLCoreExecutionContext]:
    """Strawberry's executor class, refusing an answer of more than `limit` field values."""

    class Bounded(StrawberryGraphQLCoreExecutionContext):
        completed = 0
        exceeded = False

        def execute_fields(
            self, parent_type: Any, source_value: Any, path: Any, fields: Any, *rest: Any
        ) -> Any:
            self.completed += len(fields)
            if self.completed > limit:
                self.exceeded = True
                return {}
            return super().execute_fields(parent_type, source_value, path, fields, *rest)

        def complete_leaf_value(self, return_type: Any, result: Any) -> Any:  # type: ignore[override]
            if isinstance(result, RawJSONArray):
                self.completed += sum(map(len, result.texts)) >> 10
            elif isinstance(result, RawJSON):
                self.completed += len(result.text) >> 10
            if self.completed > limit:
                self.exceeded = True
            return super().complete_leaf_value(return_type, result)

        def build_response(self, data: Any, *rest: Any) -> Any:
            if self.exceeded:
                return ExecutionResult(None, [too_large(limit)])
            return super().build_response(data, *rest)

    return Bounded


def too_large(limit: int) -> GraphQLError:
    return GraphQLError(
        f"the answer holds more than {limit:,} field values: ask for smaller pages "
        "(`first`, `last`), fewer fields or fewer aliases; a query that walks a tree down and "
        "back up (`parentConversation`, `parent`) reads the same records again at each turn",
        extensions={"code": ErrorCode.LIMIT_EXCEEDED.value},
    )
