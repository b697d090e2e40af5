"""Relay-style connections, written here rather than taken from `strawberry.relay`: the public
contract uses plain UUID ids, not Relay's global ids."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import strawberry

from graph.api.types.base import Info
from graph.domain.paging import Page
from graph.store.repository import Repository

T = TypeVar("T")
Count = Callable[[Repository], Awaitable[int]]


@strawberry.interface
class Node:
    id: strawberry.ID


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    cursor: str
    node: T


@strawberry.type
class Connection(Generic[T]):
    edges: list[Edge[T]]
    page_info: PageInfo
    # Either the total is known with the page, or it is counted when asked for.
    _total: strawberry.Private[int | None]
    _count: strawberry.Private[Count | None]

    @strawberry.field
    def nodes(self) -> list[T]:
        return [edge.node for edge in self.edges]

    @strawberry.field
    async def total_count(self, info: Info) -> int:
        if self._total is not None:
            return self._total
        assert self._count is not None
        async with info.context.read() as repo:
            return await self._count(repo)

    @classmethod
    def of(
        cls,
        page: Page[Any],
        wrap: Callable[[Any], T],
        *,
        total: int | None = None,
        count: Count | None = None,
    ) -> Connection[T]:
        return cls(
            edges=[
                Edge(cursor=c, node=wrap(item))
                for c, item in zip(page.cursors, page.items, strict=True)
            ],
            page_info=PageInfo(
                has_next_page=page.has_next_page,
                has_previous_page=page.has_previous_page,
                start_cursor=page.cursors[0] if page.cursors else None,
                end_cursor=page.cursors[-1] if page.cursors else None,
            ),
            _total=total,
            _count=count,
        )
