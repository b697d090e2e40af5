"""The repositories: one per aggregate, all over one unit of work's connection and principal.

Only the store builds SQL. Every statement on an owned table is scoped by store/scope.py;
messages and snapshots are reached only through a conversation read that way.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from graph.domain.events import EventKind
from graph.domain.principal import Principal
from graph.settings import Settings
from graph.store import event_log, scope
from graph.store.events import Event
from graph.store.keyring import Keyring
from graph.store.quotas import UsageChange
from graph.store.repository.checkpoints import Checkpoints
from graph.store.repository.conversations import Conversations
from graph.store.repository.delegations import Delegations
from graph.store.repository.figures import WorkspaceFigures
from graph.store.repository.replay import Replay
from graph.store.repository.snapshots import Snapshots
from graph.store.repository.tokens import Tokens
from graph.store.repository.transcripts import Transcripts
from graph.store.repository.versions import Versions
from graph.store.sql import Sql
from graph.store.tables import Conversation

T = TypeVar("T")


class once(Generic[T]):
    """functools.cached_property without its lock (Python 3.11 takes an RLock on every
    first access, and a request builds several repositories): computed on first access,
    then an ordinary attribute of the instance."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value


class Repository:
    """What one unit of work may read and write, for one principal."""

    def __init__(
        self, sql: Sql, principal: Principal, *, keyring: Keyring, settings: Settings
    ) -> None:
        self.sql = sql
        self.principal = principal
        self.keyring = keyring
        self.settings = settings
        self.is_sqlite = sql.is_sqlite
        # Filled by writes, published by the unit of work once the transaction commits.
        self.events: list[Event] = []
        # Set by a write to the tokens: once it commits, the token cache forgets (see
        # store/token_cache.py).
        self.tokens_changed = False

    @once
    def usage(self) -> UsageChange:
        """Filled by writes, settled against the workspace quotas before the commit."""
        return UsageChange()

    @once
    def positions(self) -> event_log.Reserved:
        """The event positions this transaction's root bumps took (see event_log.py)."""
        return event_log.Reserved()

    @once
    def scope_params(self) -> dict[str, Any]:
        return scope.params(self.principal)

    def now(self) -> datetime:
        """The instant of this unit of work, taken at its first use: the rows it writes carry
        it, raised to a conversation's last update once the conversation's row is held
        (not_before), so that a conversation's time never goes back as its versions go up."""
        return self._now

    @once
    def _now(self) -> datetime:
        return datetime.now(UTC)

    def not_before(self, instant: datetime) -> None:
        """From now on, the unit of work's instant is at least `instant` (a conversation's
        last update, found once its row is held: see versions._statement)."""
        if instant > self._now:
            self.__dict__["_now"] = instant

    def publish(self, kind: EventKind, conversation: Conversation, **extra: Any) -> None:
        self.events.append(Event.of(kind, conversation, **extra))

    @once
    def shredded(self) -> list[str]:
        """The data keys of what this unit of work deleted: deleted once it commits."""
        return []

    @once
    def conversations(self) -> Conversations:
        return Conversations(self)

    @once
    def versions(self) -> Versions:
        return Versions(self)

    @once
    def transcripts(self) -> Transcripts:
        return Transcripts(self)

    @once
    def snapshots(self) -> Snapshots:
        return Snapshots(self)

    @once
    def delegations(self) -> Delegations:
        return Delegations(self)

    @once
    def checkpoints(self) -> Checkpoints:
        return Checkpoints(self)

    @once
    def replay(self) -> Replay:
        return Replay(self)

    @once
    def tokens(self) -> Tokens:
        return Tokens(self)

    @once
    def figures(self) -> WorkspaceFigures:
        return WorkspaceFigures(self)
