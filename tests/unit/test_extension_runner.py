"""The schema's extension runner behaves as strawberry's own runner does.

graph/api/execution/runner.py replaces strawberry's SchemaExtensionsRunner (a class
strawberry does not document as public). Each test runs one operation through a plain
`strawberry.Schema` and through convograph's `Schema`, with the same recording extensions,
and compares what the extensions saw: a strawberry release that changes the runner's
contract fails here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import strawberry
from strawberry.extensions import SchemaExtension

from graph.api.execution.error_log import Schema
from graph.api.execution.runner import Runner


def _extensions(log: list[str], *, fail_in: str | None = None) -> list[type[SchemaExtension]]:
    class SyncGenerator(SchemaExtension):
        def on_operation(self) -> Iterator[None]:
            log.append("gen:operation:enter")
            try:
                yield
            except Exception as exc:
                log.append(f"gen:operation:saw {type(exc).__name__}")
                raise
            log.append("gen:operation:leave")

        def on_parse(self) -> Iterator[None]:
            log.append("gen:parse:enter")
            yield
            log.append("gen:parse:leave")

    class AsyncGenerator(SchemaExtension):
        async def on_execute(self) -> AsyncIterator[None]:
            log.append("agen:execute:enter")
            if fail_in == "execute":
                raise RuntimeError("boom")
            yield
            log.append("agen:execute:leave")

        def get_results(self) -> dict[str, Any]:
            return {"recorded": len(log)}

    class PlainCall(SchemaExtension):
        def on_validate(self) -> None:  # type: ignore[override]
            log.append("call:validate")

        async def on_operation(self) -> AsyncIterator[None]:
            log.append("agen:operation:enter")
            yield
            log.append("agen:operation:leave")

        def on_execute(self) -> Iterator[None]:
            log.append("gen:execute:enter")
            yield
            log.append("gen:execute:leave")

    class AsyncCall(SchemaExtension):
        async def on_execute(self) -> None:  # type: ignore[override]
            log.append("acall:execute")

    class SecondOnParse(SchemaExtension):
        def on_parse(self) -> Iterator[None]:
            log.append("second:parse:enter")
            yield
            log.append("second:parse:leave")

    return [SyncGenerator, AsyncGenerator, PlainCall, AsyncCall, SecondOnParse]


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        return "world"


async def _run(
    schema_class: type[strawberry.Schema], query: str, **kw: Any
) -> tuple[Any, list[str]]:
    log: list[str] = []
    schema = schema_class(query=Query, extensions=_extensions(log, **kw))
    result = await schema.execute(query)
    return result, log


def test_the_schema_installs_convograph_s_runner() -> None:
    schema = Schema(query=Query, extensions=[])
    assert Schema.create_extensions_runner is not strawberry.Schema.create_extensions_runner
    runner = schema.create_extensions_runner(None, [])  # type: ignore[arg-type]
    assert isinstance(runner, Runner)


@pytest.mark.parametrize(
    "query", ["{ hello }", "{ nope }", "{ hello", "query A { hello } query B { hello }"]
)
async def test_hooks_run_in_the_same_order_as_strawberry_s(query: str) -> None:
    theirs, their_log = await _run(strawberry.Schema, query)
    ours, our_log = await _run(Schema, query)
    assert our_log == their_log
    assert ours.data == theirs.data
    assert [e.message for e in ours.errors or []] == [e.message for e in theirs.errors or []]
    assert ours.extensions == theirs.extensions


async def test_an_exception_in_a_hook_reaches_the_hooks_around_it_as_in_strawberry() -> None:
    _, their_log = await _run(strawberry.Schema, "{ hello }", fail_in="execute")
    _, our_log = await _run(Schema, "{ hello }", fail_in="execute")
    assert our_log == their_log
    assert "gen:operation:saw RuntimeError" in our_log


async def test_an_extension_that_wraps_resolvers_still_wraps_them() -> None:
    # Schema._get_middleware_manager (a private strawberry method) skips the middleware
    # only when no extension implements `resolve`.
    assert hasattr(strawberry.Schema, "_get_middleware_manager")
    seen: list[str] = []

    class Wrapping(SchemaExtension):
        def resolve(self, _next: Any, root: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(info.field_name)
            return _next(root, info, *args, **kwargs)

    wrapped = await Schema(query=Query, extensions=[Wrapping]).execute("{ hello }")
    plain = await Schema(query=Query, extensions=[]).execute("{ hello }")
    assert wrapped.data == plain.data == {"hello": "world"}
    assert seen == ["hello"]
