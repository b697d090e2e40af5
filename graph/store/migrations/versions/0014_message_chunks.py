"""Sealed blocks of transcripts: one AEAD value per 64 messages for whole-transcript reads

With encryption on, every message is sealed on its own, and a first read of a long
transcript opened each one: an AEAD call and its Python per message. A complete block of 64
messages is now also kept packed and sealed as one value in `message_chunk` (store/
repository/transcripts.py); the message rows are unchanged. Databases encrypted before this
migration get blocks as their transcripts grow; reads fall back to the rows wherever a
block is missing.

Downgrade: the table is dropped (nothing else reads it).

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "message_chunk",
        sa.Column(
            "conversation_id",
            sa.String(36),
            sa.ForeignKey("conversation.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("first_seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("message_chunk")
