"""GraphQL documents that many test files send, and typed helpers for the most used of them.

A file keeps a document of its own where it selects other fields than these (its assertions
compare a whole payload, say) or where the operation's name is what it tests (metrics and
access-log lines count operations by name). Each helper fails on a userError, so that a
test's setup cannot go wrong unnoticed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import GraphQLClient

VIEWER = "{ viewer { ownerKey } }"

CREATE = """mutation($title: String = "t") { createConversation(input: {title: $title}) {
  conversation { id version } userErrors { code } } }"""
APPEND = """mutation($id: ID!, $m: [JSON!]!, $v: Int) {
  appendMessages(input: {conversationId: $id, messages: $m, expectedVersion: $v}) {
    conversation { version } messages { seq role data } userErrors { code field } } }"""
REPLACE = """mutation($id: ID!, $m: [JSON!]!, $v: Int) {
  replaceTranscript(input: {conversationId: $id, messages: $m, expectedVersion: $v}) {
    conversation { version messageCount } userErrors { code } } }"""
UPDATE = """mutation($id: ID!, $title: String, $v: Int) {
  updateConversation(input: {id: $id, title: $title, expectedVersion: $v}) {
    conversation { version title } userErrors { code } } }"""
# A harmless write: it changes nothing but the version, and so makes an event.
TOUCH = """mutation($id: ID!) { updateConversation(input: {id: $id, markRead: true}) {
  conversation { version } userErrors { code } } }"""
DELETE = "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }"
READ = "query($id: ID!) { conversation(id: $id) { version messageCount transcript } }"
NODE = "query($id: ID!) { node(id: $id) { id } }"
COUNT = "{ conversations { totalCount } }"

DELEGATE = """mutation($id: ID!, $task: String!) {
  createDelegation(input: {parentConversationId: $id, delegatingTier: "lead",
                           targetTier: "worker", task: $task}) {
    delegation { id status childConversation { id } parentConversation { version } }
    userErrors { code } } }"""
COMPLETE = """mutation($id: ID!, $summary: String) {
  completeDelegation(input: {delegationId: $id, status: COMPLETED, summary: $summary}) {
    delegation { id status summary parentConversation { version } } userErrors { code } } }"""

CHECKPOINT = """mutation($s: String!, $state: JSON!) { checkpointSession(input: {sessionId: $s,
  state: $state}) { sessionState { version } userErrors { code } } }"""

# -- subscriptions ---------------------------------------------------------------------------

# Everything an event carries, its delegation's child read afresh at delivery.
EVENT_FIELDS = """
  kind conversationId version at
  messages { seq role data }
  delegation { id status summary childConversation { id messageCount transcript } }
"""
CONVERSATION_EVENTS = f"""
subscription($id: ID!, $descendants: Boolean) {{
  conversationEvents(conversationId: $id, includeDescendants: $descendants) {{ {EVENT_FIELDS} }}
}}"""
# A small named subscription (metrics and access-log lines name it "Watch").
WATCH = """subscription Watch($id: ID!) {
  conversationEvents(conversationId: $id) { kind conversationId version } }"""


# -- helpers ---------------------------------------------------------------------------------


async def create(gql: GraphQLClient, title: str = "t") -> str:
    """A new conversation's id."""
    data = await gql(CREATE, {"title": title})
    assert data["createConversation"]["userErrors"] == []
    return str(data["createConversation"]["conversation"]["id"])


async def append(gql: GraphQLClient, conversation_id: str, *texts: str) -> dict[str, Any]:
    """Append one user message per text; the payload (conversation, messages)."""
    messages = [{"role": "user", "content": t} for t in texts]
    payload: dict[str, Any] = (await gql(APPEND, {"id": conversation_id, "m": messages}))[
        "appendMessages"
    ]
    assert payload["userErrors"] == []
    return payload


async def touch(gql: GraphQLClient, conversation_id: str) -> int:
    """A harmless write (markRead) to `conversation_id`; its new version."""
    data = await gql(TOUCH, {"id": conversation_id})
    assert data["updateConversation"]["userErrors"] == []
    return int(data["updateConversation"]["conversation"]["version"])


async def delegate(gql: GraphQLClient, parent_id: str, task: str = "dig") -> dict[str, Any]:
    """A new delegation under `parent_id` (id, status, childConversation, parent's version)."""
    payload: dict[str, Any] = (await gql(DELEGATE, {"id": parent_id, "task": task}))[
        "createDelegation"
    ]
    assert payload["userErrors"] == []
    return payload["delegation"]


async def read(gql: GraphQLClient, conversation_id: str) -> dict[str, Any] | None:
    """The conversation's version, messageCount and transcript; None when it is not there."""
    return (await gql(READ, {"id": conversation_id}))["conversation"]
