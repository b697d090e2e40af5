"""Encryption at rest, through the API against a real database: no content in clear in the
stored bytes, reads exactly as written, search over the blind index, crypto-shredding of a
restored copy, a wrong or missing master key refused at start, key rotation and the
encryption of a database written without it."""

from __future__ import annotations

import asyncio
import base64
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command as alembic
from alembic.config import Config
from sqlalchemy import inspect

from graph.__main__ import main
from graph.services import build_services
from graph.settings import Settings
from graph.store.encryption import EncryptionError
from graph.store.key_store import TOMBSTONE
from graph.store.retention import sweep
from tests.conftest import GraphQLClient, Server
from tests.lock_waits import lock_waiters
from tests.migrations import columns_after
from tests.operations import CREATE
from tests.pg_databases import admin
from tests.tcp_proxy import in_front_of
from tests.test_auth import stored_bytes
from tests.test_isolation import mutate, ok
from tests.test_sessions import checkpoint, delete, hydrate, session_doc

KEY = base64.b64encode(b"k" * 32).decode()
OTHER_KEY = base64.b64encode(b"o" * 32).decode()

HOLDINGS = """
query($c: ID!, $child: ID!, $s: String!, $word: String!, $summary: String!) {
  conversation(id: $c) {
    title metadata version messageCount transcript
    snapshots { nodes { id messageCount messages } }
    delegations { nodes { id status summary task } }
  }
  child: conversation(id: $child) { title messageCount transcript }
  sessionState(sessionId: $s) { version state }
  search: conversations(filter: {search: $word}) { nodes { id } }
  searchDelegations(query: $summary) { id summary }
}
"""


@pytest.fixture
async def settings(settings: Settings) -> AsyncIterator[Settings]:
    """The database's settings with a key store of the test's own (PostgreSQL: a schema,
    dropped after; the database's reset between tests empties only the data)."""
    if settings.is_sqlite:
        yield settings
        return
    schema = f"keys_{uuid.uuid4().hex[:12]}"
    yield settings.replace(encryption_key_schema=schema)
    await admin(settings.database_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@dataclass(frozen=True)
class Seeded:
    marker: str
    conversation: str
    child: str
    session: str

    @property
    def secrets(self) -> list[str]:
        """Every text the seed stored that must not be found in clear."""
        m = self.marker
        return [
            f"title{m}",
            f"meta{m}",
            f"word{m}",
            f"snap{m}",
            f"task{m}",
            f"summary{m}",
            f"fact{m}",
            f"tool{m}",
        ]


async def seed(client: GraphQLClient, marker: str | None = None) -> Seeded:
    """A conversation with every kind of content, marked so that it can be looked for."""
    m = marker or uuid.uuid4().hex[:12]
    created = await ok(
        client,
        "createConversation",
        {"title": f"title{m}", "metadata": {"note": f"meta{m}", "n": 1.50, "zoë": "\u00e9"}},
    )
    cid = created["conversation"]["id"]
    messages = [
        {"role": "user", "content": f"find word{m} please", "extra": {"b": 1, "a": [1.0, -0.0]}},
        {"role": "tool", "content": [{"type": "text", "text": f"tool{m} 🦓"}]},
    ]
    await ok(client, "appendMessages", {"conversationId": cid, "messages": messages})
    await ok(
        client,
        "saveSnapshot",
        {"conversationId": cid, "messages": [{"role": "user", "content": f"snap{m}"}]},
    )
    delegate = {"parentConversationId": cid, "delegatingTier": "lead", "targetTier": "worker"}
    done = await ok(client, "createDelegation", {**delegate, "task": f"task{m}"})
    await ok(
        client,
        "completeDelegation",
        {
            "delegationId": done["delegation"]["id"],
            "status": "COMPLETED",
            "summary": f"the summary{m} is here",
        },
    )
    session = f"session-{m}"
    state = {
        "session_id": session,
        "active_envelope": {"id": "env-1", "facts": [f"fact{m}"]},
        "logical_facts": [f"fact{m}"],
        "n": 2,
    }
    await ok(client, "checkpointSession", {"sessionId": session, "state": state})
    return Seeded(m, cid, done["delegation"]["childConversation"]["id"], session)


async def holdings(client: GraphQLClient, s: Seeded) -> dict[str, Any]:
    return await client(
        HOLDINGS,
        {
            "c": s.conversation,
            "child": s.child,
            "s": s.session,
            "word": f"word{s.marker}",
            "summary": f"SUMMARY{s.marker}",  # a substring, in other case
        },
    )


def encrypted(settings: Settings, key: str = KEY, **more: Any) -> Settings:
    return settings.replace(encryption_key=key, **more)


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[Server, GraphQLClient]]:
    from graph.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        server = Server(app, settings)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield server, GraphQLClient(http, await server.token())


# -- nothing in clear ---------------------------------------------------------------------


async def test_no_content_is_stored_in_clear(settings: Settings) -> None:
    async with serving(encrypted(settings)) as (server, gql):
        seeded = await seed(gql)
        first = await holdings(gql, seeded)
        # The event log and its replay: a subscription resuming reads the payloads back.
        stored = await stored_bytes(server)
        keys = (
            settings.resolved_key_store_file.read_bytes()
            if settings.is_sqlite
            else b""  # on PostgreSQL the key store is a schema: pg_dump above holds it
        )
    # The control: the rows are there, sealed.
    assert b"cvg1:c" + seeded.conversation.encode() in stored
    for secret in seeded.secrets:
        assert secret.encode() not in stored, secret
        assert secret.encode() not in keys, secret
    # And the reads are those of what was written.
    conversation = first["conversation"]
    assert conversation["title"] == f"title{seeded.marker}"
    assert conversation["metadata"] == {
        "note": f"meta{seeded.marker}",
        "n": 1.50,
        "zoë": "\u00e9",
    }
    assert conversation["transcript"][1]["content"][0]["text"] == f"tool{seeded.marker} 🦓"
    assert conversation["snapshots"]["nodes"][0]["messages"][0]["content"] == (
        f"snap{seeded.marker}"
    )
    assert conversation["delegations"]["nodes"][0]["task"] == f"task{seeded.marker}"
    assert first["sessionState"]["state"]["logical_facts"] == [f"fact{seeded.marker}"]
    assert first["search"]["nodes"] == [{"id": seeded.conversation}]
    assert [d["summary"] for d in first["searchDelegations"]] == [
        f"the summary{seeded.marker} is here"
    ]


async def test_reads_with_encryption_are_those_without(settings: Settings) -> None:
    """The same writes, with encryption off and on, read back the same (ids aside)."""
    if settings.sqlite_path is None:
        pytest.skip("PostgreSQL: the bad-input suites run with encryption on instead")
    answers = []
    for on in (False, True):
        changed = encrypted(settings) if on else settings.replace(encryption_key=None)
        async with serving(changed) as (_, gql):
            seeded = await seed(gql, marker="same")
            await ok(
                gql,
                "replaceTranscript",
                {
                    "conversationId": seeded.conversation,
                    "messages": [{"role": "user", "content": "find wordsame please"}],
                    "metadata": {"token_id": "t-1"},
                },
            )
            got = await holdings(gql, seeded)
            got["conversation"]["snapshots"]["nodes"][0].pop("id")
            got["conversation"]["delegations"]["nodes"][0].pop("id")
            got["searchDelegations"][0].pop("id")
            got["search"] = len(got["search"]["nodes"])
            answers.append(got)
        if on:
            break
        # The next round on a fresh database of its own.
        assert settings.sqlite_path is not None
        remove_sqlite(settings.sqlite_path, "", "-wal", "-shm")
        from graph.store.migrate import upgrade_blocking

        await asyncio.to_thread(upgrade_blocking, settings)
    assert answers[0] == answers[1]


async def test_a_pending_session_is_found_by_its_token_past_newer_ones_of_other_tokens(
    settings: Settings,
) -> None:
    """Sealed metadata is matched outside SQL: the lookup opened only the window's 50
    newest conversations, so a retried request whose session had 50 newer ones of other
    tokens (one owner serving many clients) was told there was none, and made another."""
    from tests.test_locks import RECENT

    async def session_of(gql: GraphQLClient, token_id: int) -> str:
        made = await ok(
            gql, "createConversation", {"context": "rest", "metadata": {"token_id": token_id}}
        )
        return str(made["conversation"]["id"])

    async def recent(gql: GraphQLClient, token_id: int) -> str | None:
        found = await gql(RECENT, {"context": "rest", "token": str(token_id)})
        pending = found["recentPendingConversation"]
        return None if pending is None else str(pending["id"])

    async with serving(encrypted(settings)) as (_, gql):
        retried = await session_of(gql, 1)
        others = [await session_of(gql, 2) for _ in range(120)]
        assert await recent(gql, 1) == retried
        assert await recent(gql, 2) == others[-1]
        assert await recent(gql, 3) is None


TRANSCRIPTS = """
query($a: ID!, $b: ID!) {
  a: conversation(id: $a) { transcript }
  b: conversation(id: $b) { transcript }
}
"""


async def test_a_transcript_read_again_shows_what_another_server_wrote_since(
    settings: Settings,
) -> None:
    """Reads find opened texts by the nonces of their stored values: a replica that read a
    transcript still reads, exactly, what another appended or replaced after."""
    async with (
        serving(encrypted(settings)) as (_, first),
        serving(encrypted(settings)) as (_, second),
    ):
        cids = []
        for name in ("a", "b"):
            created = await ok(first, "createConversation", {"title": name})
            cid = created["conversation"]["id"]
            said = [{"role": "user", "content": f"{name} {i}"} for i in range(3)]
            await ok(first, "appendMessages", {"conversationId": cid, "messages": said})
            cids.append(cid)
        one = "query($id: ID!) { conversation(id: $id) { transcript } }"
        both = {"a": cids[0], "b": cids[1]}
        before = await first(TRANSCRIPTS, both)
        assert (await first(one, {"id": cids[0]}))["conversation"] == before["a"]

        more = [{"role": "assistant", "content": "from the other replica"}]
        await ok(second, "appendMessages", {"conversationId": cids[0], "messages": more})
        replaced = [{"role": "user", "content": "b, replaced"}]
        await ok(second, "replaceTranscript", {"conversationId": cids[1], "messages": replaced})

        after = await first(TRANSCRIPTS, both)
        assert after == await second(TRANSCRIPTS, both)
        assert after["a"]["transcript"] == [*before["a"]["transcript"], *more]
        assert after["b"]["transcript"] == replaced
        assert (await first(one, {"id": cids[0]}))["conversation"] == after["a"]


# -- crypto-shredding ---------------------------------------------------------------------


def remove_sqlite(path: Path, *suffixes: str) -> None:
    for suffix in suffixes:
        Path(str(path) + suffix).unlink(missing_ok=True)


def copy_sqlite(source: Path, target: Path) -> None:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


async def test_a_copy_restored_after_a_delete_cannot_read_what_was_deleted(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not settings.is_sqlite:
        pytest.skip("the file copy is SQLite's; PostgreSQL shares the key store's code")
    on = encrypted(settings)
    path = settings.sqlite_path
    assert path is not None
    async with serving(on) as (_, gql):
        victim = await seed(gql)
        keeper = await seed(gql)
        kept = await holdings(gql, keeper)
        copy_sqlite(path, tmp_path / "backup.db")
        await gql(
            "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }",
            {"id": victim.conversation},
        )
        await gql(
            "mutation($s: String!) { deleteSessionState(input: {sessionId: $s}) { deleted } }",
            {"s": victim.session},
        )
    # The backup of the data, restored beside the key store as it is now.
    remove_sqlite(path, "-wal", "-shm")
    (tmp_path / "backup.db").replace(path)
    # The copy does hold the deleted conversation, sealed.
    assert f"cvg1:c{victim.conversation}".encode() in path.read_bytes()
    caplog.set_level(logging.WARNING, logger="convograph.encryption")
    async with serving(on) as (_, gql):
        lost = await holdings(gql, victim)
        assert lost["conversation"] is None
        assert lost["child"] is None
        assert lost["sessionState"] is None
        assert lost["search"]["nodes"] == []
        everything = await gql("{ conversations(first: 100) { nodes { id } } }")
        ids = {n["id"] for n in everything["conversations"]["nodes"]}
        assert victim.conversation not in ids and keeper.conversation in ids
        # Nor can it be written to.
        refused = await gql(
            """mutation($id: ID!) { updateConversation(input: {id: $id, title: "x"}) {
              userErrors { code field } } }""",
            {"id": victim.conversation},
        )
        assert refused["updateConversation"]["userErrors"] == [
            {"code": "NOT_FOUND", "field": ["id"]}
        ]
        appended = await gql(
            """mutation($id: ID!) { appendMessages(input: {conversationId: $id,
              messages: [{role: "user", content: "x"}]}) { userErrors { code field } } }""",
            {"id": victim.conversation},
        )
        assert appended["appendMessages"]["userErrors"] == [
            {"code": "NOT_FOUND", "field": ["conversationId"]}
        ]
        # Every other conversation reads back exactly.
        assert await holdings(gql, keeper) == kept
    assert f"conversation {victim.conversation} cannot be decrypted" in caplog.text


async def test_a_delete_removes_the_keys_of_the_conversation_and_all_below_it(
    settings: Settings,
) -> None:
    on = encrypted(settings)
    async with serving(on) as (server, gql):
        seeded = await seed(gql)
        store = server.services.db.encryption
        assert store is not None
        refs = [f"c{seeded.conversation}", f"c{seeded.child}"]
        assert set(await store.store.get_many(refs)) == set(refs)
        await gql(
            "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }",
            {"id": seeded.conversation},
        )
        # Destroyed: a tombstone, without the key, so that no write can make a new one.
        left = await store.store.get_many(refs)
        assert {(k.key_id, k.wrapped) for k in left.values()} == {(TOMBSTONE, "")}


async def test_a_delete_whose_keys_cannot_be_destroyed_at_once_stands_and_the_sweep_ends_them(
    settings: Settings,
) -> None:
    """The key store busy (another process holds its write lock) when a committed delete
    destroys its keys: the delete was answered with a masked INTERNAL error, though it had
    committed, and the key stayed (the sweep takes a conversation's an hour after it was
    made). Now the delete is answered as done, and the sweep destroys the key."""
    if not settings.is_sqlite:
        pytest.skip("SQLite's busy timeout bounds the wait; PostgreSQL's key store waits")
    on = encrypted(settings, sqlite_busy_timeout_ms=100)
    async with serving(on) as (server, gql):
        made = await ok(gql, "createConversation", {"title": "doomed"})
        cid = made["conversation"]["id"]
        store = server.services.db.encryption
        assert store is not None
        busy = sqlite3.connect(on.resolved_key_store_file, isolation_level=None)
        try:
            busy.execute("BEGIN IMMEDIATE")
            deleted = await gql(
                "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }",
                {"id": cid},
            )
            assert deleted["deleteConversation"]["deleted"] is True
        finally:
            busy.close()
        assert (await store.store.get_many([f"c{cid}"]))[f"c{cid}"].key_id != TOMBSTONE
        await sweep(server.services.uow)
        assert (await store.store.get_many([f"c{cid}"]))[f"c{cid}"].key_id == TOMBSTONE


# -- the master key at start --------------------------------------------------------------


async def test_a_wrong_master_key_is_refused_at_start_naming_the_setting(
    settings: Settings,
) -> None:
    async with serving(encrypted(settings)) as (_, gql):
        await seed(gql)
    services = build_services(encrypted(settings, OTHER_KEY))
    try:
        with pytest.raises(EncryptionError, match="CONVOGRAPH_ENCRYPTION_KEY"):
            await services.start()
    finally:
        await services.db.dispose()


async def test_a_missing_master_key_is_refused_at_start(settings: Settings) -> None:
    async with serving(encrypted(settings)) as (_, gql):
        await seed(gql)
    services = build_services(settings.replace(encryption_key=None))
    try:
        with pytest.raises(EncryptionError, match=r"CONVOGRAPH_ENCRYPTION_KEY.*not set"):
            await services.start()
    finally:
        await services.db.dispose()


def test_an_unreadable_key_file_is_refused_naming_the_setting(
    settings: Settings, tmp_path: Path
) -> None:
    bad = tmp_path / "master.key"
    bad.write_text("not a key")
    for given in (bad, tmp_path / "missing.key"):
        with pytest.raises(EncryptionError, match="CONVOGRAPH_ENCRYPTION_KEY_FILE"):
            build_services(settings.replace(encryption_key=None, encryption_key_file=str(given)))


# -- the CLI: generate, status, rotate, encrypt-existing -----------------------------------


async def cli(monkeypatch: pytest.MonkeyPatch, settings: Settings, *args: str, **env: str) -> None:
    """`convograph ARGS` with the settings' database and the given encryption variables."""
    for name in ("KEY", "KEY_FILE", "PREVIOUS_KEY", "PREVIOUS_KEY_FILE"):
        monkeypatch.delenv(f"CONVOGRAPH_ENCRYPTION_{name}", raising=False)
    monkeypatch.setenv("CONVOGRAPH_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("CONVOGRAPH_SECRET", settings.secret or "")
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY_SCHEMA", settings.encryption_key_schema)
    for name, value in env.items():
        monkeypatch.setenv(f"CONVOGRAPH_ENCRYPTION_{name}", value)
    assert await asyncio.to_thread(main, list(args)) == 0


def test_keys_generate_prints_a_usable_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "generate"]) == 0
    key = capsys.readouterr().out.strip()
    assert len(base64.b64decode(key)) == 32
    assert Settings(encryption_key=key).encryption_on


async def test_rotation_wraps_every_data_key_under_the_new_master_key(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with serving(encrypted(settings)) as (_, gql):
        seeded = await seed(gql)
        before = await holdings(gql, seeded)
    # Online: a server with the new key and the old one as previous reads and writes.
    rotating = encrypted(settings, OTHER_KEY, encryption_previous_key=KEY)
    async with serving(rotating) as (_, gql):
        assert await holdings(gql, seeded) == before
        await seed(gql)
    capsys.readouterr()
    await cli(monkeypatch, settings, "keys", "status", KEY=OTHER_KEY, PREVIOUS_KEY=KEY)
    status = capsys.readouterr().out
    assert "previous (CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY)" in status and "current" in status
    await cli(monkeypatch, settings, "keys", "rotate", KEY=OTHER_KEY, PREVIOUS_KEY=KEY)
    # Those made under the old key: the index key, the conversation, its child, the session.
    assert "wrapped 4 data keys" in capsys.readouterr().out
    await cli(monkeypatch, settings, "keys", "rotate", KEY=OTHER_KEY, PREVIOUS_KEY=KEY)
    assert "wrapped 0 data keys" in capsys.readouterr().out  # resumable: nothing left
    await cli(monkeypatch, settings, "keys", "status", KEY=OTHER_KEY)
    status = capsys.readouterr().out
    assert status.count("master key") == 1 and "current" in status
    # The old key is no longer needed, and no longer enough.
    async with serving(encrypted(settings, OTHER_KEY)) as (_, gql):
        assert await holdings(gql, seeded) == before
    services = build_services(encrypted(settings, KEY))
    try:
        with pytest.raises(EncryptionError):
            await services.start()
    finally:
        await services.db.dispose()


async def test_encrypt_existing_seals_a_database_written_without_encryption(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = settings.replace(encryption_key=None)
    async with serving(plain) as (server, gql):
        seeded = await seed(gql)
        before = await holdings(gql, seeded)
        assert f"word{seeded.marker}".encode() in await stored_bytes(server)
    # A server with the key reads the old content, and seals what it writes from now on;
    # only its search cannot find the old words until they are digested.
    async with serving(encrypted(settings)) as (_, gql):
        assert await holdings(gql, seeded) == {**before, "search": {"nodes": []}}
        newer = await seed(gql)
        newer_before = await holdings(gql, newer)
    await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
    sealed = capsys.readouterr().out
    assert "messages: sealed 2" in sealed, sealed  # the plain ones only
    assert "checkpoints: sealed 1" in sealed, sealed
    await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
    assert "messages: sealed 0" in capsys.readouterr().out  # resumable: nothing left
    async with serving(encrypted(settings)) as (server, gql):
        assert await holdings(gql, seeded) == before
        assert await holdings(gql, newer) == newer_before
        if settings.is_sqlite:  # PostgreSQL keeps old row versions until VACUUM FULL
            stored = await stored_bytes(server)
            for secret in seeded.secrets:
                assert secret.encode() not in stored, secret


LOOKALIKE_TITLES = ["cvg1:", "cvg1: notes", "cvg1:x:y", f"cvg1:c{uuid.uuid4()}:" + "A" * 32]
LOOKALIKE_READ = """query($id: ID!) { conversation(id: $id) { title transcript
  delegations { nodes { task } } } }"""


async def lookalikes(gql: GraphQLClient) -> list[str]:
    """Conversations titled (and delegating a task) with texts that begin as a sealed
    value does, each with a message; their ids."""
    out = []
    for title in LOOKALIKE_TITLES:
        created = await ok(gql, "createConversation", {"title": title})
        cid = created["conversation"]["id"]
        message = {"role": "user", "content": title}
        await ok(gql, "appendMessages", {"conversationId": cid, "messages": [message]})
        delegate = {"parentConversationId": cid, "delegatingTier": "a", "targetTier": "b"}
        await ok(gql, "createDelegation", {**delegate, "task": title})
        out.append(cid)
    return out


async def read_lookalikes(gql: GraphQLClient, ids: list[str]) -> list[Any]:
    return [(await gql(LOOKALIKE_READ, {"id": cid}))["conversation"] for cid in ids]


def expected_lookalikes() -> list[dict[str, Any]]:
    return [
        {
            "title": title,
            "transcript": [{"role": "user", "content": title}],
            "delegations": {"nodes": [{"task": title}]},
        }
        for title in LOOKALIKE_TITLES
    ]


async def test_a_text_that_begins_as_a_sealed_value_does_is_read_as_written(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Written before encryption, it is not taken for a crypto-shredded value once the key
    is set (the records read, and take writes), and encrypt-existing seals it; written with
    encryption on, it is sealed like any other text."""
    async with serving(settings.replace(encryption_key=None)) as (_, gql):
        before = await lookalikes(gql)
        assert await read_lookalikes(gql, before) == expected_lookalikes()
    async with serving(encrypted(settings)) as (server, gql):
        assert await read_lookalikes(gql, before) == expected_lookalikes()
        listed = await gql("{ conversations(first: 100) { totalCount nodes { id } } }")
        assert len(listed["conversations"]["nodes"]) == listed["conversations"]["totalCount"]
        await ok(gql, "updateConversation", {"id": before[0], "title": "cvg1:new"})
        await ok(gql, "updateConversation", {"id": before[0], "title": "cvg1:"})
        during = await lookalikes(gql)
        assert await read_lookalikes(gql, during) == expected_lookalikes()
        if settings.is_sqlite:  # a sealed value is bytes: a text in clear would be found
            stored = await stored_bytes(server)
            assert b"cvg1:x:y" in stored  # the one written before, not sealed yet
    await cli(monkeypatch, settings, "keys", "encrypt-existing", KEY=KEY)
    said = capsys.readouterr().out
    assert "delegations: sealed 4" in said, said  # the tasks written before, taken as text
    async with serving(encrypted(settings)) as (server, gql):
        assert await read_lookalikes(gql, before + during) == expected_lookalikes() * 2
        if settings.is_sqlite:
            assert b"cvg1:x:y" not in await stored_bytes(server)


async def test_expiry_deletes_the_keys_and_the_sweep_those_left_without_data(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph.store import encryption_admin
    from graph.store.retention import sweep
    from tests.test_retention import expire_soon, wait_past

    async with serving(encrypted(settings)) as (server, gql):
        doomed, kept = await seed(gql), await seed(gql)
        encryption = server.services.db.encryption
        assert encryption is not None
        refs = [f"c{doomed.conversation}", f"c{doomed.child}"]
        await wait_past(await expire_soon(gql, doomed.conversation))
        # The child's key with its root's (its expiry follows its root's), though on SQLite
        # the cascade deleted it before the statement reached it.
        assert await sweep(server.services.uow) == 2
        left = await encryption.store.get_many(refs)
        assert {k.key_id for k in left.values()} == {TOMBSTONE}
        monkeypatch.setattr(encryption_admin, "ORPHAN_AGE_SECONDS", 0.0)
        await sweep(server.services.uow)
        left = await encryption.store.get_many(refs)
        assert {k.key_id for k in left.values()} == {TOMBSTONE}
        alive = [f"c{kept.conversation}", f"c{kept.child}"]
        assert set(await encryption.store.get_many(alive)) == set(alive)
        assert (await holdings(gql, kept))["conversation"]["title"] == f"title{kept.marker}"


async def test_a_conversation_whose_expiry_was_extended_while_the_sweep_waited_keeps_its_keys(
    settings: Settings,
) -> None:
    """PostgreSQL: the sweep selects what has expired, then waits for the trees' locks; a
    write that extended an expiry meanwhile commits first, and the delete (which checks the
    expiry again) leaves that conversation. Its keys were shredded all the same, everything
    it held unreadable for good."""
    if settings.database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: nothing commits between the sweep's two statements")
    from sqlalchemy import pool, select, update
    from sqlalchemy.ext.asyncio import create_async_engine

    from graph.store.retention import sweep
    from graph.store.tables import conversation as C
    from tests.test_retention import expire_soon, wait_past

    async with serving(encrypted(settings)) as (server, gql):
        kept = await seed(gql)
        await wait_past(await expire_soon(gql, kept.conversation))
        engine = create_async_engine(settings.database_url, poolclass=pool.NullPool)
        try:
            async with engine.connect() as holder:
                await holder.execute(
                    select(C.c.id).where(C.c.id == kept.conversation).with_for_update()
                )
                swept = asyncio.create_task(sweep(server.services.uow))
                await lock_waiters(engine)  # until the sweep waits for the root's lock
                later = datetime.now(UTC) + timedelta(hours=1)
                await holder.execute(
                    update(C)
                    .where(C.c.id.in_([kept.conversation, kept.child]))
                    .values(expires_at=later)
                )
                await holder.commit()
            assert await swept == 0
        finally:
            await engine.dispose()
        assert (await holdings(gql, kept))["conversation"]["title"] == f"title{kept.marker}"


async def test_an_idempotency_key_reused_after_expiry_shreds_the_keys_of_the_whole_tree(
    settings: Settings,
) -> None:
    """A create with the key of an expired conversation deletes that one first, and the
    delete cascades to its child transcripts: their keys go with them, as an explicit
    delete's do, not an hour later with the keys left without data."""
    from tests.test_retention import expire_soon, wait_past

    async with serving(encrypted(settings)) as (server, gql):
        first = await ok(gql, "createConversation", {"title": "first", "idempotencyKey": "k"})
        root = first["conversation"]["id"]
        task = {"delegatingTier": "lead", "targetTier": "worker", "task": "t"}
        made = await ok(gql, "createDelegation", {**task, "parentConversationId": root})
        child = made["delegation"]["childConversation"]["id"]
        made = await ok(gql, "createDelegation", {**task, "parentConversationId": child})
        grandchild = made["delegation"]["childConversation"]["id"]
        await wait_past(await expire_soon(gql, root))
        again = await ok(gql, "createConversation", {"title": "again", "idempotencyKey": "k"})
        assert again["conversation"]["id"] != root
        encryption = server.services.db.encryption
        assert encryption is not None
        left = await encryption.store.get_many([f"c{c}" for c in (root, child, grandchild)])
        assert {ref: k.key_id for ref, k in left.items()} == {
            f"c{c}": TOMBSTONE for c in (root, child, grandchild)
        }


async def test_completing_another_owners_delegation_makes_no_key_for_its_child(
    settings: Settings,
) -> None:
    """A delegation written before encryption was on (its child has no data key until
    encrypt-existing): another owner's completeDelegation with a summary was refused
    NOT_FOUND, but the summary had been sealed first, under a key made and stored then for
    a child transcript that was not the caller's to write."""
    async with serving(settings.replace(encryption_key=None)) as (_, gql):
        root = (await ok(gql, "createConversation", {"title": "alice's"}))["conversation"]["id"]
        task = {"delegatingTier": "lead", "targetTier": "worker", "task": "t"}
        made = await ok(gql, "createDelegation", {**task, "parentConversationId": root})
    delegation, child = made["delegation"]["id"], made["delegation"]["childConversation"]["id"]
    async with serving(encrypted(settings)) as (server, gql):
        bob = gql.as_(await server.token(owner="user:bob"))
        done = {"delegationId": delegation, "status": "COMPLETED", "summary": "mine now"}
        refused = await mutate(bob, "completeDelegation", done)
        assert [e["code"] for e in refused["userErrors"]] == ["NOT_FOUND"], refused
        encryption = server.services.db.encryption
        assert encryption is not None
        assert await encryption.store.get_many([f"c{child}"]) == {}
        # Its owner's completion seals the summary under a key of the child's own.
        await ok(gql, "completeDelegation", done)
        assert list(await encryption.store.get_many([f"c{child}"])) == [f"c{child}"]


def cli_environment(monkeypatch: pytest.MonkeyPatch, settings: Settings, *, key: str) -> None:
    """The CONVOGRAPH_* variables that make `main` (the CLI) use `settings`'s database with
    master key `key`."""
    monkeypatch.setenv("CONVOGRAPH_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("CONVOGRAPH_SECRET", settings.secret or "")
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY_SCHEMA", settings.encryption_key_schema)
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY", key)


async def test_the_cli_refuses_a_wrong_key_with_a_message_naming_the_setting(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with serving(encrypted(settings)) as (_, gql):
        await seed(gql)
    cli_environment(monkeypatch, settings, key=OTHER_KEY)
    assert await asyncio.to_thread(main, ["token", "list"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: CONVOGRAPH_ENCRYPTION_KEY is not the master key"), error
    assert OTHER_KEY not in error
    monkeypatch.delenv("CONVOGRAPH_ENCRYPTION_KEY")
    # Every command, the sweep too: expiry destroys keys it could not reach without it.
    for command in (["token", "list"], ["sweep"]):
        assert await asyncio.to_thread(main, command) == 2
        assert "CONVOGRAPH_ENCRYPTION_KEY" in capsys.readouterr().err


async def titled_only(gql: GraphQLClient) -> None:
    made = await gql(
        'mutation { createConversation(input: {title: "secret plans", metadata: {a: 1}}) {'
        " conversation { id } } }"
    )
    assert made["createConversation"]["conversation"]["id"]


@pytest.mark.parametrize("fill", [seed, titled_only], ids=["records", "a-title-only"])
async def test_sealed_content_without_its_key_store_is_refused_with_or_without_the_key(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fill: Callable[[GraphQLClient], Awaitable[object]],
) -> None:
    """A data backup restored without its key store: without the master key it was served,
    sealed bytes spliced into bodies that were not JSON; with it, a new empty key store was
    made and every record read as deleted. A database holding conversations without
    messages was not seen to be sealed at all (only messages and checkpoints were probed)."""
    on = encrypted(settings)
    async with serving(on) as (_, gql):
        await fill(gql)
    if settings.is_sqlite:
        on.resolved_key_store_file.unlink()
    else:
        await admin(settings.database_url, f'DROP SCHEMA "{on.encryption_key_schema}" CASCADE')
    cli_environment(monkeypatch, settings, key=KEY)
    assert await asyncio.to_thread(main, ["token", "list"]) == 2
    error = capsys.readouterr().err
    assert "key store holds no keys" in error, error
    monkeypatch.delenv("CONVOGRAPH_ENCRYPTION_KEY")
    assert await asyncio.to_thread(main, ["token", "list"]) == 2
    error = capsys.readouterr().err
    assert "CONVOGRAPH_ENCRYPTION_KEY" in error and "sealed" in error, error
    if settings.is_sqlite:
        assert not on.resolved_key_store_file.exists()  # no empty store was made


async def test_the_keys_commands_refuse_sealed_content_whose_key_store_is_elsewhere(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key store not where the settings say (a mistyped path or schema): `keys status`,
    `rotate` and `encrypt-existing` made a new, empty one there, and status said "no data
    keys yet", rotate that every data key was now wrapped by the current master key
    (CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY may be removed), exit 0."""
    on = encrypted(settings)
    async with serving(on) as (_, gql):
        await seed(gql)
    cli_environment(monkeypatch, settings, key=KEY)
    elsewhere = on.resolved_key_store_file.with_name("mistyped.keys")
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE", str(elsewhere))
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY_SCHEMA", "mistyped_keys")
    for command in ("status", "rotate", "encrypt-existing"):
        assert await asyncio.to_thread(main, ["keys", command]) == 2, command
        out, error = capsys.readouterr()
        assert "key store holds no keys" in error and not out, (command, out, error)
    if settings.is_sqlite:
        assert not elsewhere.exists()  # no empty store was made
    else:
        from sqlalchemy import text

        async with serving(on) as (server, _), server.services.db.read() as conn:
            made = await conn.execute(text("SELECT to_regnamespace('mistyped_keys')"))
            assert made.scalar() is None
    # Where it is, status counts its keys.
    monkeypatch.delenv("CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE")
    monkeypatch.setenv("CONVOGRAPH_ENCRYPTION_KEY_SCHEMA", on.encryption_key_schema)
    assert await asyncio.to_thread(main, ["keys", "status"]) == 0
    assert "wraps" in capsys.readouterr().out


# -- a session's key across replicas ------------------------------------------------------


async def test_a_checkpoint_after_a_delete_on_another_replica_reads_back(
    settings: Settings,
) -> None:
    """Each process keeps data keys in memory: a delete on one replica destroyed the
    session's key, and the other sealed its next checkpoint with the key it still held,
    acknowledged it, and nobody could read it again."""
    settings = encrypted(settings)
    async with serving(settings) as (_, a), serving(settings) as (_, b):
        b = b.as_(a.token or "")
        for gql, step in ((a, 1), (b, 2)):
            await checkpoint(gql, session_doc("shared", step), session_id="shared")
        assert (await hydrate(b, "shared") or {})["version"] == 2
        assert (await delete(a, "shared"))["deleted"]
        saved = await checkpoint(b, session_doc("shared", 3), session_id="shared")
        assert saved["version"] == 3
        for gql in (a, b):
            read = await hydrate(gql, "shared")
            assert read is not None, "the checkpoint after the delete does not read back"
            assert (read["version"], read["state"]) == (3, session_doc("shared", 3)), read


async def test_the_pending_shred_migration_downgrades_and_upgrades(settings: Settings) -> None:
    gone: list[bool] = []

    def down(config: Config) -> None:
        alembic.downgrade(config, "0018")
        gone.append(not inspect(config.attributes["connection"]).has_table("pending_shred"))

    await columns_after(settings, "conversation", down)
    assert gone == [True]
    back = await columns_after(settings, "pending_shred", lambda c: alembic.upgrade(c, "head"))
    assert back == ["ref", "created_at"]


async def test_a_wrong_master_key_found_after_a_start_without_the_database_makes_it_unavailable(
    settings: Settings,
) -> None:
    """A server started while its database (and key store) was away checks the master key
    on first use: a wrong one then answered every request with a masked INTERNAL error and
    stayed ready. Now it is DATABASE_UNAVAILABLE (retry elsewhere) and not ready."""
    if settings.is_sqlite:
        pytest.skip("an embedded SQLite file cannot go away: PostgreSQL only")
    from graph.app import create_app

    async with serving(encrypted(settings)) as (_, gql):
        seeded = await seed(gql)
    proxy, through = await in_front_of(settings.database_url)
    await proxy.cut()
    wrong = encrypted(settings, OTHER_KEY).replace(database_url=through, pool_timeout_seconds=2)
    app = create_app(wrong)
    read = "query($id: ID!) { conversation(id: $id) { title } }"
    try:
        async with app.router.lifespan_context(app):
            await proxy.start()
            server = Server(app, wrong)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                gql = GraphQLClient(http, await server.token())
                for query, variables in ((read, {"id": seeded.conversation}), (CREATE, {})):
                    errors = (await gql.post(query, variables)).json()["errors"]
                    codes = [e["extensions"]["code"] for e in errors]
                    assert codes == ["DATABASE_UNAVAILABLE"], errors
                ready = await http.get("/readyz")
                assert ready.status_code == 503 and "master key" in ready.text, ready.text
    finally:
        await proxy.cut()


# More conversations than one statement may bind parameters for (SQLite 32,766; asyncpg
# 32,767): the pending shreds' record took two per key in one INSERT, and PostgreSQL's lock
# of the expired trees' roots one per root in one SELECT … FOR UPDATE.
MANY_EXPIRED = 32_800


# Tens of seconds of writes: a long variant (.ci/run), not `make test`.
@pytest.mark.slow
async def test_a_sweep_of_more_expired_conversations_than_one_statement_binds_deletes_them(
    settings: Settings,
) -> None:
    """Retention deleted every expired conversation in one transaction, and with encryption
    on recorded their keys in it (pending_shred): past 16,383 of them the record's one INSERT
    bound more parameters than the database takes (on PostgreSQL past 32,767 the lock of
    their roots as well), the sweep rolled back, and failed the same way at every interval:
    nothing expired any more. Now they are deleted, and their keys destroyed. (The sweep now
    takes a backlog in shares; this one stays past what one statement binds all the same.)"""
    from graph.domain.conversations import new_conversation

    async with serving(settings) as (server, _):  # made without keys: quicker, as deleted
        uow = server.services.uow
        principal = await uow.authenticate(await server.token())
        assert principal is not None
        now = datetime.now(UTC)
        async with uow.write(principal) as repo:
            for _ in range(MANY_EXPIRED):
                made = new_conversation(now=now, expires_at=now + timedelta(hours=1))
                await repo.conversations.create(made, announce=False)
    async with serving(encrypted(settings)) as (server, gql):
        swept = await sweep(server.services.uow, now=now + timedelta(hours=2))
        assert swept == MANY_EXPIRED
        listed = await gql("{ conversations(first: 1) { nodes { id } } }")
        assert listed["conversations"]["nodes"] == []


async def test_a_write_during_the_scan_for_orphaned_keys_is_answered_before_the_scan_ends(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sweep reads every conversation's key, to destroy those whose conversation is
    gone. On SQLite the key store and the data answer inline, on the event loop, and the scan
    never let anything in: every request of the process waited for all of it (seconds for a
    hundred thousand conversations). Now the process's requests go in between its steps."""
    from graph.domain.conversations import new_conversation
    from graph.store import encryption_admin

    monkeypatch.setattr(encryption_admin, "ORPHAN_AGE_SECONDS", 0.0)
    async with serving(encrypted(settings)) as (server, gql):
        uow = server.services.uow
        assert gql.token is not None
        principal = await uow.authenticate(gql.token)
        assert principal is not None
        async with uow.write(principal) as repo:
            kept = [
                (
                    await repo.conversations.create(
                        new_conversation(now=datetime.now(UTC), title=f"kept {n}"),
                        announce=False,
                    )
                ).id
                for n in range(200)
            ]
        live = (await ok(gql, "createConversation", {"title": "live"}))["conversation"]["id"]
        scan = asyncio.create_task(encryption_admin.shred_orphans(server.services.db, batch=1))
        try:
            await asyncio.sleep(0)  # it begins
            await ok(
                gql,
                "appendMessages",
                {"conversationId": live, "messages": [{"role": "user", "content": "meanwhile"}]},
            )
            assert not scan.done()
        finally:
            shredded = await scan
        assert shredded == 0
        encryption = server.services.db.encryption
        assert encryption is not None
        refs = [f"c{cid}" for cid in (*kept, live)]
        stored = await encryption.store.get_many(refs)
        assert TOMBSTONE not in {key.key_id for key in stored.values()}
        assert set(stored) == set(refs)


async def test_the_scan_for_keys_without_data_goes_on_where_the_last_sweep_stopped(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sweep read the whole key store for keys without data: seconds of CPU a minute
    at a million conversations. Now each reads a share of it, from where the one before
    stopped, and starts again once through: every orphan still goes, over several sweeps."""
    from sqlalchemy import delete

    from graph.domain.principal import SYSTEM
    from graph.store import encryption_admin
    from graph.store.tables import conversation as C

    monkeypatch.setattr(encryption_admin, "ORPHAN_AGE_SECONDS", 0.0)
    monkeypatch.setattr(encryption_admin, "SCAN_PER_SWEEP", 2)
    async with serving(encrypted(settings)) as (server, gql):
        made = [
            (await ok(gql, "createConversation", {"title": f"t{n}"}))["conversation"]["id"]
            for n in range(5)
        ]
        # Their rows gone, their keys left: what a cascade of a release before pending shreds,
        # or a copy restored beside the key store, leaves.
        async with server.services.uow.write(SYSTEM) as repo:
            await repo.sql.execute(delete(C).where(C.c.id.in_(made)))
        scans = [await encryption_admin.shred_orphans(server.services.db) for _ in range(4)]
        assert scans == [2, 2, 1, 0]
        encryption = server.services.db.encryption
        assert encryption is not None
        left = await encryption.store.get_many([f"c{cid}" for cid in made])
        assert {key.key_id for key in left.values()} <= {TOMBSTONE}
