"""A deleted session's checkpoints number on from its last version

A session's next version was the highest stored one plus one, so after `deleteSessionState`
a new run started again at 1: a writer that had read version 2 before the delete could write
with `expectedVersion: 2` once the new run reached 2 again and overwrite a checkpoint it had
never seen (Manglekit's conflict detection defeated). The delete now keeps the last version
in `session_version_floor`, keyed like the session's rows by its owner and by a keyed digest
of its id (the id itself is not kept), and the next checkpoint takes the version after it.

Downgrade: the table is dropped; sessions deleted before then start again at 1.

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_version_floor",
        sa.Column("workspace_type", sa.String(), nullable=False),
        sa.Column("workspace_id", sa.String(), nullable=False),
        sa.Column("owner_type", sa.String(), nullable=False),
        sa.Column("owner_digest", sa.String(), nullable=False),
        sa.Column("session_digest", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "workspace_type", "workspace_id", "owner_type", "owner_digest", "session_digest"
        ),
    )


def downgrade() -> None:
    op.drop_table("session_version_floor")
