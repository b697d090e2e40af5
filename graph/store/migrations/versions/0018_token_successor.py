"""api_token.successor_id: the token `token rotate` made of this one

A rotation ends the old token after the grace by setting its expires_at, and its
successor lives as long as the old one was issued for (expires_at - created_at). Rotated a
second time within the grace, the old token's lifetime read the grace's end: a token that
never expired got a successor expiring after its age plus the grace. The old token now
names its successor, and a second rotation of it is refused, naming that one.

NULL: not rotated, which every token stored before this revision is taken to be.

Revision ID: 0018
Revises: 0017
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column without a default: an in-place ADD COLUMN on both backends.
    op.add_column("api_token", sa.Column("successor_id", sa.String(length=36), nullable=True))


def downgrade() -> None:
    # SQLite (3.35+) drops a column in place; a batch copy would drop the table others reference.
    op.drop_column("api_token", "successor_id")
