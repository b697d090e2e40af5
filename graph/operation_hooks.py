"""The one schema extension around each operation: fresh loaders, observation, masking.

Strawberry's extension machinery costs about 2% of an append per extension, whatever the
extension does, so the per-operation steps share one. Their order matters: the observer
must see errors before they are masked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from strawberry.extensions import SchemaExtension

from .context import Context
from .masking import mask_result
from .observability import OperationObserver


class OperationHooks(SchemaExtension):
    def __init__(self, *, execution_context: Any = None) -> None:
        super().__init__(execution_context=execution_context)
        self.observer: OperationObserver | None = None

    def on_operation(self) -> Iterator[None]:
        execution = self.execution_context
        context = execution.context
        if isinstance(context, Context):
            # DataLoaders cache per operation: a WebSocket's context outlives its operations.
            context.reset_loaders()
        observer = self.observer = OperationObserver(execution)
        failure: Exception | None = None
        try:
            yield
        except Exception as exc:
            failure = exc
            raise
        finally:
            observer.end(failure)
        if not observer.streamed:  # streamed results were masked one by one
            mask_result(execution.result, _request_id(context))

    def on_execute(self) -> Iterator[None]:
        if self.observer is not None:
            self.observer.executing()
        yield

    def on_stream_result(self, result: Any) -> Iterator[None]:
        if self.observer is not None:
            self.observer.stream_result(result)
        mask_result(result, _request_id(self.execution_context.context))
        yield


def _request_id(context: Any) -> str | None:
    return getattr(context, "request_id", None)
