"""SQLite: the full-text index knows how far it has indexed instead of a waiting list

Since 0003 an append noted its message in message_fts_pending (a trigger), which cost every
append's commit one B-tree page more to write and sync. Messages only ever get a rowid above
every existing one (SQLite's rowid is one more than the largest), so what waits is exactly
the messages above the last one indexed: message_fts_mark holds that id (`upto`), the
indexer (store/search_index.py) indexes the rows above it and moves it, and an append writes
nothing for the index. Invariant: a message with search text is in message_fts if and only
if its id is at most `upto`.

A delete takes an indexed message out of the index, and lowers `upto` to the largest id
left when the rows at the top are gone: SQLite would hand their ids out again, and the new
rows must count as waiting. PostgreSQL's GIN index is unchanged.

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LARGEST = "(SELECT coalesce(max(id), 0) FROM message)"

UPGRADE = [
    "INSERT INTO message_fts(rowid, search_text) SELECT m.id, m.search_text "
    "FROM message_fts_pending p JOIN message m ON m.id = p.id",
    "DROP TRIGGER message_fts_insert",
    "DROP TRIGGER message_fts_delete",
    "DROP TABLE message_fts_pending",
    "CREATE TABLE message_fts_mark "
    "(id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1), upto INTEGER NOT NULL)",
    f"INSERT INTO message_fts_mark(id, upto) VALUES (1, {_LARGEST})",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON message BEGIN "
    "INSERT INTO message_fts(message_fts, rowid, search_text) "
    "SELECT 'delete', old.id, old.search_text WHERE old.search_text IS NOT NULL "
    "AND old.id <= (SELECT upto FROM message_fts_mark); "
    f"UPDATE message_fts_mark SET upto = {_LARGEST} WHERE upto > {_LARGEST}; "
    "END",
]
DOWNGRADE = [
    "CREATE TABLE message_fts_pending (id INTEGER NOT NULL PRIMARY KEY)",
    "INSERT INTO message_fts_pending(id) SELECT id FROM message "
    "WHERE id > (SELECT upto FROM message_fts_mark) AND search_text IS NOT NULL",
    "DROP TRIGGER message_fts_delete",
    "DROP TABLE message_fts_mark",
    "CREATE TRIGGER message_fts_insert AFTER INSERT ON message WHEN new.search_text IS NOT NULL "
    "BEGIN INSERT INTO message_fts_pending(id) VALUES (new.id); END",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON message WHEN old.search_text IS NOT NULL "
    "BEGIN "
    "INSERT INTO message_fts(message_fts, rowid, search_text) "
    "SELECT 'delete', old.id, old.search_text "
    "WHERE NOT EXISTS (SELECT 1 FROM message_fts_pending WHERE id = old.id); "
    "DELETE FROM message_fts_pending WHERE id = old.id; "
    "END",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in DOWNGRADE:
            op.execute(statement)
