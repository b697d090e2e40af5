"""The client examples in examples/ run end to end against a real server, so they never rot;
what they stored is read back through the API."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TIMEOUT = 60.0


async def run_example(
    name: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Run examples/NAME as a user would (its own process); exit code, stdout, stderr."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOGRAPH_")}
    child_env.update(env or {})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / name),
        *args,
        env=child_env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_entropic_example(live_server: LiveServer) -> None:
    token = await live_server.token(workspace="site:entropic", owner="runtime:engine")
    code, out, err = await run_example("entropic_client.py", live_server.http_url, token)
    assert code == 0, out + err
    assert out.rstrip().endswith("OK")
    for step in ("create_conversation", "save_snapshot", "resume_delegation", "followup"):
        assert f"{step}" in out

    # The root conversation it made holds the batch, a snapshot and two delegations.
    conversation_id = re.search(r"create_conversation -> ([0-9a-f-]{36})", out)
    assert conversation_id, out
    async with live_server.client(token) as gql:
        data = await gql(
            """query($id: ID!) { conversation(id: $id) {
                 title messageCount snapshots { totalCount }
                 delegations { nodes { targetTier status summary
                                       childConversation { messageCount } } } } }""",
            {"id": conversation_id.group(1)},
        )
    root = data["conversation"]
    assert (root["title"], root["messageCount"], root["snapshots"]["totalCount"]) == (
        "session",
        2,
        1,
    )
    first, resumed = root["delegations"]["nodes"]
    assert (first["targetTier"], first["status"]) == ("researcher", "COMPLETED")
    assert "three tiers" in first["summary"]
    assert first["childConversation"]["messageCount"] == 2
    assert resumed["childConversation"]["messageCount"] == 3


async def test_manglekit_example(live_server: LiveServer) -> None:
    token = await live_server.token(workspace="app:mangle", owner="runtime:loop")
    code, out, err = await run_example("manglekit_client.py", live_server.http_url, token)
    assert code == 0, out + err
    assert "Checkpoint(HALT) -> POISONED_STATE" in out and out.rstrip().endswith("OK")

    # The flow ends with Delete: nothing of the session is left.
    session_id = re.search(r"Hydrate\((example-[0-9a-f]+)\)", out)
    assert session_id, out
    async with live_server.client(token) as gql:
        data = await gql(
            """query($s: String!) { sessionState(sessionId: $s) { version }
                 sessionStateHistory(sessionId: $s) { totalCount } }""",
            {"s": session_id.group(1)},
        )
    assert data == {"sessionState": None, "sessionStateHistory": {"totalCount": 0}}


async def test_wordpress_example_with_url_and_token_from_the_environment(
    live_server: LiveServer,
) -> None:
    token = await live_server.token(workspace="site:42", owner="user:alice")
    env = {"CONVOGRAPH_URL": live_server.http_url, "CONVOGRAPH_TOKEN": token}
    code, out, err = await run_example("wordpress_client.py", env=env)
    assert code == 0, out + err
    assert "(workspace site:42, owner user)" in out and out.rstrip().endswith("OK")

    # The flow ends with delete_session: the session is gone for its owner.
    session_id = re.search(r"create_session_for_owner -> ([0-9a-f-]{36})", out)
    assert session_id, out
    async with live_server.client(token) as gql:
        data = await gql(
            "query($id: ID!) { conversation(id: $id) { id } }", {"id": session_id.group(1)}
        )
    assert data == {"conversation": None}


async def test_resume_example(live_server: LiveServer) -> None:
    token = await live_server.token(workspace="site:7", owner="user:dashboard")
    code, out, err = await run_example("resume_client.py", live_server.http_url, token)
    assert code == 0, out + err
    assert "disconnected" in out and out.rstrip().endswith("OK")
    assert "resumed MESSAGES_APPENDED" in out and "live again" in out
    # Its loop ends with the conversation: it resubscribed forever, some 260 times a second,
    # each refused NOT_FOUND.
    assert "stream ended: the conversation was deleted" in out


async def test_examples_exit_non_zero_on_errors(live_server: LiveServer) -> None:
    read_only = await live_server.token(scope="read")
    for example in ("entropic_client.py", "manglekit_client.py", "wordpress_client.py"):
        code, out, err = await run_example(example, live_server.http_url, "cvg_not_a_token")
        assert code == 1, out + err
        assert "HTTP 401" in err and "OK" not in out

        # A token that may only read: the first write comes back as a userError.
        code, out, err = await run_example(example, live_server.http_url, read_only)
        assert code == 1, out + err
        assert "FORBIDDEN" in err and "OK" not in out
