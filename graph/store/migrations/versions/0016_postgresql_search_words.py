"""PostgreSQL's search index holds a message's words as SQLite's index splits them

PostgreSQL's `simple` parser kept `alice@example.org` and URLs as one token each, accents
(`café` was not found by `cafe`) and hyphenated words whole, where SQLite's FTS5 index
(`unicode61`, `remove_diacritics 2`) splits and folds them: one search found different
messages on the two backends. A message row's `search_text` now holds its words as
domain/words.py finds them (SQLite's split), and a search looks for each of its words the
same way. This migration rewrites the rows written before it (SQLite: nothing to do, its
index splits the text itself; with encryption on, the rows hold word digests, unchanged).

Downgrade: nothing to undo; the words are still found by the code before it.

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from graph.domain.words import indexed_text

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 2000


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    read = sa.text(
        "SELECT id, search_text FROM message WHERE id > :last AND search_text IS NOT NULL "
        "ORDER BY id LIMIT :batch"
    )
    write = sa.text("UPDATE message SET search_text = :words WHERE id = :id")
    last = 0
    while rows := bind.execute(read, {"last": last, "batch": _BATCH}).all():
        changed = [
            {"id": mid, "words": words}
            for mid, text in rows
            if (words := indexed_text(text)) != text
        ]
        if changed:
            bind.execute(write, changed)
        last = rows[-1][0]


def downgrade() -> None:
    pass
