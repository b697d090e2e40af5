"""A token the server remembers is refused on the very next request once it is revoked or
expires, whoever revokes it: the CLI in another process, a `sqlite3` shell, this process.

The server remembers live tokens between requests (store/token_cache.py) on SQLite, while
no other connection has committed to the file; each test first makes its token cached (a
write opens the writer connection, then a request reads no token row), then ends it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest

from graph.domain.principal import SYSTEM, OwnerType, Scope
from graph.store.repository.tokens import Live, Rotation, Tokens
from tests.conftest import GraphQLClient, Server
from tests.operations import VIEWER, append, create


async def cached(server: Server, gql: GraphQLClient) -> None:
    """After a write, the token's next requests are answered without reading its row (on
    SQLite; PostgreSQL reads it on every request)."""
    await append(gql, await create(gql), "opens the writer")
    assert (await gql.post(VIEWER)).status_code == 200
    async with server.statements(lambda statement: "FROM api_token" in statement) as seen:
        for _ in range(3):
            assert (await gql.post(VIEWER)).status_code == 200
    assert len(seen) == (0 if server.settings.is_sqlite else 3)


async def token_id(server: Server, owner_key: str = "alice") -> str:
    async with server.services.uow.read(SYSTEM) as repo:
        (found,) = [t.id for t in await repo.tokens.all() if t.owner == f"user:{owner_key}"]
    return found


async def test_a_cached_token_revoked_by_the_cli_is_refused_on_the_next_request(
    server: Server, gql: GraphQLClient
) -> None:
    from tests.live_server import run_cli, server_env  # a plugin module: imported late

    other = gql.as_(await server.token(owner="user:bob"))
    await cached(server, gql)
    await cached(server, other)
    env = server_env(server.settings.secret or "")
    revoked = await token_id(server)
    await run_cli("token", "revoke", revoked, database_url=server.settings.database_url, env=env)

    refused = await gql.post(VIEWER)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert (await other.post(VIEWER)).status_code == 200  # another token is unaffected


async def test_a_cached_token_revoked_in_this_process_is_refused_on_the_next_request(
    server: Server, gql: GraphQLClient
) -> None:
    await cached(server, gql)
    async with server.services.uow.write(SYSTEM) as repo:
        assert await repo.tokens.revoke(await token_id(server))
    assert (await gql.post(VIEWER)).status_code == 401


async def test_a_cached_token_rotated_in_this_process_is_refused_on_the_next_request(
    server: Server, gql: GraphQLClient
) -> None:
    await cached(server, gql)
    async with server.services.uow.write(SYSTEM) as repo:
        rotation = await repo.tokens.rotate(await token_id(server), grace=timedelta(0))
    assert isinstance(rotation, Rotation)
    assert (await gql.post(VIEWER)).status_code == 401
    assert (await gql.post(VIEWER, token=rotation.token)).status_code == 200


def shell(server: Server, sql: str, *params: object) -> None:
    """`sql` run and committed as a `sqlite3` shell would: another connection to the file."""
    if not server.settings.is_sqlite:
        pytest.skip("a sqlite3 shell edits a SQLite file")
    path = server.settings.sqlite_path
    assert path is not None
    connection = sqlite3.connect(path)
    try:
        connection.execute(sql, params)
        connection.commit()
    finally:
        connection.close()


REVOKE = "UPDATE api_token SET revoked_at = '2026-01-01 00:00:00.000000'"


async def test_a_cached_token_revoked_in_a_sqlite3_shell_is_refused_on_the_next_request(
    server: Server, gql: GraphQLClient
) -> None:
    await cached(server, gql)
    shell(server, REVOKE)
    assert (await gql.post(VIEWER)).status_code == 401


async def test_a_revoke_committed_while_the_token_is_being_read_is_not_remembered(
    server: Server, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cached(server, gql)
    shell(server, "UPDATE api_token SET label = 'x'")  # the cache forgets: the next request reads
    read = Tokens.live_token

    async def then_revoked(self: Tokens, digest: str) -> Live | None:
        found = await read(self, digest)
        shell(server, REVOKE)  # commits after the read, before the answer is remembered
        return found

    monkeypatch.setattr(Tokens, "live_token", then_revoked)
    assert (await gql.post(VIEWER)).status_code == 200  # it was live when read
    monkeypatch.setattr(Tokens, "live_token", read)
    assert (await gql.post(VIEWER)).status_code == 401


async def test_a_revoke_while_the_writer_connection_is_replaced_is_seen(
    server: Server, gql: GraphQLClient
) -> None:
    """A new writer connection's data_version starts where the old one's did."""
    if not server.settings.is_sqlite:
        pytest.skip("SQLite's writer connection")
    await cached(server, gql)
    writer = server.services.db._sqlite_writer
    assert writer is not None and writer._conn is not None
    await writer._conn.invalidate()  # as SQLiteWriter does after a failure it cannot undo
    shell(server, REVOKE)
    async with server.services.uow.write(SYSTEM) as repo:  # opens the writer again
        await repo.tokens.exist()
    assert (await gql.post(VIEWER)).status_code == 401


@pytest.mark.parametrize(("hours", "status"), [(1, 200), (-1, 401)])
async def test_an_expiry_typed_with_an_offset_is_the_instant_it_names(
    server: Server, gql: GraphQLClient, hours: int, status: int
) -> None:
    """In a shell, one hour ahead written at UTC-05:00 (its text sorts before now's) and
    one hour ago at UTC+05:00 (after): the token lives until that instant, cached or not."""
    instant = datetime.now(UTC) + timedelta(hours=hours)
    offset = timezone(timedelta(hours=-5 if hours > 0 else 5))
    shell(server, "UPDATE api_token SET expires_at = ?", instant.astimezone(offset).isoformat(" "))
    assert (await gql.post(VIEWER)).status_code == status
    async with server.services.uow.read(SYSTEM) as repo:
        assert bool(await repo.tokens.live([await token_id(server)])) == (status == 200)
    if status == 200:
        await cached(server, gql)


async def test_a_cached_token_is_refused_from_the_instant_it_expires(
    server: Server, anon: GraphQLClient
) -> None:
    async with server.services.uow.write(SYSTEM) as repo:
        _, token = await repo.tokens.create(
            workspace=("site", "1"),
            owner=(OwnerType.USER, "alice"),
            scope_=Scope.WRITE,
            expires_in=timedelta(seconds=2),
        )
        expires_at = repo.now() + timedelta(seconds=2)
    gql = anon.as_(token)
    await cached(server, gql)
    await asyncio.sleep((expires_at - datetime.now(UTC)).total_seconds() + 0.05)
    assert (await gql.post(VIEWER)).status_code == 401
