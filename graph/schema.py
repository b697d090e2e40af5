"""Assembles the schema and its extensions; the source of schema.graphql."""

from __future__ import annotations

import logging
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import (
    AddValidationRules,
    MaskErrors,
    MaxAliasesLimiter,
    ParserCache,
    QueryDepthLimiter,
    ValidationCache,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from .errors import DomainError
from .mutations import Mutation
from .queries import Query
from .scalars import SCALAR_MAP
from .settings import Settings
from .subscriptions import Subscription
from .types import Conversation, Delegation, Snapshot

logger = logging.getLogger("convograph.errors")


def _expected(error: GraphQLError) -> bool:
    original = error.original_error
    return original is None or isinstance(original, (DomainError, GraphQLError))


class Schema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        context: Any = execution_context.context if execution_context else None
        request_id = getattr(context, "request_id", "-")
        for error in errors:
            if not _expected(error):
                logger.error(
                    "unexpected error (request %s) at %s", request_id, error.path,
                    exc_info=error.original_error,
                )


def build_schema(settings: Settings | None = None) -> Schema:
    """The schema with its limits. Rules are built once so the validation cache stays valid."""
    settings = settings or Settings()
    rules = [
        *QueryDepthLimiter(max_depth=settings.max_query_depth).validation_rules,
        *MaxAliasesLimiter(max_alias_count=settings.max_aliases).validation_rules,
    ]
    return Schema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        types=[Conversation, Delegation, Snapshot],
        config=StrawberryConfig(scalar_map=SCALAR_MAP),
        extensions=[
            AddValidationRules(rules),
            ParserCache(maxsize=512),
            ValidationCache(maxsize=512),
            MaskErrors(should_mask_error=lambda e: not _expected(e)),
        ],
    )


def export_sdl() -> str:
    return build_schema().as_str() + "\n"
