"""Resuming an event stream: a subscriber that lost its WebSocket picks up after the last
event it saw, without a gap or a duplicate (graphql-transport-ws over `websockets`).

    python examples/resume_client.py [URL [TOKEN]]
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from graphql_client import Client, Failed, check, run
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Subprotocol

EVENTS = """subscription($id: ID!, $after: String) {
  conversationEvents(conversationId: $id, after: $after) {
    kind conversationId version cursor messages { seq data } } }"""
CREATE = """mutation { createConversation(input: {title: "watched"}) {
  conversation { id } userErrors { code } } }"""
DELETE = """mutation($id: ID!) { deleteConversation(input: {id: $id}) {
  deleted userErrors { code } } }"""
APPEND = """mutation($id: ID!, $text: String!) { appendMessages(input: {conversationId: $id,
  messages: [{role: "user", content: $text}]}) { messages { seq } userErrors { code } } }"""


# What ends a stream for good: a resume would be refused the same way.
FINAL = {"NOT_FOUND", "FORBIDDEN", "UNAUTHENTICATED", "INVALID_INPUT", "CURSOR_EXPIRED"}
# A WebSocket the server closed for its token (4401, 4403) or for a request it refuses (4400).
REFUSED_CLOSES = {4400, 4401, 4403}


def events(client: Client, conversation_id: str, after: str | None) -> Iterator[dict[str, Any]]:
    """The conversation's events after the cursor `after`, for as long as the caller reads:
    when the socket drops, or the server ends the stream, subscribe again with the cursor of
    the last event seen, after a wait that doubles while it keeps failing. It ends after the
    conversation's own CONVERSATION_DELETED; it raises Failed when the server refuses the
    stream for good (CURSOR_EXPIRED: read the state anew; NOT_FOUND: the conversation is
    gone; FORBIDDEN or a closed 4401/4403: the token no longer reads it)."""
    url = client.url.replace("http", "ws", 1)
    delay = 0.5
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
                        after, delay = event["cursor"], 0.5
                        yield event
                        if (
                            event["kind"] == "CONVERSATION_DELETED"
                            and event["conversationId"] == conversation_id
                        ):
                            return  # gone: nothing more will come
                    else:  # the server ended the stream: resume, unless for good
                        errors = message["payload"] if message["type"] == "error" else []
                        errors = errors or message.get("payload", {}).get("errors") or [{}]
                        code = errors[0].get("extensions", {}).get("code")
                        if code in FINAL:
                            raise Failed(f"{code}: {errors[0].get('message')}")
                        break
        except ConnectionClosed as closed:
            if closed.rcvd is not None and closed.rcvd.code in REFUSED_CLOSES:
                raise Failed(f"closed {closed.rcvd.code}: {closed.rcvd.reason}") from None
        except OSError:
            pass  # the server out of reach: the same cursor resumes it
        time.sleep(delay)
        delay = min(delay * 2, 30.0)


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

    # A deleted conversation ends its stream for good (the loop does not resubscribe).
    last = None
    for event in events(client, cid, first["cursor"]):
        last = event
        if event["messages"] and event["messages"][0]["data"]["content"] == "live again":
            client.mutate(DELETE, "deleteConversation", id=cid)
    check(last is not None and last["kind"] == "CONVERSATION_DELETED", f"ended with {last}")
    print("stream ended: the conversation was deleted")


if __name__ == "__main__":
    run(flow)
