"""Before an operation that may search reads anything, the search index is brought up to date.

On SQLite, appended messages wait to be indexed in batches (store/search_index.py); an
operation that may search must first index what waits, so that its search finds every
message its answer can show.
"""

from __future__ import annotations

import logging

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    OperationDefinitionNode,
    SelectionSetNode,
)
from strawberry.extensions import SchemaExtension

from graph.api.context import Context
from graph.api.execution.documents import DocumentCache
from graph.api.execution.masking import masked, request_id_of

logger = logging.getLogger("convograph.errors")


def may_search(document: DocumentNode) -> bool:
    """Whether the document asks for `conversations(filter: ...)`, the one field that
    searches (any filter counts: a search term may come in a variable)."""
    return any(
        _selects_filtered_conversations(d.selection_set)
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode | FragmentDefinitionNode)
    )


def _selects_filtered_conversations(selection_set: SelectionSetNode | None) -> bool:
    for selection in selection_set.selections if selection_set else ():
        if (
            isinstance(selection, FieldNode)
            and selection.name.value == "conversations"
            and any(argument.name.value == "filter" for argument in selection.arguments or ())
        ):
            return True
        if _selects_filtered_conversations(getattr(selection, "selection_set", None)):
            return True
    return False


class SearchGate(SchemaExtension):
    def __init__(self, *, cache: DocumentCache) -> None:
        self.cache = cache

    async def on_execute(self) -> None:  # type: ignore[override]
        execution = self.execution_context
        context = execution.context
        entry = self.cache.entry(execution.query)
        if entry is not None and isinstance(context, Context):
            if entry.may_search is None:
                entry.may_search = may_search(entry.document)
            if entry.may_search:
                try:
                    await context.services.search_index.ready()
                except Exception as exc:
                    # Raised here, it would leave the operation unmasked: answer as a failed
                    # read does, and keep the details for the log.
                    logger.error("updating the search index failed", exc_info=exc)
                    error = GraphQLError(str(exc), original_error=exc)
                    raise masked(error, request_id_of(execution)) from None
