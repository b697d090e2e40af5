"""Each operation's reads: loaders of its own, and one read transaction for a query.

A WebSocket's context is shared by the connection's operations, which run side by side: each
operation runs on a copy of its own (Context.for_operation). A query, over HTTP or a
WebSocket, reads one committed state (see Context.reading), opened at its first read and
ended with its execution; a mutation's payload must read what it wrote, and a subscription
reads afresh per event (no transaction held for its lifetime).
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
        if context.websocket:
            # Read by strawberry once this hook has run: the operation executes on the copy.
            context = execution.context = context.for_operation()
        else:
            context.reset_loaders()
        if execution.operation_type is not OperationType.QUERY:
            yield
            return
        async with context.reading():
            yield
