"""Strawberry's extension runner, with each extension class's hooks looked up once.

Strawberry's own runner inspects every extension's hook methods at each of the four
stages of every operation (is it a generator? async?) and wraps each in a contextlib
context manager and an exit stack: for a handful of extensions that is most of what a
trivial query costs. This runner learns each class's hooks the first time it meets the
class and drives them itself, with the same semantics: hooks enter in the order the
extensions are given and leave in reverse, a hook sees the exception of what it wraps,
and may suppress it. Schema(extensions=...) works as strawberry documents it; the
schema class (error_log.py) installs this runner, and tests/unit/test_extension_runner.py checks it
against strawberry's own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext
from strawberry.utils.await_maybe import await_maybe

HOOKS = ("on_operation", "on_validate", "on_parse", "on_execute", "on_stream_result")

# How a hook is called: a generator (sync or async) wraps the stage around its `yield`; a
# plain function (sync or async) runs when the stage begins.
GEN, ASYNC_GEN, CALL, ASYNC_CALL = range(4)
Hook = tuple[int, Callable[..., Any]]

_CLASS_HOOKS: dict[tuple[type[SchemaExtension], str], Hook | None] = {}


def _hook(cls: type[SchemaExtension], name: str) -> Hook | None:
    key = (cls, name)
    if key not in _CLASS_HOOKS:
        fn = getattr(cls, name)
        if fn is getattr(SchemaExtension, name):
            found = None
        elif inspect.isasyncgenfunction(fn):
            found = (ASYNC_GEN, fn)
        elif inspect.isgeneratorfunction(fn):
            found = (GEN, fn)
        elif inspect.iscoroutinefunction(fn):
            found = (ASYNC_CALL, fn)
        else:
            found = (CALL, fn)
        _CLASS_HOOKS[key] = found
    return _CLASS_HOOKS[key]


class Stage:
    """One stage's hooks, as a context manager for `with` and `async with` alike."""

    __slots__ = ("_args", "_entered", "_extensions", "_hooks", "_name")

    def __init__(
        self,
        name: str,
        extensions: list[SchemaExtension],
        hooks: list[tuple[int, Hook]],
        args: tuple[Any, ...],
    ):
        self._name = name
        self._extensions = extensions
        self._hooks = hooks
        self._args = args
        self._entered: list[tuple[int, Any]] = []

    def __enter__(self) -> None:
        extensions = self._extensions
        for i, (kind, fn) in self._hooks:
            if kind in (ASYNC_GEN, ASYNC_CALL):
                raise RuntimeError(
                    f"SchemaExtension hook {extensions[i]}.{self._name} "
                    "failed to complete synchronously."
                )
            if kind == GEN:
                generator = fn(extensions[i], *self._args)
                next(generator)
                self._entered.append((GEN, generator))
            else:
                fn(extensions[i], *self._args)

    async def __aenter__(self) -> None:
        extensions = self._extensions
        for i, (kind, fn) in self._hooks:
            if kind == GEN:
                generator = fn(extensions[i], *self._args)
                next(generator)
                self._entered.append((GEN, generator))
            elif kind == ASYNC_GEN:
                generator = fn(extensions[i], *self._args)
                await generator.__anext__()
                self._entered.append((ASYNC_GEN, generator))
            elif kind == CALL:
                fn(extensions[i], *self._args)
            else:
                await fn(extensions[i], *self._args)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        pending = exc
        while self._entered:
            _, generator = self._entered.pop()
            pending = _leave_sync(generator, pending)
        return False if pending is None and exc is None else _outcome(exc, pending)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        pending = exc
        while self._entered:
            kind, generator = self._entered.pop()
            if kind == GEN:
                pending = _leave_sync(generator, pending)
            else:
                pending = await _leave_async(generator, pending)
        return False if pending is None and exc is None else _outcome(exc, pending)


def _leave_sync(generator: Any, pending: BaseException | None) -> BaseException | None:
    """Resume a generator hook after its stage; the exception still to raise, if any."""
    try:
        if pending is None:
            next(generator)
        else:
            generator.throw(pending)
    except StopIteration:
        return None  # it ended: after an exception, that means it suppressed it
    except BaseException as raised:
        return raised
    raise RuntimeError("a SchemaExtension hook yielded more than once")


async def _leave_async(generator: Any, pending: BaseException | None) -> BaseException | None:
    try:
        if pending is None:
            await generator.__anext__()
        else:
            await generator.athrow(pending)
    except StopAsyncIteration:
        return None
    except BaseException as raised:
        return raised
    raise RuntimeError("a SchemaExtension hook yielded more than once")


def _outcome(exc: BaseException | None, pending: BaseException | None) -> bool:
    """Suppress the stage's exception (True), let it go on (False), or raise a new one."""
    if pending is None:
        return exc is not None
    if pending is exc:
        return False
    raise pending


# For a list of extension classes: each stage's hooks, as (position in the list, hook).
Plan = dict[str, list[tuple[int, Hook]]]
_PLANS: dict[tuple[type[SchemaExtension], ...], tuple[Plan, list[int]]] = {}


def _plan(classes: tuple[type[SchemaExtension], ...]) -> tuple[Plan, list[int]]:
    """The stages' hooks of extensions of these classes, and which ones have results."""
    found = _PLANS.get(classes)
    if found is None:
        plan: Plan = {
            name: [(i, hook) for i, cls in enumerate(classes) if (hook := _hook(cls, name))]
            for name in HOOKS
        }
        with_results = [
            i for i, cls in enumerate(classes) if cls.get_results is not SchemaExtension.get_results
        ]
        found = _PLANS[classes] = (plan, with_results)
    return found


class Runner(SchemaExtensionsRunner):
    def __init__(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension] | None = None
    ) -> None:
        super().__init__(execution_context, extensions)
        self._plan, self._with_results = _plan(tuple(map(type, self.extensions)))

    def _stage(self, name: str, args: tuple[Any, ...] = ()) -> Stage:
        return Stage(name, self.extensions, self._plan[name], args)

    def operation(self) -> Any:
        return self._stage("on_operation")

    def validation(self) -> Any:
        return self._stage("on_validate")

    def parsing(self) -> Any:
        return self._stage("on_parse")

    def executing(self) -> Any:
        return self._stage("on_execute")

    def on_stream_result(self, result: Any) -> Any:
        return self._stage("on_stream_result", (result,))

    async def get_extensions_results(self, ctx: ExecutionContext) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for i in self._with_results:
            data.update(await await_maybe(self.extensions[i].get_results()))
        data.update(ctx.extensions_results)
        return data

    def get_extensions_results_sync(self) -> dict[str, Any]:
        if not self._with_results:
            return {}
        return super().get_extensions_results_sync()
