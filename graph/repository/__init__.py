"""The only package that builds SQL. A Repository is handed its connection and its principal."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from ..crypto import Keyring
from ..principal import Principal
from ..records import Event
from ..settings import Settings
from .conversations import Conversations
from .delegations import Delegations
from .messages import Messages
from .sessions import Sessions


class Repository:
    """Every aggregate's data functions over one connection, scoped to one principal."""

    def __init__(
        self, conn: AsyncConnection, principal: Principal, *, keyring: Keyring, settings: Settings
    ) -> None:
        self.conn = conn
        self.principal = principal
        self.keyring = keyring
        self.settings = settings
        self.is_sqlite = conn.dialect.name == "sqlite"
        # Filled by writes, published by the unit of work once the transaction commits.
        self.events: list[Event] = []
        self.conversations = Conversations(self)
        self.messages = Messages(self)
        self.delegations = Delegations(self)
        self.sessions = Sessions(self)

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC)
