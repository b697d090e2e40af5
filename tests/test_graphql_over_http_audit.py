"""The GraphQL-over-HTTP specification's reference audit against a live server.

`auditServer` of the `graphql-http` npm package (the audit the specification's authors
publish) runs every check of the specification against convograph's /graphql over a real
uvicorn server and database: every one of them must pass, none a warning or a notice.

The package comes from the npm registry, installed once into a cache directory
(~/.cache/convograph-tests, or $XDG_CACHE_HOME) and reused. Without node and npm the test
is skipped, loudly (.ci/run installs Debian's nodejs and npm).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from tests.commands import run_command

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

# Pinned, so that a new release's new checks fail here only once this line changes.
GRAPHQL_HTTP = "graphql-http@1.23.1"
INSTALL_TIMEOUT = 300.0
AUDIT_TIMEOUT = 120.0

# Runs the audit with the token on every request; prints each result as JSON.
AUDIT_SCRIPT = """
const { auditServer } = require("graphql-http");
const token = process.env.AUDIT_TOKEN;
const fetchFn = (url, init = {}) =>
  fetch(url, { ...init, headers: { ...(init.headers || {}), authorization: `Bearer ${token}` } });
auditServer({ url: process.env.AUDIT_URL, fetchFn }).then(
  (results) => {
    const out = results.map(({ id, name, status, reason }) => ({ id, name, status, reason }));
    process.stdout.write(JSON.stringify(out));
  },
  (err) => { console.error(err); process.exit(2); },
);
"""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "convograph-tests" / GRAPHQL_HTTP.replace("@", "-")


def skip_loudly(why: str) -> NoReturn:
    message = (
        f"SKIPPED: the GraphQL-over-HTTP audit (graphql-http's auditServer) was NOT run: {why}. "
        "Install Node.js and npm to run it: apt-get install -y nodejs npm"
    )
    warnings.warn(message, stacklevel=2)
    pytest.skip(message)


def installed_package() -> Path:
    """The directory whose node_modules holds graphql-http, installed from npm if need be."""
    target = cache_dir()
    if (target / "node_modules" / "graphql-http" / "package.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Installed beside the cache and moved in whole, so that a half-done install is never used.
    staging = Path(tempfile.mkdtemp(prefix="install-", dir=target.parent))
    try:
        try:
            done = subprocess.run(
                [
                    *("npm", "install", "--no-audit", "--no-fund", "--loglevel=error"),
                    *("--prefix", str(staging), GRAPHQL_HTTP),
                ],
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            skip_loudly(f"`npm install {GRAPHQL_HTTP}` took more than {INSTALL_TIMEOUT}s")
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-1000:]
            skip_loudly(f"`npm install {GRAPHQL_HTTP}` failed ({done.returncode}): {output}")
        try:
            staging.rename(target)
        except OSError:  # another run installed it meanwhile
            if not (target / "node_modules" / "graphql-http").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


async def audit(server: LiveServer) -> list[dict[str, Any]]:
    package = await asyncio.to_thread(installed_package)
    env = {
        **os.environ,
        "AUDIT_URL": server.http_url,
        "AUDIT_TOKEN": await server.token(),
        "NODE_PATH": str(package / "node_modules"),
    }
    code, out, err = await run_command(
        "node", "-e", AUDIT_SCRIPT, cwd=package, env=env, limit=AUDIT_TIMEOUT
    )
    assert code == 0, f"the audit failed to run ({code}):\n{err}\n{server.logs()[-3000:]}"
    results: list[dict[str, Any]] = json.loads(out)
    return results


@pytest.fixture(autouse=True)
def node_and_npm() -> None:
    """Before the live server starts: without node and npm there is nothing to run."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        skip_loudly(f"{' and '.join(missing)} not found")


async def test_the_graphql_over_http_audit_passes_every_check(live_server: LiveServer) -> None:
    results = await audit(live_server)
    counts = Counter(result["status"] for result in results)
    print(f"graphql-http audit: {dict(counts)} of {len(results)} checks")
    failed = [
        f"{r['status'].upper()} {r['id']} {r['name']}: {r['reason']}"
        for r in results
        if r["status"] != "ok"
    ]
    assert not failed, "\n".join(failed)
    assert counts == {"ok": len(results)} and len(results) > 50, counts
