"""Workspace quotas: each conversation's stored bytes, and a usage row per workspace

A workspace quota (CONVOGRAPH_WORKSPACE_MAX_MESSAGES, CONVOGRAPH_WORKSPACE_MAX_BYTES) is
checked against what the workspace stores. Adding that up at write time would read every
message of the workspace: each conversation now keeps the UTF-8 bytes of its live
transcript's JSON (message_bytes) and of its snapshots' JSON (snapshot_bytes), as it keeps
message_count, and `workspace_usage` holds a workspace's sums while quotas are on. This
revision adds the columns, fills them from the stored rows, and creates the (empty) usage
table: a server started with quotas counts it up (store/quotas.py).

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The stored JSON is UTF-8 text: its length in bytes, as each backend counts it.
_BYTES = {"sqlite": "length(CAST({} AS BLOB))", "postgresql": "octet_length({})"}

FILL = """
UPDATE conversation SET
    message_bytes = coalesce(
        (SELECT sum({message}) FROM message m WHERE m.conversation_id = conversation.id), 0),
    snapshot_bytes = coalesce(
        (SELECT sum({snapshot}) FROM snapshot s WHERE s.conversation_id = conversation.id), 0)
WHERE message_count > 0
   OR EXISTS (SELECT 1 FROM snapshot s WHERE s.conversation_id = conversation.id)
"""


def upgrade() -> None:
    # Plain ADD COLUMNs with a constant default: no copy of a table others reference.
    for name in ("message_bytes", "snapshot_bytes"):
        op.add_column(
            "conversation",
            sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"),
        )
    length = _BYTES[op.get_bind().dialect.name]
    op.execute(FILL.format(message=length.format("m.data"), snapshot=length.format("s.messages")))
    op.create_table(
        "workspace_usage",
        sa.Column("workspace_type", sa.String(), nullable=False),
        sa.Column("workspace_id", sa.String(), nullable=False),
        sa.Column("messages", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("workspace_type", "workspace_id"),
    )


def downgrade() -> None:
    op.drop_table("workspace_usage")
    # SQLite (3.35+) drops a column in place; a batch copy would drop the table others reference.
    op.drop_column("conversation", "snapshot_bytes")
    op.drop_column("conversation", "message_bytes")
