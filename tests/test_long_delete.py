"""Deleting a long conversation with its child transcripts.

On SQLite the messages of a long conversation go in shares before its row, the rest of the
process let in between (bench/big_delete.py measures that); the delete must still be one:
a read meanwhile finds the whole conversation or none of it, and afterwards nothing of the
tree is left (messages, search index entries, workspace figures), on both backends.
"""

from __future__ import annotations

import asyncio

import pytest

from graph.settings import Settings
from graph.store.repository import conversations
from tests.conftest import GraphQLClient, Server
from tests.operations import DELETE, append, create, delegate, read
from tests.test_search_index import assert_index_consistent

PER_SHARE = 40
FIGURES = "{ workspaceFigures { conversations messages storedBytes } }"
SEARCH = "query($q: String) { conversations(filter: {search: $q}) { nodes { id } } }"


@pytest.fixture
def small_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversations, "MESSAGES_PER_SHARE", PER_SHARE)


async def fill(gql: GraphQLClient, conversation_id: str, count: int, word: str) -> None:
    await append(gql, conversation_id, *(f"{word} turn {n}" for n in range(count)))


@pytest.mark.usefixtures("small_shares")
async def test_a_long_tree_goes_whole_and_reads_meanwhile_see_all_of_it_or_nothing(
    gql: GraphQLClient, settings: Settings, server: Server
) -> None:
    before = (await gql(FIGURES))["workspaceFigures"]
    root = await create(gql)
    await fill(gql, root, 3 * PER_SHARE + 7, "zebra")  # three shares and part of a fourth
    child = (await delegate(gql, root))["childConversation"]["id"]
    await fill(gql, child, PER_SHARE + 1, "okapi")
    kept = await create(gql)
    await fill(gql, kept, 3, "zebra")
    whole = await read(gql, root)
    assert whole is not None and len(whole["transcript"]) == 3 * PER_SHARE + 7

    # Each read: how much of the conversation it found, and whether a share of the delete had
    # run (on SQLite) before it began.
    seen: list[tuple[int | None, bool]] = []
    deleting = asyncio.Event()
    async with server.statements(lambda sql: sql.startswith("DELETE FROM message")) as shares:

        async def reader() -> None:
            while not deleting.is_set():
                mid = bool(shares)
                found = await read(gql, root)
                seen.append((None if found is None else len(found["transcript"]), mid))
                await asyncio.sleep(0)

        reading = asyncio.create_task(reader())
        await asyncio.sleep(0.05)
        assert (await gql(DELETE, {"id": root}))["deleteConversation"]["deleted"] is True
        deleting.set()
        await reading
    assert seen and {n for n, _ in seen} <= {3 * PER_SHARE + 7, None}, seen
    if settings.sqlite_path is not None:
        # Answered between the shares: the delete did not hold the process for all of it.
        assert len(shares) >= 5 and [n for n, mid in seen if mid], (len(shares), seen)

    assert await read(gql, root) is None
    assert await read(gql, child) is None
    for word, left in (("zebra", [kept]), ("okapi", [])):
        hits = (await gql(SEARCH, {"q": word}))["conversations"]["nodes"]
        assert [h["id"] for h in hits] == left
    after = (await gql(FIGURES))["workspaceFigures"]
    kept_figures = await read(gql, kept)
    assert kept_figures is not None
    assert after["conversations"] == before["conversations"] + 1
    assert after["messages"] == before["messages"] + 3
    assert_index_consistent(settings)
