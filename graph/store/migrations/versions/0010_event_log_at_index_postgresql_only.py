"""SQLite: the event log without its index on `at`

Every write that has events adds a row to `event_log`, and the index on `at` made that one
B-tree page more to write and sync at each commit. Only the sweep uses the index (to prune
events older than the retention). SQLite has one writer, so a log row's rowid already orders
the rows as their transactions committed: the sweep prunes the log's oldest rows by rowid
there (store/event_log.py), and PostgreSQL, whose writers commit concurrently, keeps the
index.

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_event_log_at", table_name="event_log")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index("ix_event_log_at", "event_log", ["at"])
