"""entropic's StorageInterface over convograph, end to end.

Each step is one callback of entropic's C++ `StorageInterface` (or one of its engine tools)
and the single GraphQL operation that serves it. Run against a server with a WRITE token:

    python examples/entropic_client.py http://127.0.0.1:8000/graphql cvg_…
"""

from __future__ import annotations

import uuid

from graphql_client import Client, check, run

ERRORS = "userErrors { code field message }"

CREATE_CONVERSATION = f"""mutation($title: String) {{
  createConversation(input: {{title: $title}}) {{ conversation {{ id }} {ERRORS} }} }}"""
SAVE_CONVERSATION = f"""mutation($id: ID!, $batch: [JSON!]!) {{
  appendMessages(input: {{conversationId: $id, messages: $batch}}) {{
    messages {{ seq }} conversation {{ messageCount }} {ERRORS} }} }}"""
SAVE_SNAPSHOT = f"""mutation($id: ID!, $history: [JSON!]!) {{
  saveSnapshot(input: {{conversationId: $id, messages: $history}}) {{
    snapshot {{ id messageCount }} {ERRORS} }} }}"""
CREATE_DELEGATION = f"""mutation($parent: ID!, $fromTier: String!, $toTier: String!,
                          $task: String!, $maxTurns: Int) {{
  createDelegation(input: {{parentConversationId: $parent, delegatingTier: $fromTier,
                            targetTier: $toTier, task: $task, maxTurns: $maxTurns}}) {{
    delegation {{ id status childConversation {{ id title }} }} {ERRORS} }} }}"""
COMPLETE_DELEGATION = f"""mutation($id: ID!, $summary: String) {{
  completeDelegation(input: {{delegationId: $id, status: COMPLETED, summary: $summary}}) {{
    delegation {{ id status completedAt }} {ERRORS} }} }}"""
LOAD_DELEGATION_WITH_MESSAGES = """query($id: ID!) {
  delegation(id: $id) { id targetTier childConversation { id transcript } } }"""
LATEST_DELEGATION_FOR_TARGET = """query($tier: String!) {
  latestDelegation(targetTier: $tier) { id summary } }"""
RESUME_DELEGATION = f"""mutation($id: ID!, $task: String!) {{
  resumeDelegation(input: {{delegationId: $id, task: $task}}) {{
    delegation {{ id resumedFrom {{ id }} childConversation {{ transcript }} }} {ERRORS} }} }}"""
FOLLOWUP = """query($query: String!) { searchDelegations(query: $query) { id summary } }"""


def flow(client: Client) -> None:
    # create_conversation("session") -> id
    created = client.mutate(CREATE_CONVERSATION, "createConversation", title="session")
    conversation_id = created["conversation"]["id"]
    print(f"create_conversation -> {conversation_id}")

    # save_conversation(id, batch): entropic appends the batch it is given.
    batch = [
        {"role": "user", "content": "Where is the pricing page?", "token_count": 7},
        {
            "role": "assistant",
            "content": "Let me delegate that.",
            "tool_calls": [{"name": "delegate", "arguments": {"tier": "researcher"}}],
            "identity_tier": "lead",
        },
    ]
    saved = client.mutate(SAVE_CONVERSATION, "appendMessages", id=conversation_id, batch=batch)
    check([m["seq"] for m in saved["messages"]] == [1, 2], f"seqs: {saved['messages']}")
    print(f"save_conversation -> messages 1..{saved['conversation']['messageCount']}")

    # create_delegation(parent, from, to, task, max_turns) -> (delegation id, child id)
    task = "Find the pricing page and summarise the tiers"
    delegation = client.mutate(
        CREATE_DELEGATION,
        "createDelegation",
        parent=conversation_id,
        fromTier="lead",
        toTier="researcher",
        task=task,
        maxTurns=8,
    )["delegation"]
    child = delegation["childConversation"]
    check(delegation["status"] == "RUNNING", f"a new delegation runs: {delegation}")
    print(f"create_delegation -> {delegation['id']} (child {child['id']}: {child['title']!r})")

    # The sub-agent writes its own transcript into the child conversation.
    work = [
        {"role": "user", "content": task},
        {"role": "assistant", "content": "Pricing is at /pricing: Free, Team, Enterprise."},
    ]
    client.mutate(SAVE_CONVERSATION, "appendMessages", id=child["id"], batch=work)
    print(f"save_conversation(child) -> {len(work)} messages")

    # complete_delegation(id, "completed", summary)
    summary = "Pricing is at /pricing with three tiers: Free, Team, Enterprise."
    done = client.mutate(
        COMPLETE_DELEGATION, "completeDelegation", id=delegation["id"], summary=summary
    )["delegation"]
    check(done["status"] == "COMPLETED" and done["completedAt"], f"completed: {done}")
    print(f"complete_delegation -> {done['status']} at {done['completedAt']}")

    # load_delegation_with_messages(id)
    loaded = client.query(LOAD_DELEGATION_WITH_MESSAGES, id=delegation["id"])["delegation"]
    transcript = loaded["childConversation"]["transcript"]
    check(transcript == work, f"the child transcript reads back as written: {transcript}")
    print(f"load_delegation_with_messages -> {loaded['targetTier']}, {len(transcript)} messages")

    # latest_delegation_for_target(tier)
    latest = client.query(LATEST_DELEGATION_FOR_TARGET, tier="researcher")["latestDelegation"]
    check(latest is not None and latest["id"] == delegation["id"], f"latest: {latest}")
    print(f"latest_delegation_for_target(researcher) -> {latest['id']}")

    # save_snapshot(id, history): the full history before a compaction.
    history = [{"role": m["role"], "content": m["content"]} for m in batch]
    snapshot = client.mutate(SAVE_SNAPSHOT, "saveSnapshot", id=conversation_id, history=history)
    check(snapshot["snapshot"]["messageCount"] == len(history), f"snapshot: {snapshot}")
    print(f"save_snapshot -> {snapshot['snapshot']['id']} ({len(history)} messages)")

    # engine tool resume_delegation(id, task): a new delegation continuing the old transcript.
    resumed = client.mutate(
        RESUME_DELEGATION, "resumeDelegation", id=delegation["id"], task="Also find the FAQ"
    )["delegation"]
    check(resumed["resumedFrom"]["id"] == delegation["id"], f"resumed: {resumed}")
    resumed_transcript = resumed["childConversation"]["transcript"]
    check(
        resumed_transcript[-1] == {"role": "user", "content": "Also find the FAQ"},
        f"the resumed transcript ends with the new task: {resumed_transcript}",
    )
    print(f"resume_delegation -> {resumed['id']} ({len(resumed_transcript)} messages)")

    # engine tool followup(query): completed summaries that mention it.
    found = client.query(FOLLOWUP, query="three tiers")["searchDelegations"]
    check([d["id"] for d in found] == [delegation["id"]], f"followup: {found}")
    print(f"followup('three tiers') -> {found[0]['id']}")

    # entropic gh#48: a delegation whose parent does not exist is refused, not lost silently.
    client.mutate(
        CREATE_DELEGATION,
        "createDelegation",
        expect="NOT_FOUND",
        parent=str(uuid.uuid4()),
        fromTier="lead",
        toTier="researcher",
        task="orphan",
    )
    print("create_delegation(missing parent) -> NOT_FOUND")


if __name__ == "__main__":
    run(flow)
