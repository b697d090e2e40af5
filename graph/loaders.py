"""Per-request DataLoaders: a tree query costs a few statements per level, not per node."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from strawberry.dataloader import DataLoader

from .records import ConversationRecord, DelegationRecord, DelegationStatus, SnapshotRecord
from .repository import Repository

if TYPE_CHECKING:
    from .context import Context

K = TypeVar("K")
V = TypeVar("V")


class Loaders:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self.conversation = self._loader(lambda repo, keys: repo.conversations.get_many(keys))
        self.delegation = self._loader(lambda repo, keys: repo.delegations.get_many(keys))
        self.delegation_by_child = self._loader(
            lambda repo, keys: repo.delegations.by_child(keys)
        )
        self.delegations_by_parent: DataLoader[
            tuple[str, DelegationStatus | None], list[DelegationRecord]
        ] = self._loader(lambda repo, keys: repo.delegations.by_parent(keys), default=list)
        self.transcript: DataLoader[tuple[str, int], list[str]] = self._loader(
            lambda repo, keys: repo.messages.transcripts(keys), default=list
        )
        self.snapshots: DataLoader[str, list[SnapshotRecord]] = self._loader(
            lambda repo, keys: repo.messages.snapshots(keys), default=list
        )

    def _loader(
        self,
        fetch: Callable[[Repository, Sequence[Any]], Awaitable[dict[Any, Any]]],
        default: Callable[[], Any] = lambda: None,
    ) -> DataLoader[Any, Any]:
        async def batch(keys: Sequence[Any]) -> list[Any]:
            async with self._ctx.read() as repo:
                found = await fetch(repo, keys)
            return [found[k] if k in found else default() for k in keys]

        return DataLoader(load_fn=batch)

    def prime_conversation(self, record: ConversationRecord) -> None:
        self.conversation.prime(record.id, record)

    def prime_delegation(self, record: DelegationRecord) -> None:
        self.delegation.prime(record.id, record)
