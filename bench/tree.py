"""Figure 4: SQL statements behind one dashboard query of a delegation tree, as it widens.

The tree has a root and three levels of delegations; each level holds `width` delegations
(level 1 all from the root, levels 2 and 3 spread round-robin over the level above), so the
tree holds 3·width + 1 conversations, each with a 3-message transcript.  The query selects
every conversation's transcript and delegations.  Statements are counted with the
database's statement listener (`Database.on_statement`: every statement, whichever way it
runs), in process (httpx ASGITransport); the token lookup that authenticates the request is
counted apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .inprocess import App, app_client
from .report import Figure

WIDTHS = (2, 50)
LEVELS = 3
TRANSCRIPT = 3
STATEMENTS_PER_LEVEL = 3

CREATE = """
mutation { createConversation(input: {title: "tree root"}) { conversation { id } } }"""
DELEGATE = """
mutation($parent: ID!) {
  createDelegation(input: {parentConversationId: $parent, delegatingTier: "lead",
                           targetTier: "worker", task: "sub-task"}) {
    delegation { childConversation { id } } userErrors { code message }
  }
}"""
APPEND = """
mutation($id: ID!, $messages: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $messages}) {
    conversation { id } userErrors { code message }
  }
}"""


def _conversation_fields(level: int) -> str:
    child = f"childConversation {{ {_conversation_fields(level + 1)} }}" if level < LEVELS else ""
    return f"id transcript delegations {{ totalCount nodes {{ id status task {child} }} }}"


TREE_QUERY = f"query($id: ID!) {{ conversation(id: $id) {{ {_conversation_fields(0)} }} }}"


async def _build(app: App, width: int) -> str:
    root = (await app.gql(CREATE))["createConversation"]["conversation"]["id"]
    everyone, parents = [root], [root]
    for _ in range(LEVELS):
        children = []
        for i in range(width):
            data = await app.gql(DELEGATE, {"parent": parents[i % len(parents)]})
            children.append(data["createDelegation"]["delegation"]["childConversation"]["id"])
        everyone += children
        parents = children
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(TRANSCRIPT)]
    for conversation_id in everyone:
        await app.gql(APPEND, {"id": conversation_id, "messages": messages})
    return str(root)


def _walk(conversation: dict[str, Any]) -> int:
    """Conversations in the answer, checking each came with its whole transcript."""
    if len(conversation["transcript"]) != TRANSCRIPT:
        raise RuntimeError(f"conversation {conversation['id']} came without its transcript")
    children = [d.get("childConversation") for d in conversation["delegations"]["nodes"]]
    return 1 + sum(_walk(child) for child in children if child is not None)


async def _count(app: App, root: str, width: int) -> dict[str, Any]:
    statements: list[str] = []

    def record(statement: str, _parameters: Any) -> None:
        statements.append(" ".join(statement.split()))

    # The search index's batch for the tree's messages runs now, not inside a count.
    await app.services.search_index.ready()
    counts = []
    for _ in range(3):  # the count must not depend on what a previous query cached
        statements.clear()
        stop = app.services.db.on_statement(record)
        try:
            data = await app.gql(TREE_QUERY, {"id": root})
        finally:
            stop()
        if _walk(data["conversation"]) != LEVELS * width + 1:
            raise RuntimeError("the tree query did not return every conversation")
        counts.append(len(statements))
    if len(set(counts)) != 1:
        raise RuntimeError(f"statement counts differ between identical queries: {counts}")
    # The token lookup is a BEGIN followed by the SELECT on api_token.
    auth = {i for i, s in enumerate(statements) if "api_token" in s}
    auth |= {i - 1 for i in auth}
    kinds = [
        "auth" if i in auth else "begin" if s.upper().startswith("BEGIN") else "query"
        for i, s in enumerate(statements)
    ]
    return {
        "width": width,
        "conversations": LEVELS * width + 1,
        "queries": kinds.count("query"),
        "begins": kinds.count("begin"),
        "auth": kinds.count("auth"),
        "statements": [s[:160] for s in statements],
    }


async def run(workdir: Path) -> Figure:
    results = []
    for width in WIDTHS:
        async with app_client(workdir / f"w{width}") as app:
            root = await _build(app, width)
            results.append(await _count(app, root, width))
    levels = LEVELS + 1  # the root's generation and three of delegated children
    small, wide = results[0], results[-1]
    per_level = wide["queries"] / levels
    same = all(r["queries"] == small["queries"] and r["begins"] == small["begins"] for r in results)
    sides = ", ".join(
        f"{r['queries']} SELECTs + {r['begins']} BEGINs at width {r['width']} "
        f"({r['conversations']} conversations)"
        for r in results
    )
    return Figure(
        name="tree_statements",
        value=wide["queries"],
        target=f"same count at every width, <= {STATEMENTS_PER_LEVEL} per level ({levels} levels)",
        met=same and per_level <= STATEMENTS_PER_LEVEL,
        detail=(
            f"{sides}; {per_level:g} SELECTs per level; the token lookup "
            f"({wide['auth']} statements) counted apart"
        ),
        data={"widths": results},
    )
