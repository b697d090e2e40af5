// The GraphQL documents the inspector sends. The server refuses documents nested deeper than
// 12 selection levels: the tree query below is 10 deep and loads two levels of delegations;
// deeper levels are loaded per node, with the same query rooted at that node's child.

export const VIEWER = `query InspectorViewer {
  viewer { workspace { key } ownerType ownerKey scopes }
}`;

// Asked once after sign-in: which newer parts of the API this server has.
export const CAPABILITIES = `query InspectorCapabilities {
  query: __type(name: "Query") { fields { name } }
  filter: __type(name: "ConversationFilter") { inputFields { name } }
  event: __type(name: "ConversationEvent") { fields { name } }
  conversation: __type(name: "Conversation") { fields { name } }
  schema: __schema { subscriptionType { fields { name args { name } } } }
}`;

export const FIGURES = `query InspectorFigures {
  workspaceFigures { conversations messages tokenCount delegations { status count } }
}`;

export const CONVERSATIONS = `query InspectorConversations($filter: ConversationFilter, $first: Int, $after: String) {
  conversations(filter: $filter, first: $first, after: $after) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes {
      id title agentSlug context messageCount updatedAt createdAt ownerType
      parentDelegation { id }
    }
  }
}`;

/** One conversation; with `withCursor`, also the read's position in its event stream
 * (eventCursor): the page subscribes from it, so that a write committed between the read and
 * the subscription is not lost. */
export function conversationQuery({ withCursor }) {
  return `query InspectorConversation($id: ID!) {
  conversation(id: $id) {
    id title agentSlug context interactive metadata provider model providerResponseId${withCursor ? " eventCursor" : ""}
    ownerType version messageCount pending createdAt updatedAt lastReadAt expiresAt lockedUntil
    workspace { key }
    snapshots(first: 0) { totalCount }
    delegations(first: 0) { totalCount }
    parentDelegation {
      id delegatingTier targetTier status
      parentConversation { id title }
    }
  }
}`;
}

const MESSAGE_FIELDS = "seq role content data createdAt";

export const MESSAGES_FIRST = `query InspectorMessagesFirst($id: ID!, $first: Int!, $after: String) {
  conversation(id: $id) {
    id messageCount
    messages(first: $first, after: $after) {
      totalCount
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      edges { cursor node { ${MESSAGE_FIELDS} } }
    }
  }
}`;

export const MESSAGES_LAST = `query InspectorMessagesLast($id: ID!, $last: Int!, $before: String) {
  conversation(id: $id) {
    id messageCount
    messages(last: $last, before: $before) {
      totalCount
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      edges { cursor node { ${MESSAGE_FIELDS} } }
    }
  }
}`;

const DELEGATION_FIELDS = `id delegatingTier targetTier task maxTurns status summary createdAt completedAt
      resumedFrom { id targetTier task status }`;

// conversation 1 > delegations 2 > nodes 3 > childConversation 4 > delegations 5 > nodes 6
// > childConversation 7 > delegations 8 (and resumedFrom at 4 and 7): well under 12.
export const TREE = `query InspectorTree($id: ID!, $after: String) {
  conversation(id: $id) {
    id title messageCount
    delegations(first: 50, after: $after) {
      totalCount
      pageInfo { hasNextPage endCursor }
      nodes {
        ${DELEGATION_FIELDS}
        childConversation {
          id title messageCount
          delegations(first: 50) {
            totalCount
            pageInfo { hasNextPage endCursor }
            nodes {
              ${DELEGATION_FIELDS}
              childConversation { id title messageCount delegations(first: 0) { totalCount } }
            }
          }
        }
      }
    }
  }
}`;

export const SNAPSHOTS = `query InspectorSnapshots($id: ID!, $after: String) {
  conversation(id: $id) {
    id
    snapshots(first: 20, after: $after) {
      totalCount
      pageInfo { hasNextPage endCursor }
      nodes { id messageCount createdAt }
    }
  }
}`;

export const SNAPSHOT = `query InspectorSnapshot($id: ID!) {
  node(id: $id) { ... on Snapshot { id messageCount createdAt messages } }
}`;

export const SESSION_HISTORY = `query InspectorSessionHistory($sessionId: String!, $after: String) {
  sessionStateHistory(sessionId: $sessionId, first: 20, after: $after) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes { sessionId version outcome createdAt payloadType state }
  }
}`;

/** The event subscription; `cursor`/`after` and `messageCount` only when the server has
 * them. */
export function eventsSubscription({ withCursor, withCount }) {
  const args = withCursor
    ? "conversationId: $id, includeDescendants: true, after: $after"
    : "conversationId: $id, includeDescendants: true";
  const vars = withCursor ? "$id: ID!, $after: String" : "$id: ID!";
  return `subscription InspectorEvents(${vars}) {
  conversationEvents(${args}) {
    kind conversationId version at${withCount ? " messageCount" : ""}${withCursor ? " cursor" : ""}
    messages { ${MESSAGE_FIELDS} }
    delegation {
      ${DELEGATION_FIELDS}
      parentConversation { id }
      childConversation { id title messageCount }
    }
  }
}`;
}
