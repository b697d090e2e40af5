"""The event log references the messages an event carried instead of copying them

An append's log row held a copy of its messages (in `payload`) so that a resumed stream
replays the event as the subscribers were sent it, even after the transcript was replaced or
the child transcript deleted. Those changes are rare and every append paid the copy: the log
was a third of the database. A row now names the messages by their range of `seq` in its
conversation (`seq_low`..`seq_high`); what would take them away (a transcript replace, a
child transcript's delete or expiry) first copies them into the rows that reference them
(store/event_log.py). Rows written before this migration keep their copies.

Downgrade: code before this migration reads only copies, so the rows that reference messages
are pruned, with every earlier row of their tree (as the sweep prunes: a resumed stream from
before them gets CURSOR_EXPIRED and reads the state anew).

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("event_log", sa.Column("seq_low", sa.Integer(), nullable=True))
    op.add_column("event_log", sa.Column("seq_high", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.execute(
        "DELETE FROM event_log WHERE position <= (SELECT max(r.position) FROM event_log r "
        "WHERE r.root_id = event_log.root_id AND r.seq_low IS NOT NULL)"
    )
    with op.batch_alter_table("event_log") as batch:
        batch.drop_column("seq_high")
        batch.drop_column("seq_low")
