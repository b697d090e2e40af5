"""Rotating the master key (`convograph keys rotate`) with servers in real processes: one
left running with the old key alone, and one started with it afterwards.

Before: the running one answered every read of a key `rotate` had wrapped again with a
masked INTERNAL error, and went on wrapping the keys it made under the old master key after
`rotate` had said every key was under the new one (a replica started with the new key alone
then refused to start); one started with the old key alone was told only that its key was
not the key store's, as if it were mistyped.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING

from graph.store.encryption import MasterKey
from tests.http_clients import http_client
from tests.operations import CREATE
from tests.ports import free_port

if TYPE_CHECKING:
    from tests.live_server import LiveServers

pytest_plugins = ["tests.live_server"]

OLD = base64.b64encode(b"rotation-test-old-master-key-32b").decode()
NEW = base64.b64encode(b"rotation-test-new-master-key-32b").decode()
THIRD = base64.b64encode(b"rotation-test-3rd-master-key-32b").decode()
READ = "query($id: ID!) { conversation(id: $id) { title } }"


def key_id(key: str) -> str:
    """A master key's id, as messages and `keys status` name it."""
    return MasterKey(base64.b64decode(key), setting="").id


async def convograph(
    database_url: str, key_store_env: dict[str, str], *args: str, **keys: str
) -> tuple[int, str, str]:
    """`convograph ARGS` in a process of its own, with the master keys given
    (KEY=…, PREVIOUS_KEY=…)."""
    # Imported here: registered as a plugin above, its asserts are rewritten only if pytest
    # imports it first.
    from tests.live_server import CLI_TIMEOUT, DEFAULT_SECRET, graph_command, server_env

    env = server_env(DEFAULT_SECRET, key_store_env)
    for name in ("KEY", "KEY_FILE", "PREVIOUS_KEY", "PREVIOUS_KEY_FILE"):
        env.pop(f"CONVOGRAPH_ENCRYPTION_{name}", None)
    env.update({f"CONVOGRAPH_ENCRYPTION_{name}": value for name, value in keys.items()})
    return await graph_command(*args, "--database-url", database_url, env=env, limit=CLI_TIMEOUT)


async def rotate(database_url: str, key_store_env: dict[str, str]) -> None:
    code, out, err = await convograph(
        database_url, key_store_env, "keys", "rotate", KEY=NEW, PREVIOUS_KEY=OLD
    )
    assert code == 0, err
    assert "every data key is now wrapped by it" in out


async def test_a_server_started_with_the_old_key_after_rotate_is_refused_saying_so(
    live_servers: LiveServers, database_url: str, key_store_env: dict[str, str]
) -> None:
    server = await live_servers.start(
        database_url, env={**key_store_env, "CONVOGRAPH_ENCRYPTION_KEY": OLD}
    )
    token = await server.token()
    async with server.client(token) as client:
        created = (await client(CREATE, {"title": "kept"}))["createConversation"]
    await server.stop()
    await rotate(database_url, key_store_env)
    code, out, err = await convograph(database_url, key_store_env, "keys", "status", KEY=OLD)
    assert code == 0, err
    assert "the current master key is retired" in out, out
    # A second rotation away from the old key, to a third one, is refused before it splits
    # the data keys between the two new master keys.
    code, out, err = await convograph(
        database_url, key_store_env, "keys", "rotate", KEY=THIRD, PREVIOUS_KEY=OLD
    )
    assert code == 2, (out, err)
    assert f"was rotated to master key id {key_id(NEW)} by another `keys rotate`" in err, err
    serve = ["serve", "--no-migrate", "--host", "127.0.0.1", "--port", str(free_port())]
    # `keys rotate` given the old key alone (or as its own previous key) neither rotates
    # back nor un-retires it: the server after it is refused all the same.
    for command, previous in (
        (["keys", "rotate"], {}),
        (["keys", "rotate"], {"PREVIOUS_KEY": OLD}),
        (serve, {}),
        (["sweep"], {}),
    ):
        code, out, err = await convograph(
            database_url, key_store_env, *command, KEY=OLD, **previous
        )
        assert code == 2, (command, out, err)
        line = err.strip()
        assert "\n" not in line, line
        assert line.startswith("error: CONVOGRAPH_ENCRYPTION_KEY: the key store"), line
        assert f"was rotated to another master key (id {key_id(NEW)})" in line, line
        assert OLD not in line and NEW not in line
    # Nothing was lost: the new key reads it.
    server = await live_servers.start(
        database_url, env={**key_store_env, "CONVOGRAPH_ENCRYPTION_KEY": NEW}
    )
    async with server.client(token) as client:
        found = await client(READ, {"id": created["conversation"]["id"]})
    assert found["conversation"] == {"title": "kept"}


async def test_a_server_left_running_with_the_old_key_answers_503_and_wraps_no_key_under_it(
    live_servers: LiveServers, database_url: str, key_store_env: dict[str, str]
) -> None:
    old = await live_servers.start(
        database_url, env={**key_store_env, "CONVOGRAPH_ENCRYPTION_KEY": OLD}
    )
    token = await old.token()
    async with old.client(token) as client:
        before = (await client(CREATE, {"title": "before"}))["createConversation"]
    await rotate(database_url, key_store_env)
    new = await live_servers.start(
        database_url, env={**key_store_env, "CONVOGRAPH_ENCRYPTION_KEY": NEW}
    )
    async with new.client(token) as client:
        after = (await client(CREATE, {"title": "after"}))["createConversation"]
    async with old.client(token) as client:
        # A data key it holds in memory still opens what it sealed: nothing to refuse.
        assert (await client(READ, {"id": before["conversation"]["id"]}))["conversation"] == {
            "title": "before"
        }
        for query, variables in (
            (READ, {"id": after["conversation"]["id"]}),  # a key wrapped by the new master key
            (CREATE, {"title": "made by the old key"}),  # a new key: not under the retired one
        ):
            response = await client.post(query, variables)
            errors = response.json()["errors"]
            assert [e["extensions"]["code"] for e in errors] == ["DATABASE_UNAVAILABLE"], errors
    assert "rotated" in old.logs() and "CONVOGRAPH_ENCRYPTION_KEY" in old.logs()
    # Out of rotation until restarted with the new key; the other replica serves.
    async with http_client(timeout=30) as http:
        refused = await http.get(f"{old.base_url}/readyz")
        assert refused.status_code == 503 and "master key" in refused.text, refused.text
        assert (await http.get(f"{new.base_url}/readyz")).status_code == 200
    # Every data key is under the new master key still: none was made under the old one.
    code, out, err = await convograph(database_url, key_store_env, "keys", "status", KEY=NEW)
    assert code == 0, err
    assert out.count("master key") == 1 and "current" in out and "unknown" not in out, out
    async with new.client(token) as client:
        for made, title in ((before, "before"), (after, "after")):
            found = await client(READ, {"id": made["conversation"]["id"]})
            assert found["conversation"] == {"title": title}
        listed = await client("{ conversations(first: 10) { nodes { title } } }")
    assert sorted(n["title"] for n in listed["conversations"]["nodes"]) == ["after", "before"]


async def test_both_master_keys_may_come_from_files_while_rotating(
    live_servers: LiveServers, database_url: str, key_store_env: dict[str, str], tmp_path: Path
) -> None:
    """Secrets in containers come as mounted files: the current key could (KEY_FILE), the old
    one could not, so a rotation needed it in the environment. Now it may be
    CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY_FILE (before, that variable was ignored and the
    server with the new key refused to start: the key store's keys were another key's)."""
    old, new = tmp_path / "old.key", tmp_path / "new.key"
    old.write_text(OLD + "\n")
    new.write_text(NEW + "\n")
    server = await live_servers.start(
        database_url, env={**key_store_env, "CONVOGRAPH_ENCRYPTION_KEY_FILE": str(old)}
    )
    token = await server.token()
    async with server.client(token) as client:
        created = (await client(CREATE, {"title": "kept"}))["createConversation"]
    await server.stop()
    files = {"KEY_FILE": str(new), "PREVIOUS_KEY_FILE": str(old)}
    rotating = {**key_store_env, **{f"CONVOGRAPH_ENCRYPTION_{k}": v for k, v in files.items()}}
    server = await live_servers.start(database_url, env=rotating)
    async with server.client(token) as client:
        found = await client(READ, {"id": created["conversation"]["id"]})
    assert found["conversation"] == {"title": "kept"}
    code, out, err = await convograph(database_url, key_store_env, "keys", "status", **files)
    assert code == 0, err
    assert "previous (CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY_FILE)" in out, out
    code, out, err = await convograph(database_url, key_store_env, "keys", "rotate", **files)
    assert code == 0, err
    await server.stop()
    # The old key is no longer needed: the new one alone reads what it wrapped.
    server = await live_servers.start(
        database_url, env={**key_store_env, "CONVOGRAPH_ENCRYPTION_KEY_FILE": str(new)}
    )
    async with server.client(token) as client:
        found = await client(READ, {"id": created["conversation"]["id"]})
    assert found["conversation"] == {"title": "kept"}


async def test_a_server_kept_with_both_keys_of_an_earlier_rotation_leaves_readyz_after_the_next(
    live_servers: LiveServers, database_url: str, key_store_env: dict[str, str]
) -> None:
    """`keys rotate` says CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY *may* be removed once it is done:
    a server kept with both keys of that rotation (new, old) and left running through the next
    one (new to a third) can open no key wrapped again and make none, but /readyz kept it in
    rotation (200) until a request met that: only a server with no previous key was asked of
    the key store. Its old previous key is retired too: no rotation back, it leaves /readyz."""
    await rotate(database_url, key_store_env)  # OLD retired, to NEW
    both = {"CONVOGRAPH_ENCRYPTION_KEY": NEW, "CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY": OLD}
    kept = await live_servers.start(database_url, env={**key_store_env, **both})
    token = await kept.token()
    async with kept.client(token) as client:
        assert (await client(CREATE, {"title": "before"}))["createConversation"]["conversation"]
    async with http_client(timeout=30) as http:
        assert (await http.get(f"{kept.base_url}/readyz")).status_code == 200
        code, out, err = await convograph(
            database_url, key_store_env, "keys", "rotate", KEY=THIRD, PREVIOUS_KEY=NEW
        )
        assert code == 0, (out, err)
        refused = await http.get(f"{kept.base_url}/readyz")
        assert refused.status_code == 503 and "master key" in refused.text, refused.text
    assert "rotated" in kept.logs()
