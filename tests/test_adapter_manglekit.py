"""The Manglekit Go adapter (adapters/manglekit) against a live server.

`go test ./...` runs the adapter's own tests with CONVOGRAPH_URL and CONVOGRAPH_TOKEN
pointing at a real server: its unit tests, and its live tests, which hydrate, checkpoint
and delete as Manglekit's DurableStateManager does. Then this test reads what the Go side
wrote back through GraphQL (sessionState, sessionStateHistory) and checks every key of
the document. The faults a server can be made to produce run against one too: a revoked
token, a server that stops answering (SIGSTOP) and a server that is gone.

Without a Go toolchain (Debian: `apt-get install golang-go`) every test here skips with
"SKIPPED: no go toolchain". The Go build is offline: GOPROXY=off, GOFLAGS=-mod=mod,
GOTOOLCHAIN=local, with GOPATH in a temporary directory; the build cache is Go's own.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.commands import run_command

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = ROOT / "adapters" / "manglekit"
GO = shutil.which("go")
NO_GO = (
    "SKIPPED: no go toolchain: the Manglekit Go adapter (adapters/manglekit) was NOT tested. "
    "Install Go >= 1.19 (Debian: apt-get install golang-go) to run it."
)
GO_TIMEOUT = 120.0  # a cold build included; a run takes a few seconds
# The server's body limit for these tests: small, so that the Go side's 413 test sends
# 1 MiB rather than the default 32 MiB.
MAX_BODY_BYTES = 1024 * 1024
FAULT_TIMEOUT_SECONDS = 2

STATE = """query($id: String!) {
  sessionState(sessionId: $id) {
    sessionId version state logicalFacts feedbackHistory payloadType outcome }
  sessionStateHistory(sessionId: $id, first: 50) {
    totalCount nodes { version outcome state } } }"""

# The adapter's live tests; each must have run and passed, none skipped.
LIVE_TESTS = {
    "TestLiveFirstRunGetIsAnUntypedNil",
    "TestLiveTheSeedDocumentRoundTrips",
    "TestLiveTheManagerLoop",
    "TestLiveDeleteIsIdempotent",
    "TestLiveConflicts",
    "TestLiveConflictsAcrossADelete",
    "TestLiveConflictsAfterItsOwnDelete",
    "TestLiveConflictsWithoutAVersionSeen",
    "TestLiveALostAnswerIsNotAConflictWithItself",
    "TestLiveALostAnswerAfterADeleteIsNotAConflictWithItself",
    "TestLiveTheDigestKeepsApartWhatTheServerDoes",
    "TestLiveRefusedDocuments",
    "TestLiveABodyOverTheLimitIs413",
    "TestLiveInvalidUTF8",
    "TestLiveASessionIDThatIsNotUTF8IsRefused",
    "TestLiveATokenWithALineBreakIsRefused",
    "TestLiveARedirectIsNamed",
    "TestLiveADoneContextFailsWithItsError",
}
# The fault tests skip in the plain run; each is run below with the server it needs.
FAULT_TESTS = {
    "TestFaultRevokedToken",
    "TestFaultServerDown",
    "TestFaultServerStalled",
    "TestFaultRateLimited",
}


@pytest.fixture(autouse=True)
def go_toolchain() -> None:
    if GO is None:
        warnings.warn(NO_GO, stacklevel=1)
        pytest.skip(NO_GO)


@pytest.fixture(scope="module")
def go_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GOPATH for this module's runs, and their GOCACHE where Go has none of its own."""
    return tmp_path_factory.mktemp("go-home")


@functools.cache
def users_go_cache() -> str:
    """Go's build cache (`go env GOCACHE`), which every go command of this user shares and
    which concurrent builds may use: the standard library is compiled once on a machine, not
    again in each pytest worker and run. Empty when Go has none (no HOME)."""
    assert GO is not None
    found = subprocess.run([GO, "env", "GOCACHE"], capture_output=True, text=True, check=False)
    cache = found.stdout.strip()
    return cache if found.returncode == 0 and cache not in ("", "off") else ""


def seed_document(session_id: str) -> dict[str, Any]:
    """The adapter's testdata document, as its Go tests send it for `session_id`."""
    doc = json.loads((ADAPTER / "testdata" / "session_state.json").read_text())
    doc["session_id"] = session_id
    return doc


def key_paths(value: Any, prefix: str = "") -> list[str]:
    """Every key of a document as a path (`a.b[0].c`), in document order."""
    paths: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.append(path)
            paths += key_paths(item, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            paths += key_paths(item, f"{prefix}[{i}]")
    return paths


@dataclass
class GoRun:
    returncode: int
    events: list[dict[str, Any]]
    output: str  # every line go test printed, for assertion messages

    def results(self) -> dict[str, str]:
        """Top-level test name -> pass / fail / skip."""
        return {
            e["Test"]: e["Action"]
            for e in self.events
            if e.get("Test") and "/" not in e["Test"] and e["Action"] in ("pass", "fail", "skip")
        }

    def logs(self, test: str) -> list[str]:
        """What `test` logged with t.Logf, one line each."""
        lines = [e.get("Output", "") for e in self.events if e.get("Test") == test]
        return [line.strip() for line in lines if re.match(r"\s+\w+_test\.go:\d+: ", line)]


async def go_test(go_home: Path, env: dict[str, str], *args: str) -> GoRun:
    """`go test -json -count=1 ARGS ./...` in the adapter, offline, with `env` added."""
    assert GO is not None
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVOGRAPH_", "GO"))}
    child_env.update(
        GOCACHE=users_go_cache() or str(go_home / "cache"),
        GOPATH=str(go_home / "path"),
        GOFLAGS="-mod=mod",
        GOTOOLCHAIN="local",
        GOPROXY="off",
        GOSUMDB="off",
        GOWORK="off",
        CGO_ENABLED="0",
        **env,
    )
    code, text, _ = await run_command(
        GO,
        "test",
        "-json",
        "-count=1",
        *args,
        "./...",
        cwd=ADAPTER,
        env=child_env,
        limit=GO_TIMEOUT,
        merge_stderr=True,
    )
    events, lines = [], []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            lines.append(line)  # build output, not an event
            continue
        events.append(event)
        lines.append(event.get("Output", "").rstrip("\n"))
    return GoRun(code, events, "\n".join(lines))


async def read_back(server: LiveServer, token: str, session_id: str) -> dict[str, Any]:
    async with server.client(token) as gql:
        return await gql(STATE, {"id": session_id})


async def test_go_tests_round_trip_through_a_live_server(
    live_servers: LiveServers, database_url: str, go_home: Path
) -> None:
    server = await live_servers.start(
        database_url, env={"CONVOGRAPH_MAX_BODY_BYTES": str(MAX_BODY_BYTES)}
    )
    token = await server.token()
    prefix = f"go-{uuid.uuid4().hex[:10]}"
    run = await go_test(
        go_home,
        {
            "CONVOGRAPH_URL": server.http_url,
            "CONVOGRAPH_TOKEN": token,
            "CONVOGRAPH_SESSION_PREFIX": prefix,
            "CONVOGRAPH_MAX_BODY_BYTES": str(MAX_BODY_BYTES),
        },
    )
    assert run.returncode == 0, run.output
    results = run.results()
    assert {t: results.get(t) for t in LIVE_TESTS} == dict.fromkeys(LIVE_TESTS, "pass"), run.output
    assert {t for t, r in results.items() if r == "skip"} == FAULT_TESTS, run.output
    assert len([r for r in results.values() if r == "pass"]) > len(LIVE_TESTS), "no unit tests ran"

    # The SEEDS.md document, every key, as the Go side stored it: version 1 as []byte, version
    # 2 through the Go types; both exactly the document, in its key order.
    session_id = f"{prefix}-roundtrip"
    doc = seed_document(session_id)
    data = await read_back(server, token, session_id)
    latest, history = data["sessionState"], data["sessionStateHistory"]
    assert latest is not None, "the round trip left no checkpoint"
    assert latest["sessionId"] == session_id
    assert latest["version"] == 2
    assert latest["outcome"] == "PROCEED"
    assert key_paths(latest["state"]) == key_paths(doc)
    assert latest["state"] == doc
    assert json.dumps(latest["state"]) == json.dumps(doc)  # the same key order everywhere
    assert len(key_paths(doc)) >= 50  # audit_records, rules, bindings, violations, ...
    assert latest["state"]["active_envelope"]["data"]["ticket"]["amount"] == 12345678901234567890
    assert latest["logicalFacts"] == doc["logical_facts"]
    assert latest["feedbackHistory"] == doc["execution_context"]["feedback_history"]
    assert latest["payloadType"] == "support.Ticket"
    assert history["totalCount"] == 2
    assert [n["version"] for n in history["nodes"]] == [2, 1]
    assert [n["outcome"] for n in history["nodes"]] == ["PROCEED", "PROCEED"]
    assert [n["state"] for n in history["nodes"]] == [doc, doc]
    assert history["nodes"][1]["state"]["audit_records"] == doc["audit_records"]

    # The manager loop ended with Delete: every version is gone.
    data = await read_back(server, token, f"{prefix}-loop")
    assert data["sessionState"] is None
    assert data["sessionStateHistory"]["totalCount"] == 0

    # Conflicts: v1 (a), v2 (b), a's two stale writes refused, v3 (a after re-reading), the
    # ExpectVersion(1) write refused, v4 (last write wins).
    data = await read_back(server, token, f"{prefix}-conflict")
    assert [n["version"] for n in data["sessionStateHistory"]["nodes"]] == [4, 3, 2, 1]
    assert data["sessionState"]["state"] == seed_document(f"{prefix}-conflict")

    # Invalid UTF-8 in a Go string: encoding/json stored U+FFFD for each bad byte. The same
    # bytes as JSON text were refused before any request: nothing stored.
    data = await read_back(server, token, f"{prefix}-utf8")
    assert data["sessionStateHistory"]["totalCount"] == 1
    stored = data["sessionState"]["state"]
    expected = seed_document(f"{prefix}-utf8")
    expected["execution_context"]["feedback_history"] = ["bad \ufffd byte"]
    expected["execution_context"]["current_history"][0]["content"] = "caf\ufffd"
    assert stored == expected
    assert data["sessionState"]["feedbackHistory"] == ["bad \ufffd byte"]

    # Session ids that are not UTF-8 were refused: the one they would have been sent as (each
    # bad byte a U+FFFD) holds its single checkpoint, neither overwritten nor deleted.
    data = await read_back(server, token, f"{prefix}-utf8-id-\ufffd")
    assert data["sessionStateHistory"]["totalCount"] == 1
    assert data["sessionState"]["payloadType"] == "the neighbour's own"

    # What was refused or never written left nothing.
    names = ("first-run", "never-written", "refused", "too-large", "utf8-raw", "token-line-break")
    for name in (*names, *(f"redirect-{code}" for code in (301, 302, 303, 307))):
        data = await read_back(server, token, f"{prefix}-{name}")
        assert data["sessionState"] is None, name
        assert data["sessionStateHistory"]["totalCount"] == 0, name


async def test_a_revoked_token_is_a_clear_error(live_server: LiveServer, go_home: Path) -> None:
    label = f"manglekit-revoked-{uuid.uuid4().hex[:8]}"
    revoked = await live_server.token(label=label)
    listing = await live_server.cli("token", "list")
    (token_id,) = [line.split("\t")[0] for line in listing.splitlines() if f"\t{label}\t" in line]
    await live_server.cli("token", "revoke", token_id)
    run = await go_test(
        go_home,
        {
            "CONVOGRAPH_URL": live_server.http_url,
            "CONVOGRAPH_TOKEN": await live_server.token(),
            "CONVOGRAPH_REVOKED_TOKEN": revoked,
        },
        "-run",
        "^TestFaultRevokedToken$",
    )
    assert run.returncode == 0, run.output
    assert run.results() == {"TestFaultRevokedToken": "pass"}, run.output
    logs = run.logs("TestFaultRevokedToken")
    assert len(logs) == 3, logs
    said = "HTTP 401 UNAUTHENTICATED: missing, unknown, revoked or expired bearer token"
    assert all(said in line for line in logs), logs


async def test_a_rate_limited_request_says_when_to_come_back(
    live_servers: LiveServers, database_url: str, go_home: Path
) -> None:
    """Over the token's rate limit, a Set fails with ErrUnavailable and the server's
    Retry-After, stores nothing, and goes through once that wait is over."""
    server = await live_servers.start(
        database_url,
        env={"CONVOGRAPH_RATE_LIMIT_PER_SECOND": "1", "CONVOGRAPH_RATE_LIMIT_BURST": "1"},
    )
    run = await go_test(
        go_home,
        {
            "CONVOGRAPH_RATE_LIMITED_URL": server.http_url,
            "CONVOGRAPH_RATE_LIMITED_TOKEN": await server.token(),
        },
        "-run",
        "^TestFaultRateLimited$",
    )
    assert run.returncode == 0, run.output
    assert run.results() == {"TestFaultRateLimited": "pass"}, run.output
    logs = run.logs("TestFaultRateLimited")
    assert len(logs) == 1 and "HTTP 429 RATE_LIMITED" in logs[0], logs
    assert "(retry after 1s)" in logs[0], logs


async def test_a_stalled_then_stopped_server_fails_within_the_timeout(
    live_server: LiveServer, go_home: Path
) -> None:
    env = {"CONVOGRAPH_FAULT_TIMEOUT": f"{FAULT_TIMEOUT_SECONDS}s"}
    process = live_server.process
    assert process is not None

    # Stalled: the process is stopped (SIGSTOP); the kernel still accepts connections, and
    # nothing answers. Get fails at the provider's timeout; a cancelled Set before it.
    process.send_signal(signal.SIGSTOP)
    try:
        stalled = await go_test(
            go_home,
            {**env, "CONVOGRAPH_STALLED_URL": live_server.http_url},
            "-run",
            "^TestFaultServerStalled$",
        )
    finally:
        process.send_signal(signal.SIGCONT)
    assert stalled.returncode == 0, stalled.output
    assert stalled.results() == {"TestFaultServerStalled": "pass"}, stalled.output

    # Gone: nothing listens on the port any more; each call fails at once, before its timeout.
    await live_server.stop()
    down = await go_test(
        go_home,
        {**env, "CONVOGRAPH_DOWN_URL": live_server.http_url},
        "-run",
        "^TestFaultServerDown$",
    )
    assert down.returncode == 0, down.output
    assert down.results() == {"TestFaultServerDown": "pass"}, down.output
    logs = down.logs("TestFaultServerDown")
    assert len(logs) == 3 and all("connection refused" in line for line in logs), logs
    # Shown with -s, or when a later assertion fails: what was measured.
    print("\n".join(stalled.logs("TestFaultServerStalled") + logs))
