"""One search finds the same conversations on SQLite and PostgreSQL, encrypted or not: both
indexes hold a message's words as SQLite's tokenizer splits them (graph/domain/words.py).

Before, PostgreSQL's parser kept `alice@example.org` and URLs as one token, accents, and
hyphenated words whole: `cafe`, `alice`, `example` and `brown-fox` found nothing there.
Revision 0016 rewrote the rows written before it (PostgreSQL)."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import text

from graph.domain import jsoncodec
from graph.domain.conversations import MAX_SEARCH_WORD_BYTES
from graph.domain.messages import search_text
from graph.settings import Settings
from tests.conftest import GraphQLClient
from tests.migrations import before_encryption, columns_after
from tests.operations import APPEND
from tests.test_quotas import serving_as
from tests.test_search_index import SEARCH, found, new

TEXTS = {
    "accents": "Un café crème, Überprüfung",
    "address": "write to alice@example.org or see https://docs.example.com/guide",
    "words": "the quick brown fox jumps",
}
# (search, the texts it finds): on every backend, with encryption on or off.
SEARCHES = [
    ("cafe", {"accents"}),
    ("CAFÉ", {"accents"}),
    ("uberprufung", {"accents"}),
    ("alice", {"address"}),
    ("example", {"address"}),
    ("docs.example.com", {"address"}),
    ("guide", {"address"}),
    ("brown-fox", {"words"}),
    ("quick fox", {"words"}),
    ("!!!", set()),
    ("example fox", set()),
    # A word with no letter or digit is in no message, beside other words too (SQLite found
    # the other words' messages, PostgreSQL and the blind index nothing).
    ("quick !!!", set()),
    ("🎉 fox", set()),
    ("brown - fox", set()),
]


async def seeded(gql: GraphQLClient) -> dict[str, str]:
    """A conversation per text: its id, by the text's name."""
    ids = {}
    for name, said in TEXTS.items():
        cid = await new(gql)
        payload = await gql(APPEND, {"id": cid, "m": [{"role": "user", "content": said}]})
        assert payload["appendMessages"]["userErrors"] == []
        ids[name] = cid
    return ids


@pytest.mark.parametrize(("search", "names"), SEARCHES)
async def test_a_search_finds_the_same_messages_on_every_backend(
    gql: GraphQLClient, search: str, names: set[str]
) -> None:
    ids = await seeded(gql)
    assert await found(gql, search) == {ids[name] for name in names}


async def test_revision_0016_rewrites_the_words_postgresql_stored_before_it(
    settings: Settings,
) -> None:
    if settings.sqlite_path is not None:
        pytest.skip("SQLite's index splits the text itself: the revision does nothing there")
    settings = before_encryption(settings)
    async with serving_as(settings) as (server, gql):
        ids = await seeded(gql)
        # The rows as a release before it stored them: the strings of the content, as sent.
        async with server.services.db.write() as conn:
            rows = await conn.execute(text("SELECT id, data FROM message"))
            for mid, data in rows.all():
                raw = search_text(jsoncodec.loads(data))
                await conn.execute(
                    text("UPDATE message SET search_text = :t WHERE id = :id"),
                    {"t": raw, "id": mid},
                )
        assert await found(gql, "alice") == set()

    def back(config: Config) -> None:
        command.stamp(config, "0015")

    def up(config: Config) -> None:
        command.upgrade(config, "0016")  # this revision alone: the later ones stand
        command.stamp(config, "head")

    await columns_after(settings, "message", back)
    await columns_after(settings, "message", up)
    async with serving_as(settings) as (_, gql):
        for search, names in SEARCHES:
            assert await found(gql, search) == {ids[name] for name in names}, search


async def test_a_word_past_postgresql_s_longest_is_refused_on_every_backend(
    gql: GraphQLClient,
) -> None:
    # PostgreSQL's index keeps no word past 2,047 bytes: before, such a word found its
    # message on SQLite and nothing on PostgreSQL, and beside another word it was dropped
    # there, so `foo <long word>` found every conversation holding `foo`.
    longest, too_long = "y" * MAX_SEARCH_WORD_BYTES, "y" * (MAX_SEARCH_WORD_BYTES + 1)
    wide = "日" * (MAX_SEARCH_WORD_BYTES // 3 + 1)  # 2,049 bytes in 683 characters
    ids = {}
    for name, said in {"foo": "foo only", "long": f"foo {too_long}", "longest": longest}.items():
        ids[name] = cid = await new(gql)
        payload = await gql(APPEND, {"id": cid, "m": [{"role": "user", "content": said}]})
        assert payload["appendMessages"]["userErrors"] == []
    assert await found(gql, longest) == {ids["longest"]}
    assert await found(gql, "foo") == {ids["foo"], ids["long"]}
    for search in (too_long, f"foo {too_long}", f"brown-{too_long}", wide):
        response = await gql.post(SEARCH, {"q": search})
        errors = response.json()["errors"]
        assert [e["extensions"]["code"] for e in errors] == ["LIMIT_EXCEEDED"], errors
        assert errors[0]["extensions"]["field"] == ["filter", "search"]
        assert f"at most {MAX_SEARCH_WORD_BYTES} bytes" in errors[0]["message"]
