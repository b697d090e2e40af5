// Package convograph is a Manglekit core.StateProvider backed by a convograph server.
//
// Manglekit's DurableStateManager persists a session through a core.StateProvider:
// Checkpoint marshals the SessionState and calls Set, Hydrate calls Get, and Delete
// calls Delete. A *StateProvider serves those calls over convograph's GraphQL API:
//
//	Get    -> query sessionState(sessionId)            (untyped nil on a first run)
//	Set    -> mutation checkpointSession(input: {sessionId, state, outcome: PROCEED})
//	Delete -> mutation deleteSessionState(input: {sessionId})   (idempotent)
//	Close  -> releases idle connections; later calls fail with ErrClosed
//
// Plug it in with
//
//	provider := convograph.NewStateProvider(url, token)
//	client, err := sdk.NewClient(ctx, sdk.WithStateProvider(provider))
//
// The package uses only Go's standard library, so it builds without Manglekit; the
// types in types.go mirror Manglekit's SessionState document for callers and tests that
// want it typed. Every error is an *Error naming the call and session; errors.Is
// matches the sentinels (ErrConflict, ErrUnauthorized, ...) and errors.As finds a
// *GraphQLError or *HTTPError with the server's code, message and field.
package convograph
