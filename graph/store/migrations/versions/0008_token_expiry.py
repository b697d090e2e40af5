"""api_token.expires_at: tokens that expire (`token create --expires-in`, `token rotate`)

A token past its expires_at is refused like a revoked one, and ends the subscriptions it
opened. NULL is a token that never expires, which every token stored before this revision
is. Rotation's grace is the old token's expires_at set to now + grace, so nothing has to
run later to end it.

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column without a default: an in-place ADD COLUMN on both backends.
    op.add_column("api_token", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # SQLite (3.35+) drops a column in place; a batch copy would drop the table others reference.
    op.drop_column("api_token", "expires_at")
