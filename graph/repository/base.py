"""What every aggregate's data functions share: the facade they belong to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from ..principal import Principal

if TYPE_CHECKING:
    from . import Repository


class Aggregate:
    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    @property
    def conn(self) -> AsyncConnection:
        return self.repo.conn

    @property
    def principal(self) -> Principal:
        return self.repo.principal

    def insert(self, table: Table) -> sqlite.Insert | postgresql.Insert:
        """A dialect insert, so that `on_conflict_do_nothing` works on both backends."""
        if self.repo.is_sqlite:
            return sqlite.insert(table)
        return postgresql.insert(table)
