"""Revision 0006 fills conversation.token_count from the messages stored before it.

Records are written through the API at the newest revision; the database is then taken
down to 0005 (the column and its sums are dropped) and up again, and the figures must come
out as the API kept them: the migration's SQL (SQLite's json functions, PostgreSQL's json
operators and the Python pass for messages holding \\u0000) applies the domain's rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from alembic import command
from alembic.config import Config

from graph.settings import Settings
from tests.conftest import GraphQLClient
from tests.migrations import before_encryption, columns_after
from tests.test_http import serving

FIGURES = "{ workspaceFigures { conversations messages tokenCount } }"
CREATE = """mutation { createConversation(input: {title: "old"}) { conversation { id } } }"""
APPEND = """mutation($id: ID!, $messages: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $messages}) { messages { seq } } }"""
REPLACE = """mutation($id: ID!, $messages: [JSON!]!) {
  replaceTranscript(input: {conversationId: $id, messages: $messages}) {
    conversation { id } } }"""
DELEGATE = """mutation($id: ID!) { createDelegation(input: {parentConversationId: $id,
  delegatingTier: "lead", targetTier: "helper", task: "dig"}) {
  delegation { childConversation { id } } } }"""


async def alembic(settings: Settings, run: Callable[[Config], None]) -> list[str]:
    """Run an Alembic command on the database; the conversation table's columns after it."""
    return await columns_after(settings, "conversation", run)


def said(text: str, tokens: Any = None, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": text, **extra}
    if tokens is not None:
        message["token_count"] = tokens
    return message


async def seed(gql: GraphQLClient) -> None:
    first = (await gql(CREATE))["createConversation"]["conversation"]["id"]
    await gql(
        APPEND,
        {
            "id": first,
            "messages": [
                said("counted", 10),
                said("no count"),
                said('mentions "token_count" in its text only'),
                said("a string", "7"),
                said("a fraction", 2.5),
                said("an exponent", 1e3),
                said("a boolean", True),
                said("negative", -4),
                said("beyond a message", 2**31),
                said("beyond 64 bits", 123456789012345678901234567890),
                said("nested", None, meta={"token_count": 9}),
                said("the largest", 2**31 - 1),
            ],
        },
    )
    second = (await gql(CREATE))["createConversation"]["conversation"]["id"]
    # NUL inside a string (stored as \u0000), beside a count and without one.
    await gql(
        APPEND,
        {
            "id": second,
            "messages": [said("nul \x00 here", 5), said("nul \x00 again"), said("x", 6)],
        },
    )
    # A replaced transcript: only what is live counts.
    await gql(REPLACE, {"id": second, "messages": [said("nul \x00 here", 5), said("y", 1)]})
    child = (await gql(DELEGATE, {"id": first}))["createDelegation"]["delegation"]
    await gql(APPEND, {"id": child["childConversation"]["id"], "messages": [said("work", 100)]})
    # An empty conversation.
    await gql(CREATE)


async def test_the_migration_fills_the_sums_the_api_keeps(settings: Settings) -> None:
    settings = before_encryption(settings)
    expected = {"conversations": 4, "messages": 15, "tokenCount": 10 + 2**31 - 1 + 5 + 1 + 100}
    async with serving(settings) as (server, http):
        gql = GraphQLClient(http, await server.token(workspace="site:old", owner="user:ada"))
        await seed(gql)
        assert (await gql(FIGURES))["workspaceFigures"] == expected

    columns = await alembic(settings, lambda config: command.downgrade(config, "0005"))
    assert "token_count" not in columns
    columns = await alembic(settings, lambda config: command.upgrade(config, "head"))
    assert "token_count" in columns

    async with serving(settings) as (server, http):
        admin = await server.token(workspace="site:old", owner="system:ops", scope="admin")
        assert (await GraphQLClient(http, admin)(FIGURES))["workspaceFigures"] == expected
