"""The domain's enums as GraphQL enums.

`strawberry.enum` registers an existing enum in place (it gains its GraphQL definition):
the domain keeps one enum per concept and the schema uses that same class.
"""

from __future__ import annotations

import strawberry

from graph.domain.checkpoints import ReflectOutcome
from graph.domain.delegations import DelegationStatus
from graph.domain.errors import ErrorCode
from graph.domain.events import EventKind
from graph.domain.principal import OwnerType, Scope

strawberry.enum(OwnerType, name="OwnerType")
strawberry.enum(
    Scope,
    name="Scope",
    description="What a token may do. SERVICE: a trusted backend (a multi-user site, a "
    "runtime host) acting for the owners of its workspace: reads and writes every record of "
    "its workspace, and acts as one owner when a request names it in the "
    "`Convograph-Owner: TYPE:KEY` header (or the WebSocket `connection_init` payload key of "
    "that name).",
)
strawberry.enum(DelegationStatus, name="DelegationStatus")
strawberry.enum(
    ReflectOutcome,
    name="ReflectOutcome",
    description="The decision of the Reflect phase that preceded a checkpoint; "
    "only PROCEED may be stored.",
)
strawberry.enum(EventKind, name="ConversationEventKind")
strawberry.enum(ErrorCode, name="ErrorCode")

__all__ = ["DelegationStatus", "ErrorCode", "EventKind", "OwnerType", "ReflectOutcome", "Scope"]
