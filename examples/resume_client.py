"""Resuming an event stream: a subscriber that lost its WebSocket picks up after the last
event it saw, without a gap or a duplicate (graphql-transport-ws over `websockets`).

    python examples/resume_client.py [URL [TOKEN]]
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from graphql_client import Client, Failed, check, run
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Subprotocol

EVENTS = """subscription($id: ID!, $after: String) {
  conversationEvents(conversationId: $id, after: $after) {
    kind version cursor messages { seq data } } }"""
CREATE = """mutation { createConversation(input: {title: "watched"}) {
  conversation { id } userErrors { code } } }"""
APPEND = """mutation($id: ID!, $text: String!) { appendMessages(input: {conversationId: $id,
  messages: [{role: "user", content: $text}]}) { messages { seq } userErrors { code } } }"""


def events(client: Client, conversation_id: str, after: str | None) -> Iterator[dict[str, Any]]:
    """The conversation's events after the cursor `after`, for as long as the caller reads:
    when the socket drops, or the server ends the stream, subscribe again with the cursor of
    the last event seen. Only CURSOR_EXPIRED ends it (read the state anew)."""
    url = client.url.replace("http", "ws", 1)
    while True:
        try:
            with connect(
                url,
                subprotocols=[Subprotocol("graphql-transport-ws")],
                additional_headers={"Authorization": client.http.headers["Authorization"]},
            ) as ws:
                ws.send(json.dumps({"type": "connection_init", "payload": {}}))
                check(json.loads(ws.recv(10))["type"] == "connection_ack", "no connection_ack")
                variables = {"id": conversation_id, "after": after}
                payload = {"query": EVENTS, "variables": variables}
                ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
                while True:
                    message = json.loads(ws.recv(10))
                    if message["type"] == "ping":
                        ws.send(json.dumps({"type": "pong"}))
                    elif message["type"] == "next" and not message["payload"].get("errors"):
                        event = message["payload"]["data"]["conversationEvents"]
                        after = event["cursor"]
                        yield event
                    else:  # the server ended the stream: resume, unless the cursor expired
                        errors = message["payload"] if message["type"] == "error" else []
                        errors = errors or message.get("payload", {}).get("errors") or [{}]
                        extensions = errors[0].get("extensions", {})
                        if extensions.get("code") == "CURSOR_EXPIRED":
                            raise Failed("CURSOR_EXPIRED: read the current state, then follow")
                        break
        except (ConnectionClosed, OSError):
            continue  # dropped: the same cursor resumes it


def flow(client: Client) -> None:
    created = client.mutate(CREATE, "createConversation")
    cid = created["conversation"]["id"]
    print(f"create_conversation -> {cid}")

    def append(text: str) -> None:
        client.mutate(APPEND, "appendMessages", id=cid, text=text)

    # A dashboard follows the conversation: a write made once it listens reaches it...
    stream = events(client, cid, None)
    listening = threading.Event()

    def write_until_seen() -> None:
        while not listening.wait(0.3):
            append("before the drop")

    writer = threading.Thread(target=write_until_seen)
    writer.start()
    try:
        first = next(e for e in stream if e["kind"] == "MESSAGES_APPENDED")
    finally:
        listening.set()
        writer.join()
    print(f"seen {first['kind']} v{first['version']}, cursor {first['cursor']}")
    stream.close()  # ...then it loses its connection,
    print("disconnected")
    for text in ("missed one", "missed two"):
        append(text)  # while the conversation goes on without it.

    seen = []
    for event in events(client, cid, first["cursor"]):
        text = event["messages"][0]["data"]["content"]
        print(f"resumed {event['kind']} v{event['version']}: {text}")
        if text != "before the drop":  # the writer's last ones may come after the cursor
            seen.append(text)
        if text == "missed two":
            append("live again")
        if text == "live again":
            break
    check(seen == ["missed one", "missed two", "live again"], f"resumed with {seen}")


if __name__ == "__main__":
    run(flow)
