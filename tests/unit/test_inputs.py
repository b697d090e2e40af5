"""The input types are built by `inputs.build_input`, Strawberry's `from_input` hook: what
Strawberry builds without it, with the fields resolved once per class."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import strawberry
from strawberry.types.arguments import InputContext, convert_argument
from strawberry.types.base import StrawberryObjectDefinition, get_object_definition

from graph.api import inputs
from graph.api.schema import build_schema
from graph.api.types.enums import DelegationStatus, OwnerType, ReflectOutcome

SCHEMA = build_schema()

# Values as graphql-core hands them over: coerced, with the published defaults filled in.
SAMPLES: list[tuple[type, dict[str, Any]]] = [
    (inputs.AppendMessagesInput, {"conversationId": "c", "messages": [{"role": "user"}]}),
    (
        inputs.AppendMessagesInput,
        {"conversationId": "c", "messages": [], "expectedVersion": 3, "expectedMessageCount": 0},
    ),
    (inputs.UpdateConversationInput, {"id": "c", "title": None, "markRead": False}),
    (inputs.UpdateConversationInput, {"id": "c", "metadata": {"a": [1]}, "provider": "p"}),
    (
        inputs.ConversationFilter,
        {
            "rootOnly": False,
            "search": "word",
            "owner": {"type": OwnerType.USER, "key": "k"},
            "createdAfter": datetime(2026, 1, 1, tzinfo=UTC),
        },
    ),
    (inputs.CompleteDelegationInput, {"delegationId": "d", "status": DelegationStatus.FAILED}),
    (
        inputs.CheckpointSessionInput,
        {"sessionId": "s", "state": {}, "outcome": ReflectOutcome.PROCEED},
    ),
    (inputs.AcquireLockInput, {"conversationId": "c", "ttlSeconds": 30, "token": None}),
]


def _built(cls: type, value: dict[str, Any], hook: Callable[..., Any] | None) -> Any:
    definition = get_object_definition(cls, strict=True)
    kept = definition.from_input
    definition.from_input = hook
    try:
        registry = SCHEMA.schema_converter.scalar_registry
        return convert_argument(value, cls, registry, SCHEMA.config)
    finally:
        definition.from_input = kept


@pytest.mark.parametrize(("cls", "value"), SAMPLES)
def test_the_hook_builds_what_strawberry_builds_without_it(
    cls: type, value: dict[str, Any]
) -> None:
    built = _built(cls, value, inputs.build_input)
    assert isinstance(built, cls)
    assert built == _built(cls, value, None)


def test_a_field_without_default_left_out_is_none_as_strawberry_makes_it() -> None:
    # graphql-core never lets a required field be left out; Strawberry's own rule stays.
    built = _built(inputs.ReleaseLockInput, {"conversationId": "c"}, inputs.build_input)
    assert built.token is None
    assert built == _built(inputs.ReleaseLockInput, {"conversationId": "c"}, None)


def test_strawberry_calls_the_hook_of_every_input_type() -> None:
    """Fails if Strawberry stops calling `from_input` (the hook would then only be dead
    code, and the inputs built the slow way again)."""
    calls: list[type] = []

    def spy(cls: type, value: Any, context: InputContext) -> Any:
        calls.append(cls)
        return inputs.build_input(cls, value, context)

    for cls, value in SAMPLES:
        assert get_object_definition(cls, strict=True).from_input is inputs.build_input
        _built(cls, value, spy)
    assert calls == [cls for cls, _ in SAMPLES]


def test_every_input_type_of_the_schema_has_the_hook() -> None:
    inputs_of_schema = [
        concrete.definition
        for concrete in SCHEMA.schema_converter.type_map.values()
        if isinstance(concrete.definition, StrawberryObjectDefinition)
        and concrete.definition.is_input
    ]
    assert len(inputs_of_schema) == 15
    assert all(d.from_input is inputs.build_input for d in inputs_of_schema)


def test_an_input_type_with_a_maybe_field_is_left_to_strawberry() -> None:
    """Strawberry checks a null for `Maybe[T]` in the document only without the hook."""

    @strawberry.input
    class WithMaybe:
        a: strawberry.Maybe[str]

    @strawberry.input
    class Plain:
        a: str | None = None

    assert not inputs.takes_the_hook(WithMaybe)
    assert inputs.takes_the_hook(Plain)
    assert not inputs.takes_the_hook(int)
