"""initial schema

Revision ID: 0001
Revises:
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def _inline_parent_delegation_fk() -> list[sa.ForeignKeyConstraint]:
    # conversation and delegation reference each other. SQLite accepts the
    # forward reference inline; PostgreSQL gets the constraint once both exist.
    if not _sqlite():
        return []
    return [_parent_delegation_fk()]


def _parent_delegation_fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["parent_delegation_id"],
        ["delegation.id"],
        name="fk_conversation_parent_delegation",
        ondelete="CASCADE",
    )


SQLITE_FTS = [
    "CREATE VIRTUAL TABLE message_fts USING fts5(search_text, content='message', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER message_fts_insert AFTER INSERT ON message WHEN new.search_text IS NOT NULL "
    "BEGIN INSERT INTO message_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON message WHEN old.search_text IS NOT NULL "
    "BEGIN INSERT INTO message_fts(message_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
]
POSTGRES_FTS = [
    "CREATE INDEX ix_message_search ON message "
    "USING gin (to_tsvector('simple', coalesce(search_text, '')))",
]


def upgrade() -> None:
    op.create_table(
        "api_token",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("token_digest", sa.String(), nullable=False),
        sa.Column("workspace_type", sa.String(), nullable=False),
        sa.Column("workspace_id", sa.String(), nullable=False),
        sa.Column("owner_type", sa.String(), nullable=False),
        sa.Column("owner_digest", sa.String(), nullable=False),
        sa.Column("owner_key_sealed", sa.String(), nullable=False),
        sa.Column("scopes", sa.String(), nullable=False),
        sa.Column("label", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_digest"),
    )
    op.create_table(
        "conversation",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("workspace_type", sa.String(), nullable=False),
        sa.Column("workspace_id", sa.String(), nullable=False),
        sa.Column("owner_type", sa.String(), nullable=False),
        sa.Column("owner_digest", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=True),
        sa.Column("agent_slug", sa.String(), nullable=False),
        sa.Column("context", sa.String(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("provider", sa.String(), nullable=True),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("provider_response_id", sa.String(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("parent_delegation_id", sa.String(length=36), nullable=True),
        sa.Column("ancestry", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_read_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lock_digest", sa.String(), nullable=True),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("idempotency_key", sa.String(), nullable=True),
        *_inline_parent_delegation_fk(),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "workspace_type",
            "workspace_id",
            "owner_type",
            "owner_digest",
            "idempotency_key",
            name="uq_conversation_idempotency",
        ),
    )
    with op.batch_alter_table("conversation", schema=None) as batch_op:
        batch_op.create_index("ix_conversation_expires", ["expires_at"], unique=False)
        batch_op.create_index(
            "ix_conversation_owner_created",
            ["workspace_type", "workspace_id", "owner_type", "owner_digest", "created_at", "id"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_conversation_parent_delegation_id"),
            ["parent_delegation_id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_conversation_workspace_created",
            ["workspace_type", "workspace_id", "created_at", "id"],
            unique=False,
        )

    op.create_table(
        "session_state",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("workspace_type", sa.String(), nullable=False),
        sa.Column("workspace_id", sa.String(), nullable=False),
        sa.Column("owner_type", sa.String(), nullable=False),
        sa.Column("owner_digest", sa.String(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "workspace_type",
            "workspace_id",
            "owner_type",
            "owner_digest",
            "session_id",
            "version",
            name="uq_session_state_version",
        ),
    )
    op.create_table(
        "delegation",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("parent_conversation_id", sa.String(length=36), nullable=False),
        sa.Column("child_conversation_id", sa.String(length=36), nullable=False),
        sa.Column("workspace_type", sa.String(), nullable=False),
        sa.Column("workspace_id", sa.String(), nullable=False),
        sa.Column("owner_type", sa.String(), nullable=False),
        sa.Column("owner_digest", sa.String(), nullable=False),
        sa.Column("delegating_tier", sa.String(), nullable=False),
        sa.Column("target_tier", sa.String(), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("max_turns", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("resumed_from_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["child_conversation_id"], ["conversation.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["parent_conversation_id"], ["conversation.id"], ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["resumed_from_id"], ["delegation.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("delegation", schema=None) as batch_op:
        batch_op.create_index("ix_delegation_child", ["child_conversation_id"], unique=False)
        batch_op.create_index(
            "ix_delegation_owner_tier",
            [
                "workspace_type",
                "workspace_id",
                "owner_type",
                "owner_digest",
                "target_tier",
                "status",
                "completed_at",
            ],
            unique=False,
        )
        batch_op.create_index(
            "ix_delegation_parent", ["parent_conversation_id", "created_at", "id"], unique=False
        )

    op.create_table(
        "message",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("conversation_id", sa.String(length=36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversation.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("conversation_id", "seq", name="uq_message_seq"),
    )
    op.create_table(
        "snapshot",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("conversation_id", sa.String(length=36), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("messages", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversation.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.create_index(
            "ix_snapshot_conversation", ["conversation_id", "created_at", "id"], unique=False
        )

    if _sqlite():
        for statement in SQLITE_FTS:
            op.execute(statement)
    else:
        op.create_foreign_key(
            "fk_conversation_parent_delegation",
            "conversation",
            "delegation",
            ["parent_delegation_id"],
            ["id"],
            ondelete="CASCADE",
        )
        for statement in POSTGRES_FTS:
            op.execute(statement)


def downgrade() -> None:
    if _sqlite():
        op.execute("DROP TABLE message_fts")
    else:
        op.drop_constraint("fk_conversation_parent_delegation", "conversation")
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.drop_index("ix_snapshot_conversation")

    op.drop_table("snapshot")
    op.drop_table("message")
    with op.batch_alter_table("delegation", schema=None) as batch_op:
        batch_op.drop_index("ix_delegation_parent")
        batch_op.drop_index("ix_delegation_owner_tier")
        batch_op.drop_index("ix_delegation_child")

    op.drop_table("delegation")
    op.drop_table("session_state")
    with op.batch_alter_table("conversation", schema=None) as batch_op:
        batch_op.drop_index("ix_conversation_workspace_created")
        batch_op.drop_index(batch_op.f("ix_conversation_parent_delegation_id"))
        batch_op.drop_index("ix_conversation_owner_created")
        batch_op.drop_index("ix_conversation_expires")

    op.drop_table("conversation")
    op.drop_table("api_token")
