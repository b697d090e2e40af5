"""The GraphQL output types, one module per entity; each wraps a store model."""

from graph.api.types.base import Info
from graph.api.types.conversation import Conversation, Message, Snapshot
from graph.api.types.delegation import Delegation
from graph.api.types.events import ConversationEvent
from graph.api.types.figures import DelegationStatusCount, WorkspaceFigures
from graph.api.types.principal import Principal, UserError, Workspace
from graph.api.types.relay import Connection, Edge, Node, PageInfo
from graph.api.types.session import SessionState

__all__ = [
    "Connection",
    "Conversation",
    "ConversationEvent",
    "Delegation",
    "DelegationStatusCount",
    "Edge",
    "Info",
    "Message",
    "Node",
    "PageInfo",
    "Principal",
    "SessionState",
    "Snapshot",
    "UserError",
    "Workspace",
    "WorkspaceFigures",
]
