"""Each operation's reads: loaders of its own, and one read transaction for a query over HTTP.

A WebSocket's context is shared by the connection's operations, so every operation starts
with fresh loaders. A query over HTTP reads one committed state (see Context.reading); a
mutation's payload must read what it wrote, and a subscription reads afresh per event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from graph.api.context import Context


class OperationReads(SchemaExtension):
    async def on_execute(self) -> AsyncIterator[None]:
        execution = self.execution_context
        context = execution.context
        if not isinstance(context, Context):
            yield
            return
        context.reset_loaders()
        if context.websocket or execution.operation_type is not OperationType.QUERY:
            yield
            return
        async with context.reading():
            yield
