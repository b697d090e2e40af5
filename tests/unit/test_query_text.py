"""A query text is refused before it is parsed past so many characters or lines (lines as
GraphQL counts them: each of \r\n, \n and \r ends one)."""

from __future__ import annotations

import pytest

from graph.server.parameters import query_text_problem


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("{ a }", False),
        ("\n" * 10, False),
        ("\n" * 11, True),
        ("\r\n" * 10, False),
        ("\r\n" * 11, True),
        ("\r" * 6 + "x" + "\n" * 5, True),  # eleven lines, though neither alone passes ten
        ("x" * 100, False),
        ("x" * 101, True),
        (None, False),
    ],
)
def test_a_query_text_past_its_characters_or_lines_is_refused(
    text: str | None, refused: bool
) -> None:
    assert (query_text_problem(text, max_chars=100, max_lines=10) is not None) is refused
