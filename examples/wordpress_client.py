"""The WordPress Agents API principal conversation store over convograph, end to end.

Each step is one method of `WP_Agent_Principal_Conversation_Store` and the single GraphQL
operation that serves it. The workspace and owner come from the token (never from the
request), so a store is simply a client with that principal's token:

    python examples/wordpress_client.py http://127.0.0.1:8000/graphql cvg_…
"""

from __future__ import annotations

import uuid

from graphql_client import Client, check, run

ERRORS = "userErrors { code field message }"

CREATE_SESSION = f"""mutation($input: CreateConversationInput!) {{
  createConversation(input: $input) {{
    conversation {{ id agentSlug context pending workspace {{ key }} ownerType }} {ERRORS} }} }}"""
LIST_SESSIONS = """query($filter: ConversationFilter, $first: Int) {
  conversations(filter: $filter, first: $first) {
    nodes { id title } pageInfo { endCursor hasNextPage } } }"""
RECENT_PENDING = """query($context: String!, $tokenId: ID) {
  recentPendingConversation(withinSeconds: 600, context: $context, tokenId: $tokenId) { id } }"""
ACQUIRE_LOCK = f"""mutation($id: ID!) {{
  acquireLock(input: {{conversationId: $id, ttlSeconds: 300}}) {{
    token expiresAt {ERRORS} }} }}"""
RELEASE_LOCK = f"""mutation($id: ID!, $token: String!) {{
  releaseLock(input: {{conversationId: $id, token: $token}}) {{ released {ERRORS} }} }}"""
UPDATE_SESSION = f"""mutation($input: ReplaceTranscriptInput!) {{
  replaceTranscript(input: $input) {{
    conversation {{ version messageCount provider model transcript }} {ERRORS} }} }}"""
UPDATE_TITLE = f"""mutation($id: ID!, $title: String!) {{
  updateConversation(input: {{id: $id, title: $title}}) {{ conversation {{ title }} {ERRORS} }}
}}"""
GET_SESSION = """query($id: ID!) { conversation(id: $id) { id version } }"""
DELETE_SESSION = f"""mutation($id: ID!) {{
  deleteConversation(input: {{id: $id}}) {{ deleted {ERRORS} }} }}"""


def message(role: str, text: str) -> dict[str, object]:
    """The store's message envelope."""
    return {
        "schema": "agents-api.message",
        "version": 1,
        "type": "text",
        "role": role,
        "content": text,
        "payload": {},
        "metadata": {},
    }


def flow(client: Client) -> None:
    token_id = f"t-{uuid.uuid4().hex[:8]}"

    # create_session_for_owner(workspace, owner, agent_slug, metadata, context) -> UUIDv4
    session = client.mutate(
        CREATE_SESSION,
        "createConversation",
        input={"agentSlug": "support", "metadata": {"token_id": token_id}, "context": "chat"},
    )["conversation"]
    session_id = session["id"]
    check(session["pending"], f"a new session is pending: {session}")
    print(
        f"create_session_for_owner -> {session_id} "
        f"(workspace {session['workspace']['key']}, owner {session['ownerType'].lower()})"
    )

    # get_recent_pending_session_for_owner(600, "chat", token_id): a retry finds it again.
    recent = client.query(RECENT_PENDING, context="chat", tokenId=token_id)
    check(recent["recentPendingConversation"] == {"id": session_id}, f"recent: {recent}")
    print(f"get_recent_pending_session_for_owner -> {session_id} (no duplicate on retry)")

    # acquire_session_lock(id, 300): one holder at a time.
    lock = client.mutate(ACQUIRE_LOCK, "acquireLock", id=session_id)
    client.mutate(ACQUIRE_LOCK, "acquireLock", expect="LOCKED", id=session_id)
    print(f"acquire_session_lock -> held until {lock['expiresAt']}; a second holder -> LOCKED")

    # update_session(id, messages, metadata, provider, model, response_id): the complete
    # transcript, conditional on the version read, so two writers cannot lose turns.
    version = client.query(GET_SESSION, id=session_id)["conversation"]["version"]
    transcript = [message("user", "I want a refund"), message("assistant", "Order number?")]
    update = {
        "conversationId": session_id,
        "messages": transcript,
        "expectedVersion": version,
        "provider": "openai",
        "model": "gpt-x",
        "providerResponseId": "resp_1",
    }
    updated = client.mutate(UPDATE_SESSION, "replaceTranscript", input=update)["conversation"]
    check(updated["transcript"] == transcript, f"stored transcript: {updated['transcript']}")
    check((updated["provider"], updated["model"]) == ("openai", "gpt-x"), f"{updated}")
    client.mutate(UPDATE_SESSION, "replaceTranscript", expect="CONFLICT", input=update)
    print(
        f"update_session -> version {updated['version']}, {updated['messageCount']} messages; "
        "a stale writer -> CONFLICT"
    )

    # release_session_lock(id, token): a stale token releases nothing (agents-api #470).
    stale = client.mutate(RELEASE_LOCK, "releaseLock", id=session_id, token="not-the-token")
    check(stale["released"] is False, f"a stale token released the lock: {stale}")
    released = client.mutate(RELEASE_LOCK, "releaseLock", id=session_id, token=lock["token"])
    check(released["released"] is True, f"release: {released}")
    print("release_session_lock -> stale token: kept; holder's token: released")

    # update_title(id, title)
    titled = client.mutate(UPDATE_TITLE, "updateConversation", id=session_id, title="Refund")
    check(titled["conversation"]["title"] == "Refund", f"title: {titled}")
    print("update_title -> 'Refund'")

    # list_sessions_for_owner(workspace, owner, args): newest first, filtered, paged.
    listed = client.query(
        LIST_SESSIONS, filter={"agentSlug": "support", "context": "chat"}, first=20
    )["conversations"]
    check(session_id in [n["id"] for n in listed["nodes"]], f"listed: {listed}")
    print(f"list_sessions_for_owner(support, chat) -> {len(listed['nodes'])} session(s)")

    # delete_session(id), idempotent.
    check(client.mutate(DELETE_SESSION, "deleteConversation", id=session_id)["deleted"], "delete")
    again = client.mutate(DELETE_SESSION, "deleteConversation", id=session_id)
    check(again["deleted"] is False, f"deleting twice: {again}")
    check(client.query(GET_SESSION, id=session_id)["conversation"] is None, "gone")
    print("delete_session -> deleted; again -> nothing to delete")


if __name__ == "__main__":
    run(flow)
