"""Per-operation DataLoaders: a tree query costs a few statements per level, not per node."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import cached_property
from typing import Any

from strawberry.dataloader import DataLoader

from graph.domain.delegations import DelegationStatus
from graph.domain.paging import SeqWindow
from graph.store.repository import Repository
from graph.store.sql import IDS_PER_STATEMENT
from graph.store.tables import Conversation, Delegation, Message, Snapshot

Read = Callable[[], AbstractAsyncContextManager[Repository]]


class Loaders:
    """This operation's loaders, each built on first use (a query touches one or two)."""

    def __init__(self, read: Read) -> None:
        self._read = read

    @cached_property
    def conversation(self) -> DataLoader[str, Conversation | None]:
        return self._loader(lambda repo, keys: repo.conversations.get_many(keys))

    @cached_property
    def delegation(self) -> DataLoader[str, Delegation | None]:
        return self._loader(lambda repo, keys: repo.delegations.get_many(keys))

    @cached_property
    def delegations_by_parent(
        self,
    ) -> DataLoader[tuple[str, DelegationStatus | None], list[Delegation]]:
        # Delegations loaded by parent answer later lookups by id for free.
        return self._loader(
            lambda repo, keys: repo.delegations.by_parent(keys),
            default=list,
            then=lambda found: self._prime_delegations(d for ds in found.values() for d in ds),
        )

    @cached_property
    def transcript(self) -> DataLoader[tuple[Conversation, int], list[str]]:
        # Keyed by the conversation read under the scope rules: messages are reached
        # only through it.
        return self._loader(
            lambda repo, keys: repo.transcripts.texts(keys),
            default=list,
            key=lambda k: (k[0].id, k[1]),
        )

    @cached_property
    def message_pages(self) -> DataLoader[tuple[Conversation, SeqWindow], list[Message]]:
        # A list's `messages(last: 1)`: one statement for every conversation of the page.
        return self._loader(
            lambda repo, keys: repo.transcripts.pages(keys),
            default=list,
            key=lambda k: (k[0].id, k[1]),
        )

    @cached_property
    def snapshots(self) -> DataLoader[Conversation, list[Snapshot]]:
        return self._loader(
            lambda repo, keys: repo.snapshots.of_conversations(keys),
            default=list,
            key=lambda c: c.id,
        )

    @cached_property
    def snapshot_messages(self) -> DataLoader[Snapshot, str | None]:
        # Keyed by the snapshot read through its conversation under the scope rules.
        return self._loader(lambda repo, keys: repo.snapshots.messages_of(keys), key=lambda s: s.id)

    def _loader(
        self,
        fetch: Callable[[Repository, Sequence[Any]], Awaitable[dict[Any, Any]]],
        default: Callable[[], Any] = lambda: None,
        then: Callable[[dict[Any, Any]], None] | None = None,
        key: Callable[[Any], Any] | None = None,
    ) -> DataLoader[Any, Any]:
        async def batch(keys: Sequence[Any]) -> list[Any]:
            async with self._read() as repo:
                found = await fetch(repo, keys)
            if then is not None:
                then(found)
            if key is None:
                return [found[k] if k in found else default() for k in keys]
            return [found.get(key(k)) or default() for k in keys]

        return DataLoader(load_fn=batch, max_batch_size=IDS_PER_STATEMENT, cache_key_fn=key)

    def _prime_delegations(self, records: Iterable[Delegation]) -> None:
        for record in records:
            self.delegation.prime(record.id, record)
