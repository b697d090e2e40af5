"""SQLite: the full-text index reads a message's words from its JSON, not from a copy

Until now every message row held its text twice: the JSON (`data`) and the string leaves
under its "content" joined (`search_text`), the column the FTS5 index was built from, close
to a third of the database. Now the index is contentless and is filled from the view
`message_search`, which computes that text from the JSON with SQLite's own json_tree (the
same leaves, in the same order), so `search_text` stays NULL on SQLite, except with
encryption on, where the JSON is
sealed and the column holds the keyed word digests the index is built from instead (and
where a string holds an escaped NUL, at which SQLite's JSON functions end it). The
index is rebuilt from the view (its words are the same), and the delete trigger takes a
message's words out of it with the same expression over the deleted row. (Contentless: FTS5
reads its content table inside its own statements, where table-valued functions such as
json_tree are refused, so the view cannot be its content table; and FTS5's 'rebuild', which
would read it, now refuses to run instead of emptying the index.)

The space freed inside the file is reused by later writes; `VACUUM` gives it back to the
file system at once. PostgreSQL keeps its column and GIN index: nothing changes there.

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LARGEST = "(SELECT coalesce(max(id), 0) FROM message)"
_MARK = "(SELECT upto FROM message_fts_mark)"


def words_of(row: str) -> str:
    """The indexed text of the message `row` (a table alias, or `old` in a trigger): its
    stored search text (word digests, with encryption on), else the string leaves under its
    JSON's "content" (store/search_index.py says why the view exists)."""
    return (
        f"CASE WHEN {row}.search_text IS NOT NULL THEN {row}.search_text "
        f"WHEN typeof({row}.data) = 'text' AND json_valid({row}.data) THEN "
        f"(SELECT group_concat(leaf.value, ' ') FROM json_tree({row}.data, '$.content') AS leaf "
        "WHERE leaf.type = 'text') END"
    )


_FTS = (
    "CREATE VIRTUAL TABLE message_fts USING fts5(search_text, {content}"
    "tokenize='unicode61 remove_diacritics 2')"
)
_DELETE_TRIGGER = (
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON message BEGIN "
    "INSERT INTO message_fts(message_fts, rowid, search_text) "
    "SELECT 'delete', old.id, words.text FROM (SELECT {words} AS text) AS words "
    f"WHERE words.text IS NOT NULL AND old.id <= {_MARK}; "
    f"UPDATE message_fts_mark SET upto = {_LARGEST} WHERE upto > {_LARGEST}; "
    "END"
)

UPGRADE = [
    "DROP TRIGGER message_fts_delete",
    "DROP TABLE message_fts",
    # Plain JSON text: its words now come from the JSON itself, unless a string holds an
    # escaped NUL, where SQLite's JSON functions end it (the row keeps its copy).
    "UPDATE message SET search_text = NULL WHERE search_text IS NOT NULL "
    "AND typeof(data) = 'text' AND json_valid(data) AND instr(data, '\\u0000') = 0",
    f"CREATE VIEW message_search(id, search_text) AS SELECT m.id, {words_of('m')} "
    "FROM message AS m",
    _FTS.format(content="content='', "),
    # Everything up to the mark, as before; the rest waits for the indexer, as before.
    "INSERT INTO message_fts(rowid, search_text) SELECT id, search_text FROM message_search "
    f"WHERE id <= {_MARK} AND search_text IS NOT NULL",
    _DELETE_TRIGGER.format(words=words_of("old")),
]
DOWNGRADE = [
    "DROP TRIGGER message_fts_delete",
    "DROP TABLE message_fts",
    "UPDATE message SET search_text = "
    "(SELECT s.search_text FROM message_search AS s WHERE s.id = message.id) "
    "WHERE search_text IS NULL",
    "DROP VIEW message_search",
    _FTS.format(content="content='message', content_rowid='id', "),
    "INSERT INTO message_fts(rowid, search_text) SELECT id, search_text FROM message "
    f"WHERE id <= {_MARK} AND search_text IS NOT NULL",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON message BEGIN "
    "INSERT INTO message_fts(message_fts, rowid, search_text) "
    "SELECT 'delete', old.id, old.search_text WHERE old.search_text IS NOT NULL "
    f"AND old.id <= {_MARK}; "
    f"UPDATE message_fts_mark SET upto = {_LARGEST} WHERE upto > {_LARGEST}; "
    "END",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in DOWNGRADE:
            op.execute(statement)
