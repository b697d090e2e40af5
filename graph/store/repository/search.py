"""Full-text search of message content: FTS5 on SQLite, a GIN tsvector index on PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Integer, Select, column, func, select, text

from graph.store.tables import message as M


def conversations_matching(words: list[str], *, sqlite: bool) -> Select[tuple[str]]:
    """The ids of conversations with a message that holds every word."""
    if sqlite:
        # Every word as a quoted phrase: user text never reaches FTS5's query syntax.
        match = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        fts = (
            text("SELECT rowid FROM message_fts WHERE message_fts MATCH :q")
            .bindparams(q=match)
            .columns(column("rowid", Integer))
        )
        return select(M.c.conversation_id).where(M.c.id.in_(fts))
    # The matching messages first, from the GIN index, then the conversations among them:
    # left to itself the planner walks the conversations newest first and probes each one's
    # messages, which for a rare word reads the whole table (1.5 s at a million messages).
    hits = (
        select(M.c.conversation_id)
        .where(
            func.to_tsvector("simple", func.coalesce(M.c.search_text, "")).op("@@")(
                func.plainto_tsquery("simple", " ".join(words))
            )
        )
        .cte("search_hits")
        .prefix_with("MATERIALIZED")
    )
    return select(hits.c.conversation_id)
