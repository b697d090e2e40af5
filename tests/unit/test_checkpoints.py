"""Session checkpoints: only a state Reflect approved (PROCEED) is stored, and only one
Manglekit's Checkpoint can load: its session id, an active envelope, string facts."""

from __future__ import annotations

from typing import Any

import pytest

from graph.domain import checkpoints, jsoncodec
from graph.domain.checkpoints import ReflectOutcome
from graph.domain.errors import ErrorCode
from tests.unit.helpers import raises_domain


def state(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "session_id": "s-1",
        "active_envelope": {"id": "env-1", "facts": ["a(1)."]},
        "logical_facts": ["parent(a, b)."],
        "big": 2**70,
    }
    document.update(overrides)
    return document


def test_a_proceed_state_is_stored_exactly() -> None:
    document = state()
    text = checkpoints.checkpoint_document("s-1", document, ReflectOutcome.PROCEED)
    assert jsoncodec.loads(text) == document
    assert "1180591620717411303424" in text


@pytest.mark.parametrize(
    "outcome", [o for o in ReflectOutcome if o is not ReflectOutcome.PROCEED], ids=str
)
def test_a_state_reflect_did_not_approve_is_never_stored(outcome: ReflectOutcome) -> None:
    with raises_domain(ErrorCode.POISONED_STATE, "outcome") as info:
        checkpoints.checkpoint_document("s-1", state(), outcome)
    assert outcome.value in info.value.message


@pytest.mark.parametrize(
    ("session_id", "code"),
    [
        ("", ErrorCode.INVALID_INPUT),
        ("   ", ErrorCode.INVALID_INPUT),
        ("s\x00", ErrorCode.INVALID_INPUT),
        ("s" * 501, ErrorCode.LIMIT_EXCEEDED),
    ],
    ids=["empty", "blank", "NUL", "too long"],
)
def test_the_session_id_is_checked_first(session_id: str, code: ErrorCode) -> None:
    with raises_domain(code, "sessionId"):
        checkpoints.checkpoint_document(
            session_id, state(session_id=session_id), ReflectOutcome.PROCEED
        )


def test_a_session_id_of_500_characters_is_allowed() -> None:
    long_id = "s" * 500
    checkpoints.checkpoint_document(long_id, state(session_id=long_id), ReflectOutcome.PROCEED)
    with raises_domain(ErrorCode.INVALID_INPUT, "sessionId"):
        checkpoints.check_session_id("a\x00b")


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([1], ["state"]),
        ("state", ["state"]),
        (None, ["state"]),
        (state(session_id="s-2"), ["state", "session_id"]),
        ({k: v for k, v in state().items() if k != "session_id"}, ["state", "session_id"]),
        (state(active_envelope=None), ["state", "active_envelope", "id"]),
        (state(active_envelope="env-1"), ["state", "active_envelope", "id"]),
        (state(active_envelope={}), ["state", "active_envelope", "id"]),
        (state(active_envelope={"id": 1}), ["state", "active_envelope", "id"]),
        (state(active_envelope={"id": "  "}), ["state", "active_envelope", "id"]),
        (state(logical_facts="a."), ["state", "logical_facts"]),
        (state(logical_facts=["a.", 1]), ["state", "logical_facts"]),
        (state(logical_facts={"a": "b"}), ["state", "logical_facts"]),
    ],
    ids=[
        "a list",
        "a string",
        "null",
        "another session",
        "no session id",
        "no envelope",
        "an envelope that is a string",
        "an envelope without id",
        "a numeric envelope id",
        "a blank envelope id",
        "facts that are a string",
        "a fact that is a number",
        "facts that are an object",
    ],
)
def test_a_state_checkpoint_cannot_load_is_invalid_input(document: Any, field: list[str]) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, *field):
        checkpoints.checkpoint_document("s-1", document, ReflectOutcome.PROCEED)


@pytest.mark.parametrize("facts", [None, []], ids=repr)
def test_logical_facts_may_be_absent_or_empty(facts: Any) -> None:
    checkpoints.validate_state("s-1", state(logical_facts=facts))
    document = state()
    del document["logical_facts"]
    checkpoints.validate_state("s-1", document)


def test_an_envelope_carries_its_string_facts() -> None:
    facts = ["a(1).", "b(2)."]
    envelope = {"id": "e", "facts": facts}
    got = checkpoints.envelope_facts(envelope)
    assert got == facts
    got.append("c(3).")
    assert envelope["facts"] == ["a(1).", "b(2)."]  # the caller's envelope is untouched
    assert checkpoints.envelope_facts({"id": "e"}) == []
    assert checkpoints.envelope_facts({"id": "e", "facts": None}) == []


@pytest.mark.parametrize(
    ("envelope", "field"),
    [
        (["a."], ["envelope"]),
        (None, ["envelope"]),
        ({"facts": "a."}, ["envelope", "facts"]),
        ({"facts": ["a.", None]}, ["envelope", "facts"]),
    ],
    ids=["a list", "null", "facts that are a string", "a null fact"],
)
def test_an_envelope_with_facts_that_are_no_strings_is_invalid(
    envelope: Any, field: list[str]
) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, *field):
        checkpoints.envelope_facts(envelope)


def test_what_a_stored_state_says_ignores_what_is_not_text() -> None:
    stored = {
        "logical_facts": ["a.", 1, None, "b."],
        "execution_context": {"feedback_history": ["ok", {"x": 1}, "retry"]},
        "payload_type": "plan",
    }
    assert checkpoints.logical_facts(stored) == ["a.", "b."]
    assert checkpoints.feedback_history(stored) == ["ok", "retry"]
    assert checkpoints.payload_type(stored) == "plan"


@pytest.mark.parametrize(
    "stored",
    [
        {},
        {"logical_facts": None, "execution_context": None, "payload_type": None},
        {"execution_context": "text", "payload_type": 3},
        {"execution_context": {"feedback_history": None}},
    ],
    ids=repr,
)
def test_a_stored_state_without_those_parts_says_nothing(stored: dict[str, Any]) -> None:
    assert checkpoints.logical_facts(stored) == []
    assert checkpoints.feedback_history(stored) == []
    assert checkpoints.payload_type(stored) is None


@pytest.mark.parametrize("held", [5, True, "abc", {"a": "b"}, None, ["x", 1, "y"]])
def test_facts_and_feedback_stored_in_any_shape_read_as_lists_of_strings(held: Any) -> None:
    # Checkpoints stored before these fields were checked.
    expected = ["x", "y"] if isinstance(held, list) else []
    document = state(logical_facts=held, execution_context={"feedback_history": held})
    assert checkpoints.logical_facts(document) == expected
    assert checkpoints.feedback_history(document) == expected
    assert checkpoints.feedback_history(state(execution_context="abc")) == []
