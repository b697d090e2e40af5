"""Assembles the schema and its extensions; the source of schema.graphql."""

from __future__ import annotations

import logging
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from .limits import DocumentCache, Limits, bound_merge_checks
from .masking import is_expected
from .mutations import Mutation
from .operation_hooks import OperationHooks
from .queries import Query
from .scalars import SCALAR_MAP
from .settings import Settings
from .subscriptions import Subscription
from .types import Conversation, Delegation, Snapshot

logger = logging.getLogger("convograph.errors")


class Schema(strawberry.Schema):
    documents: DocumentCache

    def create_extensions_runner(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension]
    ) -> SchemaExtensionsRunner:
        return OperationHooks(execution_context, self.documents)

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        context: Any = execution_context.context if execution_context else None
        request_id = getattr(context, "request_id", "-")
        for error in errors:
            if not is_expected(error):
                logger.error(
                    "unexpected error (request %s) at %s",
                    request_id,
                    error.path,
                    exc_info=error.original_error,
                )


def build_schema(settings: Settings | None = None) -> Schema:
    """The schema with its limits; one validator (and its cache) per schema."""
    settings = settings or Settings()
    bound_merge_checks(settings.max_merge_checks)
    limits = Limits(
        max_depth=settings.max_query_depth,
        max_aliases=settings.max_aliases,
        max_fields=settings.max_selected_fields,
        max_directives=settings.max_directives,
    )
    documents = DocumentCache(limits, max_tokens=settings.max_query_tokens, maxsize=512)
    schema = Schema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        types=[Conversation, Delegation, Snapshot],
        config=StrawberryConfig(scalar_map=dict(SCALAR_MAP)),
    )
    # Parsing, validation and the per-operation steps run in OperationHooks, not as
    # strawberry extensions (see operation_hooks.py).
    schema.documents = documents
    return schema


def export_sdl() -> str:
    return build_schema().as_str() + "\n"
