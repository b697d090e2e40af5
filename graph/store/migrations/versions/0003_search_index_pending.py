"""SQLite: messages wait in message_fts_pending until indexed in batches

FTS5 writes an index segment at every commit that touched it, so indexing each appended
message in its own transaction cost an append about a sixth of its time. Appends now note
the message in message_fts_pending; graph/search_index.py indexes the waiting messages
together, and always before a read that searches. A message deleted while it waits is
only taken off the list (FTS5 must never be asked to delete what it does not hold).
PostgreSQL's GIN index is unchanged.

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UPGRADE = [
    "CREATE TABLE message_fts_pending (id INTEGER NOT NULL PRIMARY KEY)",
    "DROP TRIGGER message_fts_insert",
    "CREATE TRIGGER message_fts_insert AFTER INSERT ON message WHEN new.search_text IS NOT NULL "
    "BEGIN INSERT INTO message_fts_pending(id) VALUES (new.id); END",
    "DROP TRIGGER message_fts_delete",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON message WHEN old.search_text IS NOT NULL "
    "BEGIN "
    "INSERT INTO message_fts(message_fts, rowid, search_text) "
    "SELECT 'delete', old.id, old.search_text "
    "WHERE NOT EXISTS (SELECT 1 FROM message_fts_pending WHERE id = old.id); "
    "DELETE FROM message_fts_pending WHERE id = old.id; "
    "END",
]
DOWNGRADE = [
    "INSERT INTO message_fts(rowid, search_text) SELECT m.id, m.search_text "
    "FROM message_fts_pending p JOIN message m ON m.id = p.id",
    "DROP TRIGGER message_fts_insert",
    "DROP TRIGGER message_fts_delete",
    "DROP TABLE message_fts_pending",
    "CREATE TRIGGER message_fts_insert AFTER INSERT ON message WHEN new.search_text IS NOT NULL "
    "BEGIN INSERT INTO message_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON message WHEN old.search_text IS NOT NULL "
    "BEGIN INSERT INTO message_fts(message_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in DOWNGRADE:
            op.execute(statement)
