// The GraphQL operations behind each callback (see README.md for the table).
#pragma once

namespace convograph::detail::queries {

#define CONVOGRAPH_USER_ERRORS " userErrors { code message field }"

inline constexpr const char* kCreateConversation =
    "mutation($input: CreateConversationInput!) { createConversation(input: $input) {"
    " conversation { id }" CONVOGRAPH_USER_ERRORS " } }";

// A batch, only after the messages read (`v`, their count): a repeat of it can never store
// it twice, and a delegation or snapshot under the conversation (which moves its version
// but adds no message) does not refuse it.
inline constexpr const char* kAppendMessages =
    "mutation($id: ID!, $messages: [JSON!]!, $v: Int!) {"
    " appendMessages(input: {conversationId: $id, messages: $messages,"
    " expectedMessageCount: $v}) {"
    " messages { seq }" CONVOGRAPH_USER_ERRORS " } }";

inline constexpr const char* kTranscriptState =
    "query($id: ID!) { conversation(id: $id) { messageCount version } }";

// The transcript from one position on: whether a batch whose answer was lost is there.
inline constexpr const char* kTranscriptFrom =
    "query($id: ID!, $from: Int!) { conversation(id: $id) { transcript(fromSeq: $from) } }";

// A whole transcript, only over the version read (`v`).
inline constexpr const char* kReplaceTranscript =
    "mutation($id: ID!, $messages: [JSON!]!, $v: Int!) {"
    " replaceTranscript(input: {conversationId: $id, messages: $messages, expectedVersion: $v})"
    " { conversation { messageCount }" CONVOGRAPH_USER_ERRORS " } }";

inline constexpr const char* kSaveSnapshot =
    "mutation($id: ID!, $messages: [JSON!]!) {"
    " saveSnapshot(input: {conversationId: $id, messages: $messages}) {"
    " snapshot { id messageCount }" CONVOGRAPH_USER_ERRORS " } }";

inline constexpr const char* kCreateDelegation =
    "mutation($input: CreateDelegationInput!) { createDelegation(input: $input) {"
    " delegation { id childConversation { id } }" CONVOGRAPH_USER_ERRORS " } }";

inline constexpr const char* kCompleteDelegation =
    "mutation($input: CompleteDelegationInput!) { completeDelegation(input: $input) {"
    " delegation { id status }" CONVOGRAPH_USER_ERRORS " } }";

inline constexpr const char* kDelegationState =
    "query($id: ID!) { delegation(id: $id) { status summary } }";

inline constexpr const char* kLoadDelegation =
    "query($id: ID!) { delegation(id: $id) {"
    " id delegatingTier targetTier task status summary maxTurns createdAt completedAt"
    " parentConversation { id }"
    " childConversation { id title createdAt updatedAt metadata transcript } } }";

inline constexpr const char* kLatestDelegation =
    "query($tier: String!) { latestDelegation(targetTier: $tier) { id } }";

inline constexpr const char* kSearchDelegations =
    "query($query: String!, $first: Int!) { searchDelegations(query: $query, first: $first) {"
    " id delegatingTier targetTier task status summary completedAt"
    " parentConversation { id } childConversation { id } } }";

#undef CONVOGRAPH_USER_ERRORS

}  // namespace convograph::detail::queries
