"""Figure 3: replaceTranscript of a stored 5,000-message transcript plus one new message.

Baseline: the same request shape writing those 5,000 messages into an empty conversation
(one replaceTranscript, the server started with CONVOGRAPH_MAX_MESSAGES_PER_CALL raised so one
call may carry them).  Both requests carry ~5,000 messages, so parsing and validating them is
paid on both sides; only the rows written differ.  Each repetition times the baseline into a
fresh conversation, then the one-new-message save into that same conversation, and checks in
the database file that the save wrote exactly one row and left the 5,000 others untouched.
On SQLite the search index takes new messages in batches after the write
(graph/search_index.py): each timed request is followed, inside its time, by a search, which
brings the index up to date first, so each side pays the indexing it causes.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from .peers.run_peers import make_messages
from .report import Figure, median, ms, ms_list
from .servers import REPLACE, Convograph, append_body, create_conversation, graphql_body

TARGET = 0.25
STORED = 5000


def _rows(db: Path, conversation_id: str) -> dict[int, tuple]:
    """The conversation's message rows by row id, read straight from the database file."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            "SELECT id, seq, digest, created_at FROM message WHERE conversation_id = ?",
            (conversation_id,),
        ).fetchall()
    return {row[0]: row for row in rows}


def _replace_body(conversation_id: str, messages: list[dict[str, str]]) -> bytes:
    return graphql_body(
        REPLACE, {"input": {"conversationId": conversation_id, "messages": messages}}
    )


SEARCH = graphql_body('{ conversations(filter: {search: "indexed"}, first: 1) { totalCount } }', {})


def _until_searchable(server: Convograph, body: bytes) -> float:
    return server.timed(body) + server.timed(SEARCH)


def run(server: Convograph, *, reps: int) -> Figure:
    messages = make_messages(STORED + 1)
    one = make_messages(1)
    scratch = create_conversation(server, "replace-append-one")
    full_ms: list[float] = []
    save_ms: list[float] = []
    append_ms: list[float] = []
    written: list[int] = []
    for rep in range(reps):
        conversation_id = create_conversation(server, f"replace-{rep}")
        full_ms.append(_until_searchable(server, _replace_body(conversation_id, messages[:STORED])))
        before = _rows(server.db_path, conversation_id)
        save_ms.append(_until_searchable(server, _replace_body(conversation_id, messages)))
        after = _rows(server.db_path, conversation_id)
        new = set(after) - set(before)
        kept = sum(1 for row_id, row in before.items() if after.get(row_id) == row)
        if len(before) != STORED or len(after) != STORED + 1 or kept != STORED:
            raise RuntimeError(
                f"the save left {len(after)} rows, {kept} of them untouched "
                f"(expected {STORED + 1}, {STORED})"
            )
        written.append(len(new))
        append_ms.append(server.timed(append_body(scratch, one)))

    save, full = median(save_ms), median(full_ms)
    ratio = round(save / full, 3)
    return Figure(
        name="replace_ratio",
        value=ratio,
        target=f"<= {TARGET}",
        met=ratio <= TARGET,
        detail=(
            f"replaceTranscript {STORED:,}+1 new {ms(save):.1f} ms vs {STORED:,} into an empty "
            f"conversation {ms(full):.1f} ms (one replaceTranscript each then a search, which "
            f"waits for the search index, HTTP, medians of "
            f"{reps}); rows written by the save: {sorted(set(written))}, {STORED:,} kept rows "
            f"untouched (id, digest, createdAt); one appendMessages of 1: "
            f"{ms(median(append_ms)):.2f} ms; CONVOGRAPH_MAX_MESSAGES_PER_CALL={STORED + 1} "
            f"for the saves"
        ),
        data={
            "save_ms": ms_list(save_ms),
            "full_ms": ms_list(full_ms),
            "append_one_ms": ms_list(append_ms),
            "rows_written_by_save": written,
        },
    )
