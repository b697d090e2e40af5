"""Per-request DataLoaders: a tree query costs a few statements per level, not per node."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from strawberry.dataloader import DataLoader

from .records import ConversationRecord, DelegationRecord, DelegationStatus, SnapshotRecord
from .repository import Repository

if TYPE_CHECKING:
    from .context import Context

# Keys per statement: far above any realistic tree level, safely below the bound-parameter
# limits of SQLite (32766) and asyncpg (32767), which a huge level would otherwise hit.
MAX_BATCH_KEYS = 5000


class Loaders:
    """This operation's loaders, each built on first use (a query touches one or two)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    @cached_property
    def conversation(self) -> DataLoader[str, ConversationRecord | None]:
        return self._loader(lambda repo, keys: repo.conversations.get_many(keys))

    @cached_property
    def delegation(self) -> DataLoader[str, DelegationRecord | None]:
        return self._loader(lambda repo, keys: repo.delegations.get_many(keys))

    @cached_property
    def delegation_by_child(self) -> DataLoader[str, DelegationRecord | None]:
        # Delegations loaded by parent or by child answer later lookups by id for free.
        return self._loader(
            lambda repo, keys: repo.delegations.by_child(keys),
            then=lambda found: self._prime_delegations(found.values()),
        )

    @cached_property
    def delegations_by_parent(
        self,
    ) -> DataLoader[tuple[str, DelegationStatus | None], list[DelegationRecord]]:
        return self._loader(
            lambda repo, keys: repo.delegations.by_parent(keys),
            default=list,
            then=lambda found: self._prime_delegations(d for ds in found.values() for d in ds),
        )

    @cached_property
    def transcript(self) -> DataLoader[tuple[str, int], list[str]]:
        return self._loader(lambda repo, keys: repo.messages.transcripts(keys), default=list)

    @cached_property
    def snapshots(self) -> DataLoader[str, list[SnapshotRecord]]:
        return self._loader(lambda repo, keys: repo.messages.snapshots(keys), default=list)

    def _loader(
        self,
        fetch: Callable[[Repository, Sequence[Any]], Awaitable[dict[Any, Any]]],
        default: Callable[[], Any] = lambda: None,
        then: Callable[[dict[Any, Any]], None] | None = None,
    ) -> DataLoader[Any, Any]:
        async def batch(keys: Sequence[Any]) -> list[Any]:
            async with self._ctx.read() as repo:
                found = await fetch(repo, keys)
            if then is not None:
                then(found)
            return [found[k] if k in found else default() for k in keys]

        return DataLoader(load_fn=batch, max_batch_size=MAX_BATCH_KEYS)

    def _prime_delegations(self, records: Iterable[DelegationRecord]) -> None:
        for record in records:
            self.delegation.prime(record.id, record)
