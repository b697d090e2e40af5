"""The steps around each operation: its document, fresh loaders, the search index brought
up to date, a query's snapshot, observation, masking.

They run as strawberry's extension runner (`Schema.create_extensions_runner`) instead of
as extensions: strawberry rebuilds every extension's hook wrappers at each of the four
stages of every operation, which cost a third of a trivial query (about 40 us). Each stage
here is one small object that supports `with` and `async with`, as strawberry uses both.
Their order matters: the observer must see errors before they are masked.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

from graphql import GraphQLError
from starlette.websockets import WebSocket
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext
from strawberry.types.graphql import OperationType

from .context import Context
from .limits import DocumentCache, DocumentEntry
from .masking import mask_result, masked
from .observability import OperationObserver
from .search_index import may_search

logger = logging.getLogger("convograph.errors")


class _Stage:
    """A stage with nothing to do on the way out; `async with` does what `with` does."""

    __slots__ = ("hooks",)

    def __init__(self, hooks: OperationHooks) -> None:
        self.hooks = hooks

    def __enter__(self) -> None:
        self.enter()

    def __exit__(self, *exc: Any) -> None:
        self.exit(exc[1])

    async def __aenter__(self) -> None:
        self.enter()

    async def __aexit__(self, *exc: Any) -> None:
        self.exit(exc[1])

    def enter(self) -> None:
        pass

    def exit(self, failure: BaseException | None) -> None:
        pass


class _Operation(_Stage):
    __slots__ = ()

    def enter(self) -> None:
        hooks = self.hooks
        context = hooks.execution_context.context
        if isinstance(context, Context):
            # DataLoaders cache per operation: a WebSocket's context outlives its operations.
            context.reset_loaders()
        hooks.observer = OperationObserver(hooks.execution_context)

    def exit(self, failure: BaseException | None) -> None:
        hooks = self.hooks
        assert hooks.observer is not None
        hooks.observer.end(failure if isinstance(failure, Exception) else None)
        if failure is None and not hooks.observer.streamed:
            # Streamed results were masked one by one.
            mask_result(hooks.execution_context.result, hooks.request_id)


class _Parsing(_Stage):
    __slots__ = ()

    def enter(self) -> None:
        hooks = self.hooks
        execution = hooks.execution_context
        if execution.query is not None and execution.graphql_document is None:
            # A syntax error raises out of the operation, which strawberry turns into a result.
            hooks.entry = hooks.documents.parse(execution.query)
            execution.graphql_document = hooks.entry.document


class _Validation(_Stage):
    __slots__ = ()

    def enter(self) -> None:
        hooks = self.hooks
        if hooks.entry is not None:
            execution = hooks.execution_context
            execution.pre_execution_errors = hooks.documents.validate(
                hooks.entry, execution.schema._schema, tuple(execution.validation_rules)
            )


class _Executing(_Stage):
    __slots__ = ("_snapshot",)

    def __init__(self, hooks: OperationHooks) -> None:
        super().__init__(hooks)
        self._snapshot: AbstractAsyncContextManager[None] | None = None

    def enter(self) -> None:
        if self.hooks.observer is not None:
            self.hooks.observer.executing()

    async def __aenter__(self) -> None:
        self.enter()
        execution = self.hooks.execution_context
        context = execution.context
        entry = self.hooks.entry
        if entry is not None and isinstance(context, Context):
            if entry.may_search is None:
                entry.may_search = may_search(entry.document)
            if entry.may_search:
                # Before anything is read: the search then covers every message it can see.
                try:
                    await context.services.search_index.ready()
                except Exception as exc:
                    # Raised here, it would leave the operation unmasked: answer as a failed
                    # read does, and keep the details for the log.
                    logger.error("updating the search index failed", exc_info=exc)
                    error = GraphQLError(str(exc), original_error=exc)
                    raise masked(error, self.hooks.request_id) from None
        # A query over HTTP reads one snapshot (see Context.one_snapshot).
        if (
            execution.operation_type is OperationType.QUERY
            and isinstance(context, Context)
            and not isinstance(context.request, WebSocket)
        ):
            self._snapshot = context.one_snapshot()
            await self._snapshot.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        if self._snapshot is not None:
            await self._snapshot.__aexit__(*exc)


class _StreamResult(_Stage):
    __slots__ = ("result",)

    def __init__(self, hooks: OperationHooks, result: Any) -> None:
        super().__init__(hooks)
        self.result = result

    def enter(self) -> None:
        hooks = self.hooks
        if hooks.observer is not None:
            hooks.observer.stream_result(self.result)
        mask_result(self.result, hooks.request_id)


class OperationHooks(SchemaExtensionsRunner):
    """One operation's steps, as strawberry's extension runner; built per operation."""

    def __init__(self, execution_context: ExecutionContext, documents: DocumentCache) -> None:
        super().__init__(execution_context, [])
        self.documents = documents
        self.entry: DocumentEntry | None = None
        self.observer: OperationObserver | None = None

    @property
    def request_id(self) -> str | None:
        return getattr(self.execution_context.context, "request_id", None)

    def operation(self) -> Any:
        return _Operation(self)

    def parsing(self) -> Any:
        return _Parsing(self)

    def validation(self) -> Any:
        return _Validation(self)

    def executing(self) -> Any:
        return _Executing(self)

    def on_stream_result(self, result: Any) -> Any:
        return _StreamResult(self, result)
