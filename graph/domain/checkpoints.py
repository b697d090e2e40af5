"""Session checkpoints (Manglekit's DurableStateManager): which states may be stored, and what
a stored state document says (see SEEDS.md)."""

from __future__ import annotations

import enum
from typing import Any

from graph.domain.errors import DomainError, ErrorCode, invalid
from graph.domain.messages import check_text, encode_document

SESSION_ID_MAX = 500
# Each lost race means another writer committed a version, so a few passes always suffice
# in practice; the bound only stops a pathological stream of writers from spinning forever.
MAX_VERSION_ATTEMPTS = 20


class ReflectOutcome(enum.Enum):
    PROCEED = "PROCEED"
    HALT = "HALT"
    RETRY = "RETRY"
    ROUTE = "ROUTE"


def check_session_id(session_id: str, *, required: bool = False) -> None:
    # Reads check too: a NUL would reach PostgreSQL, which refuses it in text.
    check_text(session_id, "sessionId", required=required, max_len=SESSION_ID_MAX)


def checkpoint_document(session_id: str, state: Any, outcome: ReflectOutcome) -> str:
    """The state to store, as JSON text; the loop persists only what Reflect approved."""
    check_session_id(session_id, required=True)
    if outcome is not ReflectOutcome.PROCEED:
        # A poisoned state is never stored.
        raise DomainError(
            ErrorCode.POISONED_STATE,
            f"only a PROCEED outcome may be checkpointed (got {outcome.value})",
            ["outcome"],
        )
    validate_state(session_id, state)
    return encode_document(state, "state")


_NIL_UUID = "0" * 32


def _bare_uuid(text: str) -> str:
    """The hex digits of a UUID in any of the forms Go's uuid.Parse reads."""
    bare = text.strip().lower().removeprefix("urn:uuid:")
    return bare.strip("{}").replace("-", "")


def validate_state(session_id: str, state: Any) -> None:
    """The document Manglekit's Checkpoint accepts: a session id and an active envelope id."""
    if not isinstance(state, dict):
        raise invalid("`state` must be a JSON object", "state")
    if state.get("session_id") != session_id:
        raise invalid("`state.session_id` must equal `sessionId`", "state", "session_id")
    envelope = state.get("active_envelope")
    if (
        not isinstance(envelope, dict)
        or not isinstance(envelope.get("id"), str)
        or not envelope["id"].strip()
        # What Go's envelope serialises when its id was never set: Manglekit's own check
        # refuses it.
        or _bare_uuid(envelope["id"]) == _NIL_UUID
    ):
        raise invalid(
            "`state.active_envelope.id` must be a non-empty string, not the all-zero UUID",
            "state",
            "active_envelope",
            "id",
        )
    facts = state.get("logical_facts")
    if facts is not None and not _strings(facts):
        raise invalid("`state.logical_facts` must be a list of strings", "state", "logical_facts")
    context = state.get("execution_context")
    if context is not None and not isinstance(context, dict):
        raise invalid(
            "`state.execution_context` must be a JSON object", "state", "execution_context"
        )
    history = (context or {}).get("feedback_history")
    if history is not None and not _strings(history):
        raise invalid(
            "`state.execution_context.feedback_history` must be a list of strings",
            "state",
            "execution_context",
            "feedback_history",
        )


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def envelope_facts(envelope: Any) -> list[str]:
    """The Datalog facts an envelope carries (its `facts` list)."""
    if not isinstance(envelope, dict):
        raise invalid("`envelope` must be a JSON object", "envelope")
    facts = envelope.get("facts") or []
    if not _strings(facts):
        raise invalid("`envelope.facts` must be a list of strings", "envelope", "facts")
    return list(facts)


# Checkpoints stored before these fields were checked may hold anything there: read as
# lists of strings, whatever they hold.
def logical_facts(state: dict[str, Any]) -> list[str]:
    return _string_items(state.get("logical_facts"))


def feedback_history(state: dict[str, Any]) -> list[str]:
    context = state.get("execution_context")
    return _string_items(context.get("feedback_history") if isinstance(context, dict) else None)


def _string_items(value: Any) -> list[str]:
    return [f for f in value if isinstance(f, str)] if isinstance(value, list) else []


def payload_type(state: dict[str, Any]) -> str | None:
    value = state.get("payload_type")
    return value if isinstance(value, str) else None
