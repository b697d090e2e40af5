"""Delegations: what a create, a completion and a resume may do (entropic's engine
semantics): a delegation is completed once, from an open status to a final one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph.domain import delegations, jsoncodec
from graph.domain.delegations import FINAL, OPEN, DelegationStatus
from graph.domain.errors import ErrorCode
from tests.unit.helpers import PROPERTY, raises_domain


def new(**kwargs: Any) -> delegations.NewDelegation:
    arguments: dict[str, Any] = {"delegating_tier": "lead", "target_tier": "coder", "task": "t"}
    arguments.update(kwargs)
    return delegations.new_delegation(**arguments)


def test_a_create_keeps_its_inputs() -> None:
    d = new(task="write tests", max_turns=5, idempotency_key="k")
    assert (d.delegating_tier, d.target_tier, d.task) == ("lead", "coder", "write tests")
    assert d.max_turns == 5
    assert d.idempotency_key == "k"


@pytest.mark.parametrize("turns", [None, 0, -1, -100])
def test_zero_or_fewer_turns_mean_no_limit(turns: int | None) -> None:
    assert new(max_turns=turns).max_turns is None


@pytest.mark.parametrize(
    ("kwargs", "code", "field"),
    [
        ({"delegating_tier": ""}, ErrorCode.INVALID_INPUT, "delegatingTier"),
        ({"target_tier": "  "}, ErrorCode.INVALID_INPUT, "targetTier"),
        ({"target_tier": "t" * 201}, ErrorCode.LIMIT_EXCEEDED, "targetTier"),
        ({"task": ""}, ErrorCode.INVALID_INPUT, "task"),
        ({"task": "a\x00"}, ErrorCode.INVALID_INPUT, "task"),
        ({"idempotency_key": ""}, ErrorCode.INVALID_INPUT, "idempotencyKey"),
        ({"idempotency_key": " "}, ErrorCode.INVALID_INPUT, "idempotencyKey"),
    ],
    ids=lambda v: str(v),
)
def test_a_create_refuses_naming_the_input(
    kwargs: dict[str, Any], code: ErrorCode, field: str
) -> None:
    with raises_domain(code, field):
        new(**kwargs)


def test_a_long_task_is_allowed() -> None:
    assert len(new(task="x" * 1_000_000).task) == 1_000_000
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "task"):
        new(task="x" * 1_000_001)


def test_the_child_title_names_the_tier_and_the_start_of_the_task() -> None:
    assert new(task="fix the bug").child_title == "Delegation: coder — fix the bug"
    long = new(task="a" * 60 + "TAIL")
    assert long.child_title == "Delegation: coder — " + "a" * 60


def test_open_and_final_statuses_split_every_status() -> None:
    assert set(OPEN) | set(FINAL) == set(DelegationStatus)
    assert not set(OPEN) & set(FINAL)
    assert DelegationStatus.PENDING in OPEN
    assert DelegationStatus.COMPLETED in FINAL


@pytest.mark.parametrize("status", FINAL, ids=str)
def test_a_delegation_completes_to_a_final_status(status: DelegationStatus) -> None:
    delegations.check_completion(status, "done")
    delegations.check_completion(status, None)


@pytest.mark.parametrize("status", OPEN, ids=str)
def test_completing_to_an_open_status_is_invalid(status: DelegationStatus) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "status"):
        delegations.check_completion(status, "done")


def test_a_completion_summary_is_checked() -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "summary"):
        delegations.check_completion(DelegationStatus.COMPLETED, "a\x00b")
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "summary"):
        delegations.check_completion(DelegationStatus.FAILED, "x" * 1_000_001)


@pytest.mark.parametrize("status", FINAL, ids=str)
def test_completing_a_final_delegation_again_is_an_invalid_transition(
    status: DelegationStatus,
) -> None:
    error = delegations.already_final(status)
    assert error.code is ErrorCode.INVALID_TRANSITION
    assert error.field == ["delegationId"]
    assert status.value in error.message


def test_a_resume_names_its_prior_delegation_by_id_or_by_tier() -> None:
    delegations.check_resume("9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60", None, "go on")
    delegations.check_resume(None, "coder", "go on")


@pytest.mark.parametrize(
    ("delegation_id", "target_tier", "field"),
    [("d", "coder", "delegationId"), (None, None, "targetTier")],
    ids=["both", "neither"],
)
def test_a_resume_needs_exactly_one_of_id_and_tier(
    delegation_id: str | None, target_tier: str | None, field: str
) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, field):
        delegations.check_resume(delegation_id, target_tier, "go on")


def test_a_resume_needs_a_task() -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "task"):
        delegations.check_resume(None, "coder", " ")


def test_a_tier_is_checked() -> None:
    delegations.check_tier("coder")
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "targetTier"):
        delegations.check_tier("t" * 201)


def test_a_resumed_transcript_is_the_prior_turns_then_the_task() -> None:
    prior = [
        '{"role": "system", "content": "be brief", "extra": 1}',
        '{"content": "no role"}',
        '{"role": "", "content": "blank role"}',
        '{"role": 3, "content": "numeric role"}',
        '{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}',
        '{"role": "tool", "content": null, "n": 18446744073709551616}',
    ]
    seeded = delegations.resumed_transcript(prior, "next step", max_bytes=10_000)
    assert [m.message for m in seeded] == [
        {"role": "system", "content": "be brief"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        {"role": "tool", "content": None},
        {"role": "user", "content": "next step"},
    ]
    assert [jsoncodec.loads(m.encoded) for m in seeded] == [m.message for m in seeded]


def test_a_resumed_transcript_of_nothing_is_the_task_alone() -> None:
    (only,) = delegations.resumed_transcript([], "start", max_bytes=1000)
    assert only.message == {"role": "user", "content": "start"}


def test_a_resumed_transcript_too_big_for_a_message_names_the_task() -> None:
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "task"):
        delegations.resumed_transcript([], "x" * 100, max_bytes=50)


def like(pattern: str, text: str) -> bool:
    """SQL LIKE with a backslash escape, as the database reads the pattern."""
    regex, chars = "", iter(pattern)
    for c in chars:
        if c == "\\":
            regex += re.escape(next(chars))
        elif c == "%":
            regex += ".*"
        elif c == "_":
            regex += "."
        else:
            regex += re.escape(c)
    return re.fullmatch(regex, text, re.DOTALL) is not None


@PROPERTY
@given(st.text(alphabet="ab%_\\x", max_size=6), st.text(alphabet="ab%_\\x", max_size=10))
def test_a_search_pattern_matches_exactly_the_texts_holding_the_query(
    query: str, text: str
) -> None:
    assert like(delegations.search_pattern(query), text) is (query in text)


def test_a_search_pattern_refuses_nul() -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "query"):
        delegations.search_pattern("a\x00")
