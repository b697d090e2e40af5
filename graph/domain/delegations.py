"""Delegations to sub-agents: what a create, a completion and a resume may do (entropic's
engine semantics, see SEEDS.md)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from graph.domain import jsoncodec
from graph.domain.errors import DomainError, ErrorCode, invalid
from graph.domain.messages import PreparedMessage, check_text, prepare_message

TITLE_TASK_CHARS = 60
MAX_TIER_CHARS = 200
MAX_TASK_CHARS = 1_000_000


class DelegationStatus(enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


# A delegation is completed once: from an open status to a final one.
OPEN = (DelegationStatus.PENDING, DelegationStatus.RUNNING)
FINAL = (DelegationStatus.COMPLETED, DelegationStatus.FAILED)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewDelegation:
    """A validated createDelegation (or the delegation a resume creates)."""

    delegating_tier: str
    target_tier: str
    task: str
    max_turns: int | None
    idempotency_key: str | None = None

    @property
    def child_title(self) -> str:
        return f"Delegation: {self.target_tier} — {self.task[:TITLE_TASK_CHARS]}"


def new_delegation(
    *,
    delegating_tier: str,
    target_tier: str,
    task: str,
    max_turns: int | None = None,
    idempotency_key: str | None = None,
) -> NewDelegation:
    check_text(delegating_tier, "delegatingTier", required=True, max_len=MAX_TIER_CHARS)
    check_text(target_tier, "targetTier", required=True, max_len=MAX_TIER_CHARS)
    check_text(task, "task", required=True, max_len=MAX_TASK_CHARS)
    check_text(idempotency_key, "idempotencyKey", max_len=200)
    if idempotency_key is not None and not idempotency_key.strip():
        raise invalid("`idempotencyKey` must not be blank; omit it instead", "idempotencyKey")
    return NewDelegation(
        delegating_tier=delegating_tier,
        target_tier=target_tier,
        task=task,
        # entropic passes 0 (or less) for "no limit".
        max_turns=max_turns if max_turns is not None and max_turns > 0 else None,
        idempotency_key=idempotency_key,
    )


def check_completion(status: DelegationStatus, summary: str | None) -> None:
    if status not in FINAL:
        raise invalid("`status` must be COMPLETED or FAILED", "status")
    check_text(summary, "summary", max_len=MAX_TASK_CHARS)


def already_final(current: DelegationStatus) -> DomainError:
    return DomainError(
        ErrorCode.INVALID_TRANSITION,
        f"the delegation is already {current.value}; it can be completed once",
        ["delegationId"],
    )


def check_resume(delegation_id: str | None, target_tier: str | None, task: str) -> None:
    """A resume names its prior delegation by id or by tier (its latest completion), not both."""
    if (delegation_id is None) == (target_tier is None):
        raise invalid(
            "give exactly one of `delegationId` and `targetTier`",
            "delegationId" if delegation_id is not None else "targetTier",
        )
    check_text(task, "task", required=True, max_len=MAX_TASK_CHARS)


def check_tier(target_tier: str) -> None:
    check_text(target_tier, "targetTier", max_len=MAX_TIER_CHARS)


def resumed_transcript(
    prior_messages: Iterable[str], task: str, *, max_bytes: int
) -> list[PreparedMessage]:
    """The resumed child's first messages: the prior child's `role`/`content` pairs (messages
    without a role left out), then `task` as the user's turn."""
    seed: list[dict[str, object]] = []
    for data in prior_messages:
        message = jsoncodec.loads(data)
        role = message.get("role")
        if isinstance(role, str) and role.strip():
            seed.append({"role": role, "content": message.get("content")})
    seed.append({"role": "user", "content": task})
    return [prepare_message(m, field=["task"], max_bytes=max_bytes) for m in seed]


# What Python's str.lower() does beyond PostgreSQL's lower(), which lowers each letter by
# itself to one letter: U+0130 (I with a dot) to `i` and a combining dot, and a capital sigma
# that ends a word to the final sigma U+03C2. And the final sigma is the sigma U+03C3, so that
# a word's last sigma is found however it was written.
FINAL_SIGMA, SIGMA = "\u03c2", "\u03c3"
_ONE_BY_ONE = str.maketrans({"\u0130": "i", "\u03a3": SIGMA, FINAL_SIGMA: SIGMA})


def lowered(text: str) -> str:
    """`text` lowered as searchDelegations compares a summary and its query on every backend:
    letter by letter, as PostgreSQL's lower() does, the final sigma as the sigma (SQLite is
    given this function; PostgreSQL's summaries are lowered and their final sigmas made sigmas
    in SQL)."""
    return text.lower() if text.isascii() else text.translate(_ONE_BY_ONE).lower()


def search_pattern(query: str) -> str:
    """A LIKE pattern for a substring match, as entropic's follow-up tool does: the user's
    text matches literally (LIKE's wildcards escaped with a backslash)."""
    check_text(query, "query")
    return "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
