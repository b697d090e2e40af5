"""With encryption on, each complete block of 64 messages is also sealed as one value, so
that a whole transcript opens one value per block (domain/chunks.py). Through the API, on
both backends: transcripts read back exactly from any `fromSeq`, in the process that wrote
them and in a new one, after appends of every size and after replaces that keep part of a
block; the blocks are sealed, and go with their messages and their conversation."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from graph.domain.chunks import SIZE
from graph.settings import Settings
from tests.conftest import GraphQLClient, Server
from tests.operations import DELETE, create
from tests.test_auth import stored_bytes
from tests.test_encryption import KEY, cli, copy_sqlite, encrypted, remove_sqlite, serving

# The key store fixture: a schema of the test's own on PostgreSQL.
from tests.test_encryption import settings as settings
from tests.test_isolation import ok

TRANSCRIPT = "query($id: ID!, $from: Int) { conversation(id: $id) { transcript(fromSeq: $from) } }"
FROM = (1, 2, SIZE - 1, SIZE, SIZE + 1, 100, 2 * SIZE, 2 * SIZE + 1, 149, 150, 151)


def said(n: int, tag: str) -> list[dict[str, Any]]:
    """`n` messages, of varied shapes and sizes, each one different."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i % 3 == 0:
            out.append({"role": "user", "content": f"{tag} {i} " + "é🦓\n," * (i % 7)})
        elif i % 3 == 1:
            out.append({"role": "assistant", "content": [{"type": "text", "text": f"{tag}{i}"}]})
        else:
            out.append({"role": "tool", "content": f"{tag}-{i}", "extra": {"n": i, "x": 1.5}})
    return out


async def append(gql: GraphQLClient, cid: str, messages: list[dict[str, Any]]) -> None:
    await ok(gql, "appendMessages", {"conversationId": cid, "messages": messages})


async def replace(gql: GraphQLClient, cid: str, messages: list[dict[str, Any]]) -> None:
    await ok(gql, "replaceTranscript", {"conversationId": cid, "messages": messages})


async def assert_reads(gql: GraphQLClient, cid: str, expected: list[dict[str, Any]]) -> None:
    for start in FROM:
        got = await gql(TRANSCRIPT, {"id": cid, "from": start})
        assert got["conversation"]["transcript"] == expected[start - 1 :], start


async def blocks(server: Server, cid: str) -> list[tuple[int, int]]:
    async with server.services.db.read() as conn:
        found = await conn.execute(
            text(
                "SELECT first_seq, last_seq FROM message_chunk WHERE conversation_id = :id "
                "ORDER BY first_seq"
            ),
            {"id": cid},
        )
        return [(int(a), int(b)) for a, b in found.all()]


async def drop_block(server: Server, cid: str, first: int = 1) -> None:
    """As a transcript sealed before blocks were kept has none for its first messages (or
    one whose block was not formed)."""
    async with server.services.db.write() as conn:
        await conn.execute(
            text("DELETE FROM message_chunk WHERE conversation_id = :id AND first_seq = :first"),
            {"id": cid, "first": first},
        )


async def test_a_long_transcript_reads_back_exactly_in_this_process_and_a_new_one(
    settings: Settings,
) -> None:
    written = said(150, "m")
    async with serving(encrypted(settings)) as (server, gql):
        cid = await create(gql)
        # One at a time across the first block's end, then batches that end inside a
        # block, complete one, or complete one and start the next.
        for message in written[:70]:
            await append(gql, cid, [message])
        await append(gql, cid, written[70:100])
        await append(gql, cid, written[100:150])
        assert await blocks(server, cid) == [(1, SIZE), (SIZE + 1, 2 * SIZE)]
        await assert_reads(gql, cid, written)
    # A new process: nothing opened yet, every block and row opened from what is stored.
    async with serving(encrypted(settings)) as (_, gql):
        await assert_reads(gql, cid, written)


async def test_a_replace_that_keeps_part_of_a_block_reads_back_the_new_transcript(
    settings: Settings,
) -> None:
    first = said(150, "a")
    async with serving(encrypted(settings)) as (server, gql):
        cid = await create(gql)
        await append(gql, cid, first)
        # Keeps 100: the second block loses its end, and is sealed again from the kept
        # messages and the new ones.
        second = first[:100] + said(40, "b")
        await replace(gql, cid, second)
        assert await blocks(server, cid) == [(1, SIZE), (SIZE + 1, 2 * SIZE)]
        await assert_reads(gql, cid, second)
        # Keeps 30: no block is complete any more.
        third = second[:30]
        await replace(gql, cid, third)
        assert await blocks(server, cid) == []
        await assert_reads(gql, cid, third)
        # Keeps nothing, writes two blocks and more at once.
        fourth = said(140, "c")
        await replace(gql, cid, fourth)
        assert await blocks(server, cid) == [(1, SIZE), (SIZE + 1, 2 * SIZE)]
        await assert_reads(gql, cid, fourth)
    async with serving(encrypted(settings)) as (_, gql):
        await assert_reads(gql, cid, fourth)


async def test_blocks_are_sealed_and_go_with_their_conversation(settings: Settings) -> None:
    marker = uuid.uuid4().hex
    async with serving(encrypted(settings)) as (server, gql):
        cid = await create(gql)
        await append(gql, cid, [{"role": "user", "content": f"{marker} {i}"} for i in range(SIZE)])
        assert await blocks(server, cid) == [(1, SIZE)]
        assert marker.encode() not in await stored_bytes(server)
        deleted = await gql(DELETE, {"id": cid})
        assert deleted["deleteConversation"]["deleted"] is True
        assert await blocks(server, cid) == []


async def test_without_encryption_no_block_is_kept(settings: Settings) -> None:
    async with serving(settings.replace(encryption_key=None)) as (server, gql):
        cid = await create(gql)
        written = said(SIZE + 1, "p")
        await append(gql, cid, written)
        assert await blocks(server, cid) == []
        await assert_reads(gql, cid, written)


async def test_a_transcript_missing_a_block_reads_from_its_rows(settings: Settings) -> None:
    """A transcript encrypted before blocks were kept has none for its older messages (or
    later ones only): what the blocks do not cover in one run is read from the rows."""
    written = said(150, "g")
    async with serving(encrypted(settings)) as (server, gql):
        cid = await create(gql)
        await append(gql, cid, written)
        await drop_block(server, cid)
        assert await blocks(server, cid) == [(SIZE + 1, 2 * SIZE)]
        await assert_reads(gql, cid, written)


async def test_encrypt_existing_seals_the_blocks_of_old_transcripts(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    written = said(150, "o")
    async with serving(settings.replace(encryption_key=None)) as (_, gql):
        cid = await create(gql)
        await append(gql, cid, written)
    await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
    assert "transcript blocks: sealed 2" in capsys.readouterr().out
    await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
    assert "transcript blocks: sealed 0" in capsys.readouterr().out  # resumable
    async with serving(encrypted(settings)) as (server, gql):
        assert await blocks(server, cid) == [(1, SIZE), (SIZE + 1, 2 * SIZE)]
        await assert_reads(gql, cid, written)
        # The blocks the next writes complete follow on.
        more = said(2 * SIZE, "n")
        await append(gql, cid, more)
        assert await blocks(server, cid) == [(i * SIZE + 1, (i + 1) * SIZE) for i in range(4)]
        await assert_reads(gql, cid, written + more)


SEVERAL = """
query($a: ID!, $b: ID!, $c: ID!, $d: ID!, $from: Int) {
  a: conversation(id: $a) { transcript(fromSeq: $from) }
  b: conversation(id: $b) { transcript(fromSeq: $from) }
  c: conversation(id: $c) { transcript(fromSeq: $from) }
  d: conversation(id: $d) { transcript }
}
"""


async def test_several_transcripts_read_in_one_query_read_back_exactly(
    settings: Settings,
) -> None:
    """A dashboard reads a tree's transcripts in one statement: each from its blocks and
    rows, one with a block missing from its rows alone."""
    sizes = {"a": 150, "b": 70, "c": 30, "d": 2 * SIZE}
    written = {name: said(n, name) for name, n in sizes.items()}
    async with serving(encrypted(settings)) as (server, gql):
        ids = {}
        for name, messages in written.items():
            ids[name] = await create(gql)
            await append(gql, ids[name], messages)
        await drop_block(server, ids["d"])
        for start in FROM:
            got = await gql(SEVERAL, {**ids, "from": start})
            for name in ("a", "b", "c"):
                assert got[name]["transcript"] == written[name][start - 1 :], (name, start)
            assert got["d"]["transcript"] == written["d"]
    async with serving(encrypted(settings)) as (_, gql):
        got = await gql(SEVERAL, {**ids, "from": 2})
        assert {name: got[name]["transcript"] for name in ids} == {
            "a": written["a"][1:],
            "b": written["b"][1:],
            "c": written["c"][1:],
            "d": written["d"],
        }


async def test_a_copy_restored_after_a_delete_cannot_read_its_blocks(
    settings: Settings, tmp_path: Path
) -> None:
    """Crypto-shredding holds for blocks: they are sealed under their conversation's key."""
    if not settings.is_sqlite:
        pytest.skip("the file copy is SQLite's; PostgreSQL shares the key store's code")
    path = settings.sqlite_path
    assert path is not None
    written = {name: said(150, name) for name in ("victim", "keeper")}
    async with serving(encrypted(settings)) as (server, gql):
        ids = {name: await create(gql) for name in written}
        for name, messages in written.items():
            await append(gql, ids[name], messages)
        copy_sqlite(path, tmp_path / "backup.db")
        await gql(DELETE, {"id": ids["victim"]})
    remove_sqlite(path, "-wal", "-shm")
    (tmp_path / "backup.db").replace(path)
    both = """query($a: ID!, $b: ID!) {
      a: conversation(id: $a) { transcript } b: conversation(id: $b) { transcript } }"""
    async with serving(encrypted(settings)) as (server, gql):
        assert await blocks(server, ids["victim"]) == [(1, SIZE), (SIZE + 1, 2 * SIZE)]
        got = await gql(both, {"a": ids["victim"], "b": ids["keeper"]})
        assert got == {"a": None, "b": {"transcript": written["keeper"]}}
        await assert_reads(gql, ids["keeper"], written["keeper"])


def test_the_migration_finds_blocks_as_the_domain_sizes_them() -> None:
    """Migration 0014's trigger finds a deleted message's block by the block size."""
    import importlib.util

    import graph.store

    versions = Path(graph.store.__file__).parent / "migrations" / "versions"
    path = versions / "0014_message_chunks.py"
    spec = importlib.util.spec_from_file_location("migration_0014", path)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    assert migration.SIZE == SIZE


async def test_a_block_goes_with_any_delete_of_its_messages(settings: Settings) -> None:
    """Whoever deletes message rows (a replica of the release before blocks, replacing a
    transcript during a rolling upgrade), the database drops the blocks that held them."""
    written = said(150, "r")
    async with serving(encrypted(settings)) as (server, gql):
        cid = await create(gql)
        await append(gql, cid, written)
        async with server.services.db.write() as conn:
            await conn.execute(
                text("DELETE FROM message WHERE conversation_id = :id AND seq > 100"), {"id": cid}
            )
        assert await blocks(server, cid) == [(1, SIZE)]
        got = await gql(TRANSCRIPT, {"id": cid, "from": 1})
        assert got["conversation"]["transcript"] == written[:100]


async def test_concurrent_appends_read_the_same_from_blocks_as_from_rows(
    settings: Settings,
) -> None:
    """Writers appending to one transcript at once (SQLite shares their commits, PostgreSQL
    serialises them on the conversation): the transcript read through its blocks is the
    one its rows hold, message for message."""
    async with serving(encrypted(settings)) as (server, gql):
        cid = await create(gql)

        async def writer(name: str) -> None:
            for message in said(25, name):
                await append(gql, cid, [message])

        await asyncio.gather(*(writer(f"w{i}") for i in range(8)))
        assert await blocks(server, cid) == [
            (1, SIZE),
            (SIZE + 1, 2 * SIZE),
            (2 * SIZE + 1, 3 * SIZE),
        ]
        rows: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            page = await gql(
                """query($id: ID!, $after: String) { conversation(id: $id) {
                  messages(first: 100, after: $after) {
                    nodes { seq data } pageInfo { hasNextPage endCursor } } } }""",
                {"id": cid, "after": after},
            )
            found = page["conversation"]["messages"]
            rows.extend(node["data"] for node in found["nodes"])
            if not found["pageInfo"]["hasNextPage"]:
                break
            after = found["pageInfo"]["endCursor"]
        assert len(rows) == 200
        await assert_reads(gql, cid, rows)


async def test_encrypt_existing_seals_a_block_missing_between_others(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    written = said(3 * SIZE + 5, "h")
    async with serving(encrypted(settings)) as (server, gql):
        cid = await create(gql)
        await append(gql, cid, written)
        await drop_block(server, cid, SIZE + 1)
        assert await blocks(server, cid) == [(1, SIZE), (2 * SIZE + 1, 3 * SIZE)]
    await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
    assert "transcript blocks: sealed 1" in capsys.readouterr().out
    async with serving(encrypted(settings)) as (server, gql):
        assert await blocks(server, cid) == [(i * SIZE + 1, (i + 1) * SIZE) for i in range(3)]
        await assert_reads(gql, cid, written)
