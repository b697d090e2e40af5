"""SQLite: messages stored compressed with a dictionary trained on the database's own

A message row's `data` may now be a zstd frame instead of JSON text (store/compression.py),
compressed with a dictionary kept in the new table `message_dictionary`. The full-text
index's view `message_search`, and its delete trigger, read a frame's words through
`convograph_inflate` (registered by convograph on every SQLite connection; SQLite resolves a
trigger's functions when a statement that fires it is prepared, so deleting messages or
conversations needs it: through convograph, not the sqlite3 shell). Rows already stored stay
text. PostgreSQL: the table only (unused there).

Downgrade: every frame is inflated back to its text (in Python, with the stored
dictionaries), then the view and trigger of 0012 come back and the table goes.

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LARGEST = "(SELECT coalesce(max(id), 0) FROM message)"
_MARK = "(SELECT upto FROM message_fts_mark)"
_FRAME = "x'28B52FFD'"  # zstd's magic number, a frame's first four bytes


def _leaves(json: str) -> str:
    return (
        f"(SELECT group_concat(leaf.value, ' ') FROM json_tree({json}, '$.content') AS leaf "
        "WHERE leaf.type = 'text')"
    )


def words_of(row: str, *, frames: bool) -> str:
    """The indexed text of the message `row` (a table alias, or `old` in a trigger): its
    stored search text, else the string leaves under its JSON's "content", the JSON
    inflated first when it is a frame (`frames`; 0012's expression without)."""
    cases = [
        f"WHEN {row}.search_text IS NOT NULL THEN {row}.search_text",
        f"WHEN typeof({row}.data) = 'text' AND json_valid({row}.data) THEN "
        + _leaves(f"{row}.data"),
    ]
    if frames:
        cases.append(
            f"WHEN typeof({row}.data) = 'blob' AND substr({row}.data, 1, 4) = {_FRAME} THEN "
            + _leaves(f"convograph_inflate({row}.data)")
        )
    return "CASE " + " ".join(cases) + " END"


def _view(*, frames: bool) -> str:
    return (
        f"CREATE VIEW message_search(id, search_text) AS SELECT m.id, "
        f"{words_of('m', frames=frames)} FROM message AS m"
    )


def _trigger(*, frames: bool) -> str:
    return (
        "CREATE TRIGGER message_fts_delete AFTER DELETE ON message BEGIN "
        "INSERT INTO message_fts(message_fts, rowid, search_text) "
        f"SELECT 'delete', old.id, words.text FROM (SELECT {words_of('old', frames=frames)} "
        f"AS text) AS words WHERE words.text IS NOT NULL AND old.id <= {_MARK}; "
        f"UPDATE message_fts_mark SET upto = {_LARGEST} WHERE upto > {_LARGEST}; "
        "END"
    )


def _replace_search(*, frames: bool) -> None:
    for statement in (
        "DROP TRIGGER message_fts_delete",
        "DROP VIEW message_search",
        _view(frames=frames),
        _trigger(frames=frames),
    ):
        op.execute(statement)


def upgrade() -> None:
    op.create_table(
        "message_dictionary",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    if op.get_bind().dialect.name == "sqlite":
        _replace_search(frames=True)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        # The trigger without frames first: the rows are rewritten, not deleted, but no
        # statement of this connection may need convograph_inflate.
        _replace_search(frames=False)
        _inflate_all(bind)
    op.drop_table("message_dictionary")


def _inflate_all(bind: sa.Connection) -> None:
    decompressors = {
        ident: zstandard.ZstdDecompressor(
            dict_data=zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
        )
        for ident, data in bind.execute(sa.text("SELECT id, data FROM message_dictionary"))
    }
    if not decompressors:
        return
    read = sa.text(
        "SELECT id, data FROM message WHERE id > :last AND typeof(data) = 'blob' "
        f"AND substr(data, 1, 4) = {_FRAME} ORDER BY id LIMIT 2000"
    )
    write = sa.text("UPDATE message SET data = :text WHERE id = :id")
    last = 0
    while found := bind.execute(read, {"last": last}).all():
        rows = []
        for ident, frame in found:
            used = zstandard.get_frame_parameters(frame).dict_id
            rows.append({"id": ident, "text": decompressors[used].decompress(frame).decode()})
        bind.execute(write, rows)
        last = found[-1][0]
