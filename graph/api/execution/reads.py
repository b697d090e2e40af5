"""Each operation's reads: fresh loaders, and one read transaction for a query over HTTP.

A WebSocket's context is shared by the connection's operations, so every operation starts
with loaders of its own. A query over HTTP reads one committed state (see
Context.reading); a mutation's payload must read what it wrote, and a subscription reads
afresh per event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from graph.api.context import Context


class FreshLoaders(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        context = self.execution_context.context
        if isinstance(context, Context):
            context.reset_loaders()
        yield


class OneReadTransaction(SchemaExtension):
    async def on_execute(self) -> AsyncIterator[None]:
        execution = self.execution_context
        context = execution.context
        if (
            isinstance(context, Context)
            and not context.websocket
            and execution.operation_type is OperationType.QUERY
        ):
            async with context.reading():
                yield
            return
        yield
