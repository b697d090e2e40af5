"""Tokens that expire: `token create --expires-in`, `token list`'s expiry, `token rotate`.

Everything goes through the public surfaces against a real server process and database
(SQLite, or PostgreSQL under CONVOGRAPH_TEST_DATABASE_URL): the `convograph` command in a
subprocess, GraphQL over HTTP and over WebSocket. An expired token must be refused exactly
like a revoked one (the same 401 and body, the same WebSocket close codes) and must end
the subscriptions it opened (an error, then the socket closed, within 5 s without events).
Rotation issues a token of the same workspace, owner, scopes and label, and ends the old
one after CONVOGRAPH_TOKEN_ROTATION_GRACE_SECONDS (0: at once).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from alembic import command

from graph.settings import Settings
from tests.http_clients import http_client
from tests.migrations import columns_after
from tests.operations import create as create_conversation
from tests.test_revocation import subscription
from tests.ws import Closed, connect, graphql_errors, until_live

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

VIEWER = "{ viewer { workspace { key } ownerType ownerKey scopes } }"
GRACE = "CONVOGRAPH_TOKEN_ROTATION_GRACE_SECONDS"


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def token(self) -> str:
        """The token a `create` or `rotate` printed (the last line of stdout)."""
        assert self.code == 0, self.stderr
        return self.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class Database:
    """A database the CLI runs on without a server (for what needs none)."""

    database_url: str
    env: dict[str, str]


async def convograph(server: LiveServer | Database, *args: str, **env: str) -> Ran:
    """`python -m graph ARGS` on the server's database, with its secret and `env` added."""
    from tests.live_server import graph_command

    return Ran(
        *await graph_command(
            *args, "--database-url", server.database_url, env={**server.env, **env}, limit=60
        )
    )


@dataclass(frozen=True)
class Listed:
    """One line of `token list`."""

    id: str
    workspace: str
    owner: str
    scopes: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None
    state: str


def _time(text: str) -> datetime | None:
    return None if text == "-" else datetime.fromisoformat(text)


async def listing(server: LiveServer | Database) -> list[Listed]:
    """`token list`, line by line, without the ADMIN token `serve` made on the empty database."""
    ran = await convograph(server, "token", "list")
    assert ran.code == 0, ran.stderr
    rows = []
    for line in ran.stdout.splitlines():
        f = line.split("\t")
        assert len(f) == 9, line
        if f[4] == "bootstrap":
            continue
        created = _time(f[5])
        assert created is not None
        rows.append(
            Listed(
                id=f[0],
                workspace=f[1],
                owner=f[2],
                scopes=f[3],
                label=f[4],
                created_at=created,
                revoked_at=_time(f[6]),
                expires_at=_time(f[7]),
                state=f[8],
            )
        )
    return rows


async def listed(server: LiveServer | Database) -> dict[str, Listed]:
    """`token list`, by label (each label once)."""
    rows = await listing(server)
    by_label = {row.label: row for row in rows}
    assert len(by_label) == len(rows), rows
    return by_label


async def create(
    server: LiveServer | Database, label: str, *flags: str, owner: str = "user:alice"
) -> str:
    ran = await convograph(
        server, "token", "create", "--workspace", "site:1", "--owner", owner, "--label", label,
        *flags,
    )  # fmt: skip
    return ran.token


async def until(moment: datetime) -> None:
    """Sleep until just past `moment` (the server's clock is this machine's)."""
    await asyncio.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()) + 0.1)


@asynccontextmanager
async def http(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(base_url=server.base_url, timeout=30) as client:
        yield client


async def viewer(client: httpx.AsyncClient, token: str) -> httpx.Response:
    return await client.post(
        "/graphql", json={"query": VIEWER}, headers={"Authorization": f"Bearer {token}"}
    )


async def works(client: httpx.AsyncClient, token: str) -> dict[str, Any]:
    response = await viewer(client, token)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return dict(body["data"]["viewer"])


async def ws_close(server: LiveServer, token: str, *, in_handshake: bool) -> tuple[int, str]:
    """The code and reason a socket carrying `token` (in the handshake's header, or in
    connection_init) is closed with."""
    received = []
    async with connect(server, token=token if in_handshake else None) as socket:
        with contextlib.suppress(Closed):
            await socket.send_init(None if in_handshake else token)
        try:
            while True:
                received.append(await socket.receive())
        except Closed as closed:
            assert closed.code is not None, "the client side closed, not the server"
            code, reason = closed.code, closed.reason
    assert not [m for m in received if m.get("type") == "connection_ack"], received
    return code, reason


@pytest.fixture
def database(database_url: str) -> Database:
    """This test's database, for the CLI alone (imported here: see tests/live_server.py)."""
    from tests.live_server import DEFAULT_SECRET, server_env

    return Database(database_url, server_env(DEFAULT_SECRET))


# -- expiry ----------------------------------------------------------------------------------


async def test_an_expired_token_is_refused_like_a_revoked_one(live_server: LiveServer) -> None:
    revoked = await create(live_server, "revoked")
    expiring = await create(live_server, "expiring", "--expires-in", "4s")
    async with http(live_server) as client:
        assert (await works(client, expiring))["ownerKey"] == "alice"
        rows = await listed(live_server)
        assert (await convograph(live_server, "token", "revoke", rows["revoked"].id)).code == 0
        assert rows["expiring"].state == "live"
        expires_at = rows["expiring"].expires_at
        assert expires_at == rows["expiring"].created_at + timedelta(seconds=4)
        await until(expires_at)

        as_expired, as_revoked = await viewer(client, expiring), await viewer(client, revoked)
    assert as_expired.status_code == as_revoked.status_code == 401
    assert as_expired.json() == as_revoked.json()
    assert as_expired.headers["www-authenticate"] == as_revoked.headers["www-authenticate"]
    assert as_expired.headers["content-type"] == as_revoked.headers["content-type"]
    # The close says why, expiry included (the handshake's said "Unauthorized", the
    # connection_init's named every cause but expiry).
    said = "missing, unknown, revoked or expired bearer token"
    for in_handshake, code in ((True, 4401), (False, 4403)):
        assert await ws_close(live_server, revoked, in_handshake=in_handshake) == (code, said)
        assert await ws_close(live_server, expiring, in_handshake=in_handshake) == (code, said)
    states = {label: row.state for label, row in (await listed(live_server)).items()}
    assert states == {"revoked": "revoked", "expiring": "expired"}


async def test_expiry_ends_an_idle_subscription_within_5_seconds(
    live_server: LiveServer,
) -> None:
    watcher = await create(live_server, "watcher", "--expires-in", "8s")
    writer = await create(live_server, "writer")
    expires_at = (await listed(live_server))["watcher"].expires_at
    assert expires_at is not None
    async with live_server.client(writer) as gql:
        cid = await create_conversation(gql, "watched")
        async with subscription(live_server, watcher, cid) as socket:
            await until_live(socket, gql, cid)  # delivered while not yet expired
            assert datetime.now(UTC) < expires_at, "too slow to test before the expiry"
            received, code = await socket.messages_until_closed(within=15)
            ended = datetime.now(UTC)

    assert code == 4403
    assert expires_at <= ended < expires_at + timedelta(seconds=5), (expires_at, ended)
    errors = [e for m in received for e in graphql_errors(m)]
    assert [e["extensions"]["code"] for e in errors] == ["FORBIDDEN"], received
    assert "expired" in errors[0]["message"]
    assert not [m for m in received if m["type"] == "next" and "errors" not in m["payload"]]


async def test_a_token_not_yet_expired_works_and_the_list_shows_its_expiry(
    live_server: LiveServer,
) -> None:
    month = await create(live_server, "month", "--expires-in", "30d")
    hours = await create(live_server, "hours", "--expires-in", "12h")
    minutes = await create(live_server, "minutes", "--expires-in", "90m")
    forever = await create(live_server, "forever")
    async with http(live_server) as client:
        for token in (month, hours, minutes, forever):
            assert (await works(client, token))["ownerKey"] == "alice"
    rows = await listed(live_server)
    lifetimes = {
        label: None if row.expires_at is None else row.expires_at - row.created_at
        for label, row in rows.items()
    }
    assert lifetimes == {
        "month": timedelta(days=30),
        "hours": timedelta(hours=12),
        "minutes": timedelta(minutes=90),
        "forever": None,
    }
    assert {row.state for row in rows.values()} == {"live"}
    assert all(row.revoked_at is None for row in rows.values())


BAD_DURATIONS = ["30", "30w", "1.5h", "-1d", "0s", "0d", "d", "", "30 d", "1e3s", "99999999d"]


@pytest.mark.parametrize("command", ["create", "rotate"])
@pytest.mark.parametrize("value", BAD_DURATIONS)
def test_a_bad_expires_in_is_an_error_naming_the_flag(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command's main function, in this process (refused before it reaches a database).
    from graph.__main__ import main

    where = ["--workspace", "site:1", "--owner", "user:a"] if command == "create" else ["an-id"]
    with pytest.raises(SystemExit) as exited:
        main(["token", command, *where, f"--expires-in={value}"])
    assert exited.value.code == 2
    said = capsys.readouterr()
    assert "argument --expires-in:" in said.err and repr(value) in said.err, said.err
    assert "cvg_" not in said.out + said.err


async def test_a_bad_expires_in_exits_2_and_creates_nothing(database: Database) -> None:
    ran = await convograph(
        database,
        "token", "create", "--workspace", "site:1", "--owner", "user:a", "--expires-in", "30w",
    )  # fmt: skip
    assert ran.code == 2 and "--expires-in" in ran.stderr, ran
    assert "cvg_" not in ran.stdout + ran.stderr
    assert await listing(database) == []


# -- rotation --------------------------------------------------------------------------------


async def test_rotate_without_grace_revokes_the_old_token_at_once(
    live_server: LiveServer,
) -> None:
    old = await convograph(
        live_server,
        "token", "create", "--workspace", "blog:7", "--owner", "runtime:r:1", "--scope", "admin",
        "--label", "agent",
    )  # fmt: skip
    async with http(live_server) as client:
        before = await works(client, old.token)
        old_id = (await listed(live_server))["agent"].id

        rotated = await convograph(live_server, "token", "rotate", old_id)
        new = rotated.token
        assert new != old.token
        assert (await viewer(client, old.token)).status_code == 401
        assert await works(client, new) == before  # same workspace, owner, scopes
    assert before == {
        "workspace": {"key": "blog:7"},
        "ownerType": "RUNTIME",
        "ownerKey": "r:1",
        "scopes": ["READ", "WRITE", "ADMIN"],
    }
    assert rotated.stdout.count("cvg_") == 1 and "cvg_" not in rotated.stderr

    rows = await listing(live_server)
    assert len(rows) == 2
    (old_row,) = [r for r in rows if r.id == old_id]
    (new_row,) = [r for r in rows if r.id != old_id]
    for row in (old_row, new_row):
        assert (row.workspace, row.owner, row.scopes, row.label) == (
            "blog:7",
            "runtime:r:1",
            "read,write,admin",
            "agent",
        )
    assert old_row.state == "revoked" and new_row.state == "live"
    assert new_row.expires_at is None  # the old token never expired: neither does its successor

    again = await convograph(live_server, "token", "rotate", old_id)
    assert again.code == 2 and old_id in again.stderr and "no live token" in again.stderr
    unknown = await convograph(live_server, "token", "rotate", "no-such-id")
    assert unknown.code == 2 and "no live token" in unknown.stderr
    assert "cvg_" not in again.stdout + unknown.stdout
    assert len(await listing(live_server)) == 2


async def test_rotate_with_a_grace_keeps_both_tokens_working_until_it_ends(
    live_server: LiveServer,
) -> None:
    old = await create(live_server, "graced", "--expires-in", "1d")
    old_id = (await listed(live_server))["graced"].id
    async with http(live_server) as client:
        new = (await convograph(live_server, "token", "rotate", old_id, **{GRACE: "2"})).token
        during = datetime.now(UTC)
        assert await works(client, old) == await works(client, new)
        rows = {row.id: row for row in await listing(live_server)}
        (new_id,) = set(rows) - {old_id}
        old_row, new_row = rows[old_id], rows[new_id]
        assert old_row.expires_at is not None and new_row.expires_at is not None
        assert during < old_row.expires_at, "too slow to test within the grace"
        # The grace counts from the rotation; the successor lives as long as the old one did.
        assert old_row.expires_at == new_row.created_at + timedelta(seconds=2)
        assert new_row.expires_at == new_row.created_at + timedelta(days=1)
        # (Its state may already say expired: `token list` can take longer than the grace.)
        assert (old_row.label, new_row.label, old_row.revoked_at) == ("graced", "graced", None)
        await until(old_row.expires_at)

        assert (await viewer(client, old)).status_code == 401
        assert (await works(client, new))["ownerKey"] == "alice"
    assert {row.id: row.state for row in await listing(live_server)} == {
        old_id: "expired",
        new_id: "live",
    }


async def test_a_token_rotated_within_its_grace_is_not_rotated_again(database: Database) -> None:
    """Rotated a second time within the grace, a token that never expired made a successor
    expiring after the old token's age plus the grace (its expiry, cut to the grace's end,
    was read as the lifetime it was issued for): a runtime given it stopped an hour later."""
    await create(database, "kept")
    old_id = (await listed(database))["kept"].id
    await convograph(database, "token", "rotate", old_id, **{GRACE: "3600"})
    rows = {row.id: row for row in await listing(database)}
    (new_id,) = set(rows) - {old_id}
    assert rows[new_id].expires_at is None

    again = await convograph(database, "token", "rotate", old_id, **{GRACE: "3600"})
    assert again.code == 2 and "cvg_" not in again.stdout, again
    assert again.stderr.strip().splitlines() == [
        f"error: token {old_id} was rotated already, into token {new_id}: rotate that one "
        f"(`token revoke {old_id}` ends this one now)"
    ]
    assert {row.id: row for row in await listing(database)} == rows  # nothing made
    # Its successor rotates as the token it is: into one that never expires either.
    newer = await convograph(database, "token", "rotate", new_id, **{GRACE: "3600"})
    assert newer.code == 0, newer
    assert [row.expires_at for row in await listing(database) if row.id not in rows] == [None]

    # A successor revoked (leaked, say): rotating the old token again is still no way, and
    # the line says what is (it said "rotate that one" of a revoked token).
    await convograph(database, "token", "revoke", new_id)
    revoked = await convograph(database, "token", "rotate", old_id, **{GRACE: "3600"})
    assert revoked.code == 2, revoked
    assert revoked.stderr.strip().splitlines() == [
        f"error: token {old_id} was rotated already, into token {new_id}, which is revoked or "
        f"expired: `token create` a new one (`token revoke {old_id}` ends this one now)"
    ]


async def test_a_bad_grace_setting_is_refused(database: Database) -> None:
    await create(database, "kept")
    kept = (await listed(database))["kept"]
    for value in ("-1", "soon", "inf", "nan"):
        ran = await convograph(database, "token", "rotate", kept.id, **{GRACE: value})
        assert ran.code == 2, ran
        assert GRACE in ran.stderr, ran.stderr
    assert await listed(database) == {"kept": kept}


# -- the migration ---------------------------------------------------------------------------


async def api_token_columns(settings: Settings, run: Any) -> list[str]:
    return await columns_after(settings, "api_token", run)


async def test_the_migration_downgrades_and_upgrades(settings: Settings) -> None:
    assert "expires_at" in await api_token_columns(settings, lambda c: None)
    down = await api_token_columns(settings, lambda c: command.downgrade(c, "0007"))
    assert "expires_at" not in down and "revoked_at" in down
    assert "expires_at" in await api_token_columns(settings, lambda c: command.upgrade(c, "head"))


async def test_the_successor_migration_downgrades_and_upgrades(settings: Settings) -> None:
    assert "successor_id" in await api_token_columns(settings, lambda c: None)
    down = await api_token_columns(settings, lambda c: command.downgrade(c, "0017"))
    assert "successor_id" not in down and "expires_at" in down
    up = await api_token_columns(settings, lambda c: command.upgrade(c, "head"))
    assert "successor_id" in up
