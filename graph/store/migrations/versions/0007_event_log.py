"""the durable event log, and each tree's event counter on its root

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # ADD COLUMN with a default: no rewrite of the table on either backend.
    op.add_column(
        "conversation",
        sa.Column("event_position", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_table(
        "event_log",
        sa.Column("root_id", sa.String(36), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("conversation_id", sa.String(36), nullable=False),
        sa.Column("ancestry", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("payload", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["root_id"], ["conversation.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("root_id", "position"),
    )
    op.create_index("ix_event_log_at", "event_log", ["at"])


def downgrade() -> None:
    op.drop_index("ix_event_log_at", "event_log")
    op.drop_table("event_log")
    # SQLite (3.35+) drops a column in place; a batch copy would drop the table others reference.
    op.drop_column("conversation", "event_position")
