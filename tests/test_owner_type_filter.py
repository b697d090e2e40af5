"""`conversations(filter: {ownerType: …})`: the list narrowed to one owner type.

An ADMIN token, or a SERVICE token in its own name, reads its whole workspace: the filter
picks that type's conversations out of it. Any other token (a SERVICE token acting for an
owner included) reads its own conversations: the filter narrows those (to none, for a type
not its own) and never reaches another owner's. A type that is not an OwnerType is refused
by validation, never answered as INTERNAL.
"""

from __future__ import annotations

from typing import Any

from tests.conftest import GraphQLClient, Server

WORKSPACE = "site:owners"
CREATE = """mutation($title: String!) { createConversation(input: {title: $title}) {
  conversation { id } userErrors { code message } } }"""
LIST = """query($filter: ConversationFilter) { conversations(filter: $filter, first: 100) {
  totalCount nodes { title ownerType } } }"""


async def create(gql: GraphQLClient, title: str) -> None:
    payload = (await gql(CREATE, {"title": title}))["createConversation"]
    assert payload["userErrors"] == [], payload


async def titles(gql: GraphQLClient, **filter: Any) -> set[str]:
    found = (await gql(LIST, {"filter": filter}))["conversations"]
    assert found["totalCount"] == len(found["nodes"])
    return {n["title"] for n in found["nodes"]}


async def seed(server: Server, anon: GraphQLClient) -> None:
    """Conversations of two users, a runtime and an audience in WORKSPACE (one made by a
    SERVICE token acting for its user), and a user's conversation in another workspace."""
    for owner, title in [
        ("user:alice", "alice's"),
        ("user:bob", "bob's"),
        ("runtime:worker", "the worker's"),
        ("audience:team", "the team's"),
    ]:
        await create(anon.as_(await server.token(workspace=WORKSPACE, owner=owner)), title)
    service = await server.token(workspace=WORKSPACE, owner="system:wp", scope="service")
    await create(anon.as_(service, acting_for="user:7"), "user 7's")
    await create(anon.as_(await server.token(workspace="site:other", owner="user:eve")), "eve's")


async def test_an_admin_token_lists_one_owner_type_of_its_workspace(
    server: Server, anon: GraphQLClient
) -> None:
    await seed(server, anon)
    admin = anon.as_(await server.token(workspace=WORKSPACE, owner="system:ops", scope="admin"))
    assert await titles(admin, ownerType="USER") == {"alice's", "bob's", "user 7's"}
    assert await titles(admin, ownerType="RUNTIME") == {"the worker's"}
    assert await titles(admin, ownerType="AUDIENCE") == {"the team's"}
    assert await titles(admin, ownerType="TOKEN") == set()
    # The admin's own type, of which it made nothing: its own type gives it nothing extra.
    assert await titles(admin, ownerType="SYSTEM") == set()
    assert len(await titles(admin)) == 5
    found = (await admin(LIST, {"filter": {"ownerType": "USER"}}))["conversations"]
    assert {n["ownerType"] for n in found["nodes"]} == {"USER"}


async def test_the_filter_goes_with_the_other_filters(server: Server, anon: GraphQLClient) -> None:
    await seed(server, anon)
    admin = anon.as_(await server.token(workspace=WORKSPACE, owner="system:ops", scope="admin"))
    alice = {"type": "USER", "key": "alice"}
    assert await titles(admin, ownerType="USER", owner=alice) == {"alice's"}
    # Two conditions that cannot both hold: nothing, not an error.
    assert await titles(admin, ownerType="RUNTIME", owner=alice) == set()
    assert await titles(admin, ownerType="USER", rootOnly=True) == {
        "alice's",
        "bob's",
        "user 7's",
    }


async def test_a_service_token_in_its_own_name_filters_its_workspace(
    server: Server, anon: GraphQLClient
) -> None:
    await seed(server, anon)
    service = await server.token(workspace=WORKSPACE, owner="system:backend", scope="service")
    own_name = anon.as_(service)
    assert await titles(own_name, ownerType="USER") == {"alice's", "bob's", "user 7's"}
    assert await titles(own_name, ownerType="RUNTIME") == {"the worker's"}
    # Acting for user:7 it is user:7's WRITE token: its own conversations, narrowed.
    for_user_7 = anon.as_(service, acting_for="user:7")
    assert await titles(for_user_7, ownerType="USER") == {"user 7's"}
    assert await titles(for_user_7, ownerType="RUNTIME") == set()


async def test_an_ordinary_token_only_narrows_its_own_conversations(
    server: Server, anon: GraphQLClient
) -> None:
    await seed(server, anon)
    alice = anon.as_(await server.token(workspace=WORKSPACE, owner="user:alice"))
    assert await titles(alice) == {"alice's"}
    # USER is alice's type: still only her own, never bob's or user 7's.
    assert await titles(alice, ownerType="USER") == {"alice's"}
    assert await titles(alice, ownerType="RUNTIME") == set()
    reader = anon.as_(await server.token(workspace=WORKSPACE, owner="runtime:worker", scope="read"))
    assert await titles(reader, ownerType="RUNTIME") == {"the worker's"}
    assert await titles(reader, ownerType="USER") == set()


async def test_an_admin_never_sees_another_workspace_through_the_filter(
    server: Server, anon: GraphQLClient
) -> None:
    await seed(server, anon)
    other = anon.as_(await server.token(workspace="site:other", owner="system:ops", scope="admin"))
    assert await titles(other, ownerType="USER") == {"eve's"}
    assert await titles(other, ownerType="RUNTIME") == set()


async def test_a_value_that_is_no_owner_type_is_refused_by_validation(
    server: Server, gql: GraphQLClient
) -> None:
    for value in ["agent", "user", "", 7]:
        response = await gql.post(LIST, {"filter": {"ownerType": value}})
        body = response.json()
        assert body.get("data") is None, body
        (error,) = body["errors"]
        assert "ownerType" in error["message"] and "OwnerType" in error["message"], error
        assert (error.get("extensions") or {}).get("code") != "INTERNAL", error
    # In the query text itself, the document does not validate.
    response = await gql.post("{ conversations(filter: {ownerType: agent}) { totalCount } }")
    body = response.json()
    assert body.get("data") is None, body
    assert "OwnerType" in body["errors"][0]["message"], body
