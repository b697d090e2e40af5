from tests.conftest import GraphQLClient


async def test_viewer_and_append(gql: GraphQLClient) -> None:
    data = await gql("{ viewer { workspace { key } ownerType ownerKey scopes } }")
    assert data["viewer"] == {"workspace": {"key": "site:1"}, "ownerType": "USER",
                              "ownerKey": "alice", "scopes": ["READ", "WRITE"]}
    created = await gql('mutation { createConversation(input: {title: "t"}) { conversation { id version } userErrors { code } } }')
    cid = created["createConversation"]["conversation"]["id"]
    appended = await gql(
        "mutation($id: ID!, $m: [JSON!]!) { appendMessages(input: {conversationId: $id, messages: $m}) { messages { seq role data } conversation { version messageCount transcript } userErrors { code field message } } }",
        {"id": cid, "m": [{"role": "user", "content": "hi", "n": 123456789012345678901234567890}, {"role": "assistant", "content": "yo"}]},
    )
    print(appended)
    assert [m["seq"] for m in appended["appendMessages"]["messages"]] == [1, 2]
