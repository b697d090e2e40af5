"""Sealed blocks of transcripts: one AEAD value per 64 messages for whole-transcript reads

With encryption on, every message is sealed on its own, and a first read of a long
transcript opened each one: an AEAD call and its Python per message. A complete block of 64
messages is now also kept packed and sealed as one value in `message_chunk` (domain/
chunks.py, store/sealed_blocks.py); the message rows are unchanged and stay the
record. A block is a copy, so the database itself drops it when one of its messages is
deleted (a trigger on `message`, keyed by the block's first seq: blocks start at 1, 65,
129, ...): whichever release deletes the rows, a replica of the previous one during the
rollout included, no block outlives them. Databases encrypted before this migration get
blocks from `convograph keys encrypt-existing` or as their transcripts grow; reads fall back
to the rows wherever a block is missing.

Downgrade: the trigger and the table are dropped (nothing else reads them).

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

# domain/chunks.SIZE, as this revision stores blocks (tests/test_sealed_blocks.py holds them
# equal): another size would be another migration, rewriting the blocks.
SIZE = 64
_FIRST_OF = f"(({{seq}} - 1) / {SIZE}) * {SIZE} + 1"

_SQLITE = [
    "CREATE TRIGGER message_chunk_drop AFTER DELETE ON message BEGIN "
    "DELETE FROM message_chunk WHERE conversation_id = old.conversation_id "
    f"AND first_seq = {_FIRST_OF.format(seq='old.seq')}; END"
]
# One statement per DELETE on PostgreSQL, over the rows it deleted.
_POSTGRESQL = [
    "CREATE FUNCTION message_chunk_drop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "DELETE FROM message_chunk k USING (SELECT DISTINCT conversation_id, "
    f"{_FIRST_OF.format(seq='seq')} AS first_seq FROM gone) g "
    "WHERE k.conversation_id = g.conversation_id AND k.first_seq = g.first_seq; "
    "RETURN NULL; END $$",
    "CREATE TRIGGER message_chunk_drop AFTER DELETE ON message REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION message_chunk_drop()",
]


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
    for statement in _SQLITE if _sqlite() else _POSTGRESQL:
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TRIGGER message_chunk_drop" + ("" if _sqlite() else " ON message"))
    if not _sqlite():
        op.execute("DROP FUNCTION message_chunk_drop()")
    op.drop_table("message_chunk")


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"
