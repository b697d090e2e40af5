"""SQLite: messages stored compressed once a dictionary is trained on the database's own
(store/compression.py). Read back exactly, found by a search, taken out of the index when
deleted, counted by the quotas as the JSON they hold, sealed by `keys encrypt-existing`, and
read by a process that did not train the dictionary. Turned off by a setting."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import zstandard
from alembic import command

from graph.settings import Settings
from graph.store.compression import MAGIC, SAMPLE_EVERY, WINDOW
from graph.store.dictionary_training import TRAIN_AT
from graph.store.migrate import upgrade
from tests.conftest import GraphQLClient
from tests.migrations import columns_after
from tests.operations import APPEND, DELETE, READ, REPLACE, create
from tests.test_encryption import KEY, cli, encrypted
from tests.test_encryption import serving as serving_with_token
from tests.test_search_index import assert_index_consistent

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SEARCH = "query($q: String) { conversations(filter: {search: $q}) { nodes { id } } }"
MESSAGES = """query($id: ID!, $after: String) { conversation(id: $id) {
  messages(first: 20, after: $after) { nodes { seq data } pageInfo { endCursor } } } }"""
FIGURES = "{ workspaceFigures { messages storedBytes } }"
APPEND_SAYING = """mutation($id: ID!, $m: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $m}) { userErrors { code message } } }"""

_WORDS = [
    "".join(random.Random(i).choices("etaoinshrdlucmfwypvbgk", k=3 + i % 8)) for i in range(600)
]


def prose(rng: random.Random, words: int = 40) -> str:
    return " ".join(rng.choices(_WORDS, k=words))


def turns(rng: random.Random, count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": prose(rng)} for i in range(count)
    ]


# Messages whose exact form a reader relies on: numbers past 64 bits and doubles as written,
# key order, escapes, a NUL (its words kept in a column of their own), astral characters.
TRICKY: list[dict[str, Any]] = [
    {"role": "user", "content": "ünïcödé 🦓 " + "x" * 300, "n": 12345678901234567890123},
    {"role": "tool", "content": [{"type": "text", "text": "nested zebra"}], "z": 1, "a": 1.5},
    {"role": "user", "content": 'line\nbreak "quoted" \\ back \u0000 nul quagga', "e": -0.0},
    {"role": "assistant", "content": "short"},
]


def stored(path: Path, cid: str) -> list[Any]:
    """The `data` of a conversation's message rows, as SQLite holds them."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT data FROM message WHERE conversation_id = ? ORDER BY seq", (cid,)
        ).fetchall()
    return [row[0] for row in rows]


def dictionaries(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM message_dictionary").fetchone()[0])


async def append(gql: GraphQLClient, cid: str, messages: list[dict[str, Any]]) -> None:
    payload = (await gql(APPEND, {"id": cid, "m": messages}))["appendMessages"]
    assert payload["userErrors"] == []


async def trained(gql: GraphQLClient, path: Path, rng: random.Random) -> str:
    """A conversation of TRAIN_AT varied messages, written until the server has trained its
    dictionary (a check follows writes, at most once a second); its id."""
    cid = await create(gql)
    for _ in range(TRAIN_AT // 500):
        await append(gql, cid, turns(rng, 500))
    for _ in range(50):
        if dictionaries(path):
            break
        await asyncio.sleep(0.2)
        await append(gql, cid, turns(rng, 1))  # a write: the next check follows it
    assert dictionaries(path) == 1
    await asyncio.sleep(0.3)  # the check that stored it has learnt it
    return cid


async def compressed_conversation(
    settings: Settings, rng: random.Random
) -> tuple[str, list[dict[str, Any]]]:
    """A server of its own trains its dictionary, then stores a conversation of 20 messages
    compressed; (its id, its messages)."""
    async with serving_with_token(settings) as (_, gql):
        await trained(gql, compressing(settings), rng)
        cid = await create(gql)
        messages = turns(rng, 20)
        await append(gql, cid, messages)
    return cid, messages


def compressing(settings: Settings) -> Path:
    if settings.sqlite_path is None or settings.encryption_on:
        pytest.skip("SQLite without encryption only")
    return settings.sqlite_path


async def test_compressed_messages_read_back_exactly_and_are_found(
    settings: Settings, server: Any, gql: GraphQLClient
) -> None:
    path = compressing(settings)
    rng = random.Random(1)
    first = await trained(gql, path, rng)
    assert all(isinstance(v, str) for v in stored(path, first)[:TRAIN_AT])  # before it: text
    cid = await create(gql)
    later = [*turns(rng, 30), *TRICKY]
    await append(gql, cid, later)
    rows = stored(path, cid)
    frames = [v for v in rows if isinstance(v, bytes)]
    assert len(frames) >= 30 and all(v.startswith(MAGIC) for v in frames)
    assert sum(map(len, frames)) < 0.6 * sum(
        len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode())
        for m, v in zip(later, rows, strict=True)
        if isinstance(v, bytes)
    )
    # Exactly as sent: the transcript's JSON text, and a page of messages.
    response = await gql.post(READ, {"id": cid})
    assert '"n":12345678901234567890123' in response.text and '"z":1,"a":1.5' in response.text
    assert response.json()["data"]["conversation"]["transcript"] == json.loads(json.dumps(later))
    page = (await gql(MESSAGES, {"id": cid, "after": None}))["conversation"]["messages"]
    assert [n["data"] for n in page["nodes"]] == later[:20]
    # Found by words of their JSON, frames or not; gone from the index with them.
    words = later[5]["content"].split()
    for word in (words[0], "quagga", "zebra"):  # a frame, a row keeping its words, a part
        hits = await gql(SEARCH, {"q": word})
        assert cid in {n["id"] for n in hits["conversations"]["nodes"]}, word
    assert_index_consistent(settings)
    await gql(REPLACE, {"id": cid, "m": later[:10]})
    assert (await gql(SEARCH, {"q": "zebra"}))["conversations"]["nodes"] == []
    assert_index_consistent(settings)
    await gql(DELETE, {"id": cid})
    assert_index_consistent(settings)
    assert (await gql(SEARCH, {"q": "quagga"}))["conversations"]["nodes"] == []


async def test_a_replace_frees_the_json_bytes_of_compressed_messages(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    path = compressing(settings)
    rng = random.Random(2)
    async with serving_with_token(settings.replace(workspace_max_bytes=1_200_000)) as (_, gql):
        await trained(gql, path, rng)
        cid = await create(gql)
        messages = turns(rng, 40)
        await append(gql, cid, messages)
        assert any(isinstance(v, bytes) for v in stored(path, cid))
        await gql(REPLACE, {"id": cid, "m": messages[:5]})
        # The quota's own count, kept write by write, against the conversations' sums.
        figures = (await gql(FIGURES))["workspaceFigures"]["storedBytes"]
        big = [{"role": "user", "content": "y" * 1_000_000}]
        payload = (await gql(APPEND_SAYING, {"id": cid, "m": big}))["appendMessages"]
        assert [e["code"] for e in payload["userErrors"]] == ["STORAGE_FULL"]
        # The refusal's warning says what the quota counted (the answer does not say it).
        assert f"({figures:,} stored, this write adds" in caplog.text, (figures, caplog.text)


async def test_another_process_reads_and_deletes_what_this_one_compressed(
    settings: Settings,
) -> None:
    path = compressing(settings)
    rng = random.Random(3)
    cid, messages = await compressed_conversation(settings, rng)
    # With compression off this server trains nothing and loads no dictionary at start: it
    # meets the frames in its reads, its search index's view and its delete trigger.
    async with serving_with_token(settings.replace(sqlite_compression=False)) as (_, gql):
        assert (await gql(READ, {"id": cid}))["conversation"]["transcript"] == messages
        word = messages[3]["content"].split()[2]
        hits = (await gql(SEARCH, {"q": word}))["conversations"]["nodes"]
        assert cid in {n["id"] for n in hits}
        more = turns(rng, 5)
        await append(gql, cid, more)
        assert all(isinstance(v, str) for v in stored(path, cid)[20:])  # off: stored as text
        await gql(DELETE, {"id": cid})
        assert_index_consistent(settings)


async def test_encrypt_existing_seals_compressed_messages(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = compressing(settings)
    cid, messages = await compressed_conversation(settings, random.Random(4))
    assert any(isinstance(v, bytes) and v.startswith(MAGIC) for v in stored(path, cid))
    async with serving_with_token(encrypted(settings)) as (_, gql):  # read before sealing
        assert (await gql(READ, {"id": cid}))["conversation"]["transcript"] == messages
    await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
    said = capsys.readouterr().out
    assert "messages: sealed 0" not in said and "compression dictionaries (dropped): 1" in said
    assert not any(v.startswith(MAGIC) for v in stored(path, cid))
    # The dictionary held pieces of the messages' text: gone with it, nothing in clear left.
    assert dictionaries(path) == 0
    held = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    frequent = [w for w in _WORDS[:40] if len(w) >= 6]
    assert frequent and not [w for w in frequent if w.encode() in held]
    async with serving_with_token(encrypted(settings)) as (_, gql):
        assert (await gql(READ, {"id": cid}))["conversation"]["transcript"] == messages


async def test_a_downgrade_stores_every_message_as_text_again(
    settings: Settings, server: Any, gql: GraphQLClient
) -> None:
    path = compressing(settings)
    rng = random.Random(5)
    await trained(gql, path, rng)
    cid = await create(gql)
    messages = [*turns(rng, 20), *TRICKY]
    await append(gql, cid, messages)
    before = (await gql.post(READ, {"id": cid})).text
    assert any(isinstance(v, bytes) for v in stored(path, cid))

    tables = await columns_after(settings, "message", lambda c: command.downgrade(c, "0016"))
    assert "data" in tables
    held = stored(path, cid)
    assert all(isinstance(v, str) for v in held)
    assert [json.loads(v) for v in held] == json.loads(json.dumps(messages))
    with sqlite3.connect(path) as db:  # 0012's view and trigger, which know no frames
        gone = "SELECT count(*) FROM sqlite_schema WHERE name = 'message_dictionary'"
        assert db.execute(gone).fetchone() == (0,)
        assert "convograph_inflate" not in str(
            db.execute("SELECT sql FROM sqlite_schema").fetchall()
        )

    await columns_after(settings, "message", lambda c: command.upgrade(c, "head"))
    assert (await gql.post(READ, {"id": cid})).text == before
    word = messages[4]["content"].split()[1]
    assert cid in {n["id"] for n in (await gql(SEARCH, {"q": word}))["conversations"]["nodes"]}
    await gql(DELETE, {"id": cid})
    assert_index_consistent(settings)


async def test_messages_that_drift_from_the_dictionary_get_a_new_one(
    settings: Settings, server: Any, gql: GraphQLClient
) -> None:
    path = compressing(settings)
    notes = [{"role": "user", "content": f"note {i} of {i * 7}"} for i in range(TRAIN_AT)]
    first = await create(gql)
    await append(gql, first, notes)
    for _ in range(50):  # trained on the notes
        if dictionaries(path):
            break
        await asyncio.sleep(0.2)
        await append(gql, first, notes[:1])
    assert dictionaries(path) == 1
    await asyncio.sleep(0.3)
    # Then long messages of other words: the notes' dictionary no longer fits.
    rng = random.Random(6)
    cid = await create(gql)
    sent: list[dict[str, Any]] = []
    for _ in range(SAMPLE_EVERY * WINDOW // 1000 + 1):
        batch = turns(rng, 1000)
        await append(gql, cid, batch)
        sent += batch
    for _ in range(50):
        if dictionaries(path) == 2:
            break
        await asyncio.sleep(0.2)
        await append(gql, cid, batch[:1])
        sent += batch[:1]
    assert dictionaries(path) == 2
    await asyncio.sleep(0.3)
    later = turns(rng, 50)
    await append(gql, cid, later)
    sent += later
    used = {zstandard.get_frame_parameters(v).dict_id for v in stored(path, cid)[-50:]}
    assert used == {2}
    assert (await gql(READ, {"id": cid}))["conversation"]["transcript"] == sent
    assert (await gql(READ, {"id": first}))["conversation"]["transcript"][:TRAIN_AT] == notes


async def test_a_server_left_running_without_the_key_does_not_write_frames_of_a_dropped_dictionary(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = compressing(settings)
    rng = random.Random(7)
    async with serving_with_token(settings) as (server, gql):
        await trained(gql, path, rng)
        cid = await create(gql)
        before = turns(rng, 20)
        await append(gql, cid, before)
        # encrypt-existing while this server still runs without the key (not the README's
        # way, but an operator's slip must not lose data): it seals every message and drops
        # the dictionary no message uses any more.
        await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
        assert "compression dictionaries (dropped): 1" in capsys.readouterr().out
        after = turns(rng, 20)
        await append(gql, cid, after)
        assert all(isinstance(v, str) for v in stored(path, cid)[20:])  # text, not frames
        # Nor does it look for a dictionary after every write from then on.
        looked: list[str] = []
        stop = server.services.db.on_statement(
            lambda sql, _: looked.append(sql) if "message_dictionary" in sql else None
        )
        for _ in range(5):
            await asyncio.sleep(0.3)  # past the delay of a check a write would start
            one = turns(rng, 1)
            await append(gql, cid, one)
            after += one
        await asyncio.sleep(0.3)
        stop()
        assert len(looked) <= 1, looked
    async with serving_with_token(encrypted(settings)) as (_, gql):
        assert (await gql(READ, {"id": cid}))["conversation"]["transcript"] == before + after
        await gql(DELETE, {"id": cid})
        assert (await gql(READ, {"id": cid}))["conversation"] is None


async def test_the_cli_downgrades_to_text_and_upgrades_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = compressing(settings)
    cid, messages = await compressed_conversation(settings, random.Random(8))
    assert any(isinstance(v, bytes) for v in stored(path, cid))
    await cli(monkeypatch, settings, "migrate", "--downgrade-to", "0016")
    assert "database is at revision 0016" in capsys.readouterr().out
    assert [json.loads(v) for v in stored(path, cid)] == messages
    await cli(monkeypatch, settings, "migrate")
    async with serving_with_token(settings) as (_, gql):
        assert (await gql(READ, {"id": cid}))["conversation"]["transcript"] == messages
        await gql(DELETE, {"id": cid})


async def test_a_downgrade_that_fails_halfway_changes_nothing(settings: Settings) -> None:
    path = compressing(settings)
    await compressed_conversation(settings, random.Random(9))
    with sqlite3.connect(path) as db:  # the frames' dictionary replaced by another one
        db.execute("UPDATE message_dictionary SET id = 5")

    def schema() -> list[tuple[str, str, str]]:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT type, name, sql FROM sqlite_schema ORDER BY name").fetchall()

    await upgrade(settings, downgrade_to="0017")  # 0017's own downgrade is what is tried
    before = schema()
    with pytest.raises(KeyError):  # a frame names dictionary 1, which is not there
        await upgrade(settings, downgrade_to="0016")
    # One transaction: the view and trigger 0017 made, its revision and every row as before.
    assert schema() == before
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchone() == ("0017",)
        assert db.execute("SELECT count(*) FROM message WHERE typeof(data) = 'blob'").fetchone()[0]
