"""Assembles the schema: its root types, scalars, limits and per-operation extensions.

The source of schema.graphql (`convograph export-schema`).
"""

from __future__ import annotations

from functools import lru_cache, partial

from strawberry.schema.config import StrawberryConfig

from graph.api.execution.answer_size import bounded
from graph.api.execution.documents import CachedDocuments, DocumentCache
from graph.api.execution.error_log import Schema
from graph.api.execution.limits import Limits, bound_merge_checks
from graph.api.execution.masking import Masking
from graph.api.execution.observer import Observer
from graph.api.execution.reads import OperationReads
from graph.api.execution.search_gate import SearchGate
from graph.api.mutations import Mutation
from graph.api.names import CachedNames
from graph.api.queries import Query
from graph.api.scalars import SCALAR_MAP
from graph.api.subscriptions import Subscription
from graph.api.types import Conversation, Delegation, Snapshot
from graph.api.types.base import field_value
from graph.settings import Settings


def build_schema(settings: Settings | None = None) -> Schema:
    """The schema with the limits of `settings`; one document cache per schema."""
    settings = settings or Settings()
    bound_merge_checks(settings.max_merge_checks)
    limits = Limits(
        max_depth=settings.max_query_depth,
        max_aliases=settings.max_aliases,
        max_fields=settings.max_selected_fields,
        max_directives=settings.max_directives,
        max_values=settings.max_result_values,
        # An event carries at most a replaced transcript's messages: a hundred calls' worth,
        # each with its fields.
        max_event_values=max(settings.max_result_values, 1000 * settings.max_messages_per_call),
    )
    return _schema(limits, max_tokens=settings.max_query_tokens)


# Built once per set of limits in a process: Strawberry's conversion of the types takes tens
# of milliseconds, which every app made in one process (the tests make one per test, the
# bench several) would pay again for the same schema. The schema holds no service or
# connection, and its document cache only what a query text parses and validates to.
@lru_cache(maxsize=8)
def _schema(limits: Limits, *, max_tokens: int) -> Schema:
    documents = DocumentCache(limits, max_tokens=max_tokens, maxsize=512)
    return Schema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        types=[Conversation, Delegation, Snapshot],
        # Strawberry enters these in order and leaves them in reverse: errors are masked
        # after the observer has seen them.
        extensions=[
            Masking,
            Observer,
            partial(CachedDocuments, cache=documents),
            partial(SearchGate, cache=documents),
            OperationReads,
        ],
        execution_context_class=bounded(limits.max_values, event_limit=limits.max_event_values),
        config=StrawberryConfig(
            scalar_map=dict(SCALAR_MAP),
            default_resolver=field_value,
            name_converter=CachedNames(),
        ),
    )


def export_sdl() -> str:
    return build_schema().as_str() + "\n"
