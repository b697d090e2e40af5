"""A database that runs out of space: STORAGE_FULL, nothing half-written, and back without
a restart once space returns.

SQLite's file lives on a small tmpfs; PostgreSQL's database lives in a tablespace on one
(its WAL stays on the server's own disk: the closest fault a test can cause there). Both
need root to mount the tmpfs, as CI has.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PG_URL, GraphQLClient, Server, _pg_admin, _with_db

# On PostgreSQL a full tablespace fails every checkpoint of the cluster, and DROP DATABASE
# forces one: no other test may drop a database (nor another full-disk test fill its disk)
# meanwhile (tools/test_passes.sh runs `serial` tests alone).
pytestmark = pytest.mark.serial

CREATE = 'mutation { createConversation(input: {title: "full"}) { conversation { id } } }'
APPEND = """mutation($id: ID!, $messages: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $messages}) {
    conversation { messageCount } userErrors { code field message } } }"""
READ = "query($id: ID!) { conversation(id: $id) { messageCount transcript } }"


@dataclass
class Disk:
    path: Path

    def resize(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)


def _mount(size: str) -> Disk:
    if os.geteuid() != 0:
        pytest.skip("!! needs root to mount a small tmpfs (CI runs as root)")
    path = Path(f"/tmp/convograph-small-disk-{uuid.uuid4().hex[:8]}")
    path.mkdir(mode=0o755)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        path.rmdir()
        pytest.skip(f"!! cannot mount a tmpfs here: {mounted.stderr.strip()}")
    return Disk(path)


def _unmount(disk: Disk) -> None:
    subprocess.run(["umount", "-l", str(disk.path)], check=False)
    shutil.rmtree(disk.path, ignore_errors=True)


@pytest.fixture
def disk(sqlite_template: Path, pg_template: str | None) -> Iterator[Disk]:
    # SQLite: the migrated template and its WAL leave a few MB to fill. PostgreSQL: a
    # database copied from the template takes about 8 MB of its tablespace.
    disk = _mount("6m" if pg_template is None else "16m")
    try:
        yield disk
    finally:
        _unmount(disk)


@pytest.fixture
def database_url(disk: Disk, sqlite_template: Path, pg_template: str | None) -> Iterator[str]:
    """This test's database, on the small disk."""
    if pg_template is None:
        path = disk.path / "convograph.db"
        shutil.copy(sqlite_template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    shutil.chown(disk.path, "postgres", "postgres")
    space = f"cg_small_{uuid.uuid4().hex[:8]}"
    name = f"cg_test_{uuid.uuid4().hex[:12]}"
    _pg_admin(f"CREATE TABLESPACE {space} LOCATION '{disk.path}'")
    try:
        _pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}" TABLESPACE {space}')
        yield _with_db(PG_URL or "", name)
        # DROP DATABASE forces a checkpoint, which must write the blocks still dirty in the
        # full tablespace: give the disk its room back first (else "checkpoint request failed").
        disk.resize("64m")
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        _pg_admin(f"DROP TABLESPACE IF EXISTS {space}")


def _blob(i: int) -> str:
    # Incompressible, so that PostgreSQL's TOAST compression does not stretch the disk.
    return f"{i}:" + base64.b64encode(os.urandom(45_000)).decode()


async def _append(gql: GraphQLClient, cid: str, i: int) -> dict[str, Any]:
    payload: dict[str, Any] = (
        await gql(APPEND, {"id": cid, "messages": [{"role": "user", "content": _blob(i)}]})
    )["appendMessages"]
    return payload


async def test_a_full_disk_refuses_writes_with_storage_full_and_loses_nothing(
    gql: GraphQLClient, server: Server, disk: Disk
) -> None:
    cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
    acknowledged: list[int] = []
    refusal: dict[str, Any] | None = None
    for i in range(600):
        payload = await _append(gql, cid, i)
        if payload["userErrors"]:
            refusal = payload
            break
        acknowledged.append(i)
    assert refusal is not None, "the disk never filled"
    assert acknowledged, "not one append fitted: the disk was too small to test anything"
    [error] = refusal["userErrors"]
    assert error["code"] == "STORAGE_FULL" and "disk is full" in error["message"]
    assert refusal["conversation"] is None

    # Refused again, and what was acknowledged is stored whole, in order.
    assert [e["code"] for e in (await _append(gql, cid, 10_000))["userErrors"]] == ["STORAGE_FULL"]
    stored = (await gql(READ, {"id": cid}))["conversation"]
    assert stored["messageCount"] == len(acknowledged)
    assert [int(m["content"].split(":", 1)[0]) for m in stored["transcript"]] == acknowledged

    health = (await gql.http.get("/healthz")).json()
    ready = await gql.http.get("/readyz")
    assert health["storage"] == "full"
    assert ready.status_code == 200 and ready.json()["storage"] == "full"
    metrics = (await gql.http.get("/metrics")).text
    refused = [
        line for line in metrics.splitlines() if line.startswith("convograph_storage_full_refusals")
    ]
    assert refused and float(refused[0].split()[-1]) >= 2
    assert "convograph_storage_full 1.0" in metrics

    # Space returns: writes succeed again, without a restart.
    disk.resize("64m")
    payload = await _append(gql, cid, len(acknowledged))
    assert payload["userErrors"] == []
    assert payload["conversation"]["messageCount"] == len(acknowledged) + 1
    assert (await gql.http.get("/healthz")).json()["storage"] == "ok"
    assert "convograph_storage_full 0.0" in (await gql.http.get("/metrics")).text


async def test_the_log_says_which_database_is_full(
    gql: GraphQLClient, server: Server, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
    with caplog.at_level("ERROR", logger="convograph.storage"):
        for i in range(600):
            if (await _append(gql, cid, i))["userErrors"]:
                break
    [record] = [r for r in caplog.records if r.name == "convograph.storage"]
    where = server.services.db.full_disk.where
    assert where in record.getMessage()
    assert (str(disk.path) in where) or ("postgresql" in where and "@" in where)
