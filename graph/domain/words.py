"""The words of a text, as every search of convograph sees them.

SQLite's full-text index splits a text with FTS5's `unicode61` tokenizer (`remove_diacritics
2`): runs of letters and digits, case folded, accents removed; everything else, punctuation,
symbols and emoji, separates words. PostgreSQL's index and the blind index of encrypted
content are given the words this module finds, so that one search finds the same messages
on either backend, encrypted or not: `café` is found by `cafe`, `alice@example.org` by
`alice`, `brown-fox` by `brown fox`. (Case is folded fully, so `ß` is `ss`, and compatibility
forms such as `ﬁ` are their letters, where FTS5 keeps them: the blind index's digests were
made so, and changing them would lose what is indexed.)
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The words of `text`: runs of letters and digits, case folded, accents removed."""
    if text.isascii():  # nothing to fold or strip but case: the common text, kept cheap
        return _WORD.findall(text.lower())
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _WORD.findall(plain)


def indexed_text(text: str | None) -> str | None:
    """`text` as a PostgreSQL index reads it: its words, in order, one space apart."""
    if text is None:
        return None
    return " ".join(words(text)) or None
