"""Full-text search of message content: FTS5 on SQLite, a GIN tsvector index on PostgreSQL.

A page of the conversations matching a search can be found two ways on SQLite. Hits first:
every matching message, its conversation, then the page among them; its cost grows with
the number of hits (a word in 1% of a million messages: some 10,000 lookups). Walk first:
the conversations in page order, each probed for a matching message, until the page is
full; its cost grows with the number of conversations passed over, which for a rare word
is all of them. `Conversations.find` walks only when the word has many hits, and then only
through a window of conversations, before it falls back to hits first for the rest.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    TextualSelect,
    column,
    exists,
    false,
    func,
    select,
    text,
)

from graph.domain.words import words as words_of
from graph.store.tables import message as M

# More hits than this and a page is found by walking the conversations (SQLite).
WALK_ABOVE_HITS = 1_000
# How many conversations a walk passes over before the rest is found hits first.
WALK_WINDOW = 2_000


def _fts_query(words: list[str]) -> str:
    # Every word as a quoted phrase: user text never reaches FTS5's query syntax.
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def _fts_hits(words: list[str]) -> TextualSelect:
    """The rowids of the messages holding every word."""
    if not all(map(words_of, words)):
        # A word with nothing the index keeps (`!!!`, an emoji) is in no message. FTS5 passes
        # over its empty phrase and matches the other words alone, where PostgreSQL's query
        # (`_tsquery`) and the blind index find nothing.
        return text("SELECT rowid FROM message_fts WHERE 0").columns(column("rowid", Integer))
    return (
        text("SELECT rowid FROM message_fts WHERE message_fts MATCH :q")
        .bindparams(q=_fts_query(words))
        .columns(column("rowid", Integer))
    )


def many_hits(words: list[str]) -> Select[tuple[int]]:
    """SQLite: a row when more than WALK_ABOVE_HITS messages match (it reads no more)."""
    hits = _fts_hits(words).subquery()
    return select(hits.c.rowid).limit(1).offset(WALK_ABOVE_HITS)


def has_matching_message(
    conversation_id: ColumnElement[str], words: list[str]
) -> ColumnElement[bool]:
    """SQLite: the conversation holds a message with every word (a probe per conversation)."""
    return exists().where(M.c.conversation_id == conversation_id, M.c.id.in_(_fts_hits(words)))


def conversations_matching(words: list[str], *, sqlite: bool) -> Select[tuple[str]]:
    """The ids of conversations with a message that holds every word."""
    if sqlite:
        return select(M.c.conversation_id).where(M.c.id.in_(_fts_hits(words)))
    # The matching messages first, from the GIN index, then the conversations among them:
    # left to itself the planner walks the conversations newest first and probes each one's
    # messages, which for a rare word reads the whole table (1.5 s at a million messages).
    query = _tsquery(words)
    indexed = func.to_tsvector("simple", func.coalesce(M.c.search_text, ""))
    hits = (
        select(M.c.conversation_id)
        .where(false() if query is None else indexed.op("@@")(query))
        .cte("search_hits")
        .prefix_with("MATERIALIZED")
    )
    return select(hits.c.conversation_id)


def _tsquery(given: list[str]) -> ColumnElement[Any] | None:
    """PostgreSQL: every word of the search, each split as the rows' words were (a word of
    several, `brown-fox`, is their phrase, as FTS5 reads a quoted word on SQLite). None when
    a word has nothing to find in it (`!!!`): then no message matches, as on SQLite."""
    phrases = [" ".join(words_of(word)) for word in given]
    if not all(phrases):
        return None
    queries: list[ColumnElement[Any]] = [func.phraseto_tsquery("simple", p) for p in phrases]
    # Joined pairwise, not in a chain: the expression's depth, which SQLAlchemy's compiler
    # recurses through, grows with the log of the number of words, not with it.
    while len(queries) > 1:
        pairs = zip(queries[::2], queries[1::2], strict=False)
        joined = [a.op("&&")(b) for a, b in pairs]
        queries = joined + queries[len(joined) * 2 :]
    return queries[0]
