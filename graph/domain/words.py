"""The words of a text, as SQLite's full-text index splits it.

SQLite's index splits a text with FTS5's `unicode61` tokenizer (`remove_diacritics 2`): runs of
letters and digits, lower-cased, accents removed; everything else, punctuation, symbols and
emoji, separates words. PostgreSQL's index is given the words this module finds, so that one
search finds the same messages on either backend: `café` is found by `cafe`,
`alice@example.org` by `alice`, `brown-fox` by `brown fox`. Python's Unicode tables are not
FTS5's: characters outside the common scripts (a private-use character, a combining mark
with no letter before it, a character newer than SQLite's tables) may still be split or
kept differently.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+")
# The combining marks of the accented Latin letters (their canonical decompositions): the
# diacritics FTS5's `remove_diacritics` removes.
_LATIN_ACCENTS = frozenset(
    mark
    for code in range(0xC0, 0x2000)
    if unicodedata.name(chr(code), "").startswith("LATIN")
    for mark in unicodedata.normalize("NFD", chr(code))[1:]
)


def words(text: str) -> list[str]:
    """The words of `text`: runs of letters, digits and the accents of Latin letters (spaces,
    punctuation, symbols, controls and other marks separate them), case folded one letter to
    one, those accents removed (as FTS5 does: `ß` stays, `ά` and `й` keep theirs)."""
    if text.isascii():  # nothing to fold or strip but case: the common text, kept cheap
        return _WORD.findall(text.lower())
    return text.translate(_FOLDING).split()


def _fold(char: str) -> str:
    """`char` in a word: folded, "" for an accent, " " for a separator."""
    category = unicodedata.category(char)
    if category[0] == "M":
        # An accent of a Latin letter is removed (`a` + U+0301 is `a`); any other mark
        # separates words, as in FTS5's tables.
        return "" if char in _LATIN_ACCENTS else " "
    if category[0] in "ZPS" or category in ("Cc", "Cf", "Cs"):
        return " "
    folded = char.casefold()
    if len(folded) != 1:
        folded = char.lower()  # FTS5 folds a letter to one letter: `ß` is not `ss`
    decomposed = unicodedata.normalize("NFD", folded)
    if len(decomposed) > 1 and unicodedata.name(decomposed[0], "").startswith("LATIN"):
        return "".join(c for c in decomposed if not unicodedata.combining(c))
    return folded


class _Folding(dict[int, str]):
    """What str.translate makes of each character, worked out once per character."""

    def __missing__(self, code: int) -> str:
        if len(self) >= _FOLDED_KEPT:
            self.clear()
        folded = self[code] = _fold(chr(code))
        return folded


_FOLDED_KEPT = 65_536
_FOLDING = _Folding()


def indexed_text(text: str | None) -> str | None:
    """`text` as PostgreSQL's index reads it: its words, in order, one space apart."""
    if text is None:
        return None
    return " ".join(words(text)) or None
