"""Assembles the schema and its extensions; the source of schema.graphql."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import (
    MaxTokensLimiter,
    ParserCache,
    SchemaExtension,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from .context import Context
from .limits import BoundedValidation, Limits, bound_merge_checks, bounded_validator
from .masking import ErrorMasking, is_expected
from .mutations import Mutation
from .observability import Observability
from .queries import Query
from .scalars import SCALAR_MAP
from .settings import Settings
from .subscriptions import Subscription
from .types import Conversation, Delegation, Snapshot

logger = logging.getLogger("convograph.errors")


class Schema(strawberry.Schema):
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


class FreshLoaders(SchemaExtension):
    """DataLoaders cache per operation: a WebSocket's context outlives its operations."""

    def on_operation(self) -> Iterator[None]:
        context = self.execution_context.context
        if isinstance(context, Context):
            context.reset_loaders()
        yield


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
    validator = bounded_validator(limits, maxsize=512)
    return Schema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        types=[Conversation, Delegation, Snapshot],
        config=StrawberryConfig(scalar_map=dict(SCALAR_MAP)),
        # Factories get a fresh extension per operation; the parse cache lives at module
        # level (keyed by maxsize), the validator's cache with the validator.
        extensions=[
            # Parsing costs ~5 µs a token: the token cap bounds it before anything else runs.
            lambda: MaxTokensLimiter(settings.max_query_tokens),
            lambda: ParserCache(maxsize=512),
            lambda: BoundedValidation(validator),
            ErrorMasking,
            FreshLoaders,
            # Last, so that it sees errors before ErrorMasking replaces them on the way out.
            Observability,
        ],
    )


def export_sdl() -> str:
    return build_schema().as_str() + "\n"
