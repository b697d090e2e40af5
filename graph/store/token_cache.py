"""Live tokens remembered between requests, for as long as nothing can have changed them.

Every request names its token, and looking it up was a read of its own (a connection from
the pool, a statement, its return) on every request. The cache answers instead while the
stamp its entry was read under still holds:

- no write of this process to the tokens has committed since (`changed`, called by the
  unit of work after such a commit: the CLI's commands, a test's);
- on SQLite, no other connection has committed to the database file since: the writer
  connection's `data_version` (db.py) moves on any other process's commit (the CLI's
  `token revoke` or `rotate`, a `sqlite3` shell, another server on the file), never on the
  server's own writes. Any such commit empties the cache, whatever it wrote.

A hit is checked against the clock (a token that expires is refused at its instant). Where
there is no stamp (PostgreSQL, where another replica may revoke a token; SQLite before its
writer's first write), every request reads. Unknown tokens are never remembered.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime

from graph.domain.principal import Principal
from graph.store.repository.tokens import Live


class TokenCache:
    # Entries at most: past it the cache starts again (a bound, not a policy; a server
    # sees a few tokens, one per runtime or dashboard).
    LIMIT = 10_000

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Hashable, Live]] = {}
        self._generation = 0

    def stamp(self, outside: Hashable | None) -> Hashable | None:
        """The stamp of this instant given the database's own (None: nothing is cached)."""
        return None if outside is None else (outside, self._generation)

    def get(self, digest: str, stamp: Hashable, now: datetime) -> Principal | None:
        """The principal of the token with this digest, if it was read under `stamp` and
        is live at `now`; None means: read it."""
        found = self._entries.get(digest)
        if found is None:
            return None
        read_under, live = found
        if read_under != stamp or not live.at(now):
            del self._entries[digest]
            return None
        return live.principal

    def put(self, digest: str, live: Live, stamp: Hashable) -> None:
        """Remember what a read under `stamp` (taken before the read began) found."""
        if len(self._entries) >= self.LIMIT:
            self._entries.clear()
        self._entries[digest] = (stamp, live)

    def changed(self) -> None:
        """A write of this process to the tokens committed: every entry read before it goes."""
        self._generation += 1
        self._entries.clear()
