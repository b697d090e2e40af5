"""conversation.token_count: the sum of its messages' token counts, kept with each write

The workspace figures (`workspaceFigures`) report the tokens of every message that carries
a `token_count`. Those live inside each message's JSON text: adding them up at read time
means reading and parsing every message of the workspace. Each conversation now keeps the
sum of its live transcript's counts, as it keeps message_count, so the figures add up one
value per conversation. This revision adds the column and fills it from the stored
messages, with the rule of graph/domain/messages.token_count: a top-level `token_count`
that is an integer from 0 to 2**31 - 1 counts, anything else counts 0.

Revision ID: 0006
Revises: 0005
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_MESSAGE_TOKENS = 2**31 - 1

# json_type says 'integer' only for a JSON integer that fits 64 bits ('real' for 5.0, 1e3 or
# a longer run of digits); CASE keeps json_* away from a text that is not JSON at all.
SQLITE_FILL = f"""
UPDATE conversation SET token_count = (
    SELECT coalesce(sum(CASE
        WHEN json_valid(m.data)
         AND json_type(m.data, '$.token_count') = 'integer'
         AND json_extract(m.data, '$.token_count') BETWEEN 0 AND {MAX_MESSAGE_TOKENS}
        THEN json_extract(m.data, '$.token_count') ELSE 0 END), 0)
    FROM message m WHERE m.conversation_id = conversation.id)
WHERE message_count > 0
"""

# The stored text is read as json, not jsonb (jsonb refuses a string holding \u0000). A
# JSON number of at most ten plain digits is an integer that fits bigint; the CASEs order the
# checks, so a cast is only tried on a value that passed the ones before it. PostgreSQL
# un-escapes every string of a document it reads a field of, and refuses to make \u0000 text:
# the few messages that hold one are added up in Python instead (NUL_MESSAGES).
_TOKENS = "(m.data::json ->> 'token_count')"
_CARRIES_A_COUNT = "m.data LIKE '%\"token_count\"%'"
_HOLDS_NUL = "strpos(m.data, '\\u0000') > 0"
POSTGRES_FILL = f"""
UPDATE conversation c SET token_count = t.total
FROM (
    SELECT m.conversation_id, sum(CASE
        WHEN json_typeof(m.data::json -> 'token_count') = 'number'
         AND {_TOKENS} ~ '^[0-9]{{1,10}}$'
        THEN CASE WHEN {_TOKENS}::bigint <= {MAX_MESSAGE_TOKENS} THEN {_TOKENS}::bigint END
        END) AS total
    FROM message m
    WHERE {_CARRIES_A_COUNT} AND NOT {_HOLDS_NUL}
    GROUP BY m.conversation_id
) t
WHERE c.id = t.conversation_id AND t.total IS NOT NULL
"""
NUL_MESSAGES = (
    f"SELECT m.conversation_id, m.data FROM message m WHERE {_CARRIES_A_COUNT} AND {_HOLDS_NUL}"
)
ADD_TOKENS = "UPDATE conversation SET token_count = token_count + :tokens WHERE id = :id"


def _tokens(data: str) -> int:
    """graph/domain/messages.token_count, as it was when this revision was written."""
    try:
        message = json.loads(data)
    except ValueError:
        return 0
    value = message.get("token_count") if isinstance(message, dict) else None
    return value if type(value) is int and 0 <= value <= MAX_MESSAGE_TOKENS else 0


def _fill_postgres() -> None:
    bind = op.get_bind()
    bind.execute(sa.text(POSTGRES_FILL))
    totals: dict[str, int] = {}
    for conversation_id, data in bind.execute(sa.text(NUL_MESSAGES)):
        totals[conversation_id] = totals.get(conversation_id, 0) + _tokens(data)
    for conversation_id, tokens in totals.items():
        if tokens:
            bind.execute(sa.text(ADD_TOKENS), {"tokens": tokens, "id": conversation_id})


def upgrade() -> None:
    # A plain ADD COLUMN with a constant default: no copy of a table others reference.
    op.add_column(
        "conversation",
        sa.Column("token_count", sa.BigInteger(), nullable=False, server_default="0"),
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute(SQLITE_FILL)
    else:
        _fill_postgres()


def downgrade() -> None:
    # SQLite (3.35+) drops a column in place; a batch copy would drop the table others reference.
    op.drop_column("conversation", "token_count")
