"""Session checkpoints (Manglekit): one stored version of a session's state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry

from graph.api.scalars import JSON
from graph.api.types.base import Wraps
from graph.api.types.enums import ReflectOutcome
from graph.domain import checkpoints
from graph.domain.jsoncodec import RawJSON, loads
from graph.store import tables


@strawberry.type(description="A durable agent-session checkpoint (one version of it).")
class SessionState(Wraps[tables.SessionState]):
    session_id: str
    version: int
    outcome: ReflectOutcome
    created_at: datetime

    @strawberry.field(description="The SessionState document exactly as it was checkpointed.")
    def state(self) -> JSON:
        return JSON(RawJSON(self._row.state))

    def _document(self) -> dict[str, Any]:
        value = loads(self._row.state)
        return value if isinstance(value, dict) else {}

    @strawberry.field
    def logical_facts(self) -> list[str]:
        return checkpoints.logical_facts(self._document())

    @strawberry.field
    def feedback_history(self) -> list[str]:
        return checkpoints.feedback_history(self._document())

    @strawberry.field
    def payload_type(self) -> str | None:
        return checkpoints.payload_type(self._document())
