"""pending_shred: the data keys a committed delete has yet to destroy

With encryption at rest, a delete destroys the data keys of what it deleted
(crypto-shredding), in the key store, which is apart from the data (another SQLite file,
another PostgreSQL schema reached through a pool of its own): so only after the delete has
committed. A process stopped between the two left the key of a deleted session forever (the
sweep's collection of keys without data knows conversations only), and a deleted
conversation's for an hour or more (until the sweep found it without data). A delete now
records the keys it destroys in this table, in its own transaction; they are destroyed after
the commit and the rows removed, and whatever a stopped process left is finished at the next
start and by every sweep.

A ref is what a sealed value already names in the data (`cvg1:<ref>:…`): nothing is learnt
from it here.

Downgrade: the table is dropped; keys still pending then are left to the sweep's collection
(conversations') or kept (sessions').

Revision ID: 0019
Revises: 0018
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pending_shred",
        sa.Column("ref", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("ref"),
    )


def downgrade() -> None:
    op.drop_table("pending_shred")
