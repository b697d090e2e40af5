"""createDelegation takes an idempotency key, as createConversation does

A client that retries a createDelegation after a timeout cannot know whether the first
attempt committed; with the same key the retry returns the first delegation instead of a
second one (and a second child transcript).

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ["workspace_type", "workspace_id", "owner_type", "owner_digest", "idempotency_key"]


def upgrade() -> None:
    # A plain ADD COLUMN and a unique index: no batch copy of a table other rows reference.
    op.add_column("delegation", sa.Column("idempotency_key", sa.String(), nullable=True))
    op.create_index("uq_delegation_idempotency", "delegation", COLUMNS, unique=True)


def downgrade() -> None:
    op.drop_index("uq_delegation_idempotency", "delegation")
    # SQLite (3.35+) drops a column in place; a batch copy would drop the table others reference.
    op.drop_column("delegation", "idempotency_key")
