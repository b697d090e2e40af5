package convograph

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinels for errors.Is. A *GraphQLError matches the one of its code, an *HTTPError
// the one of its status; the other sentinels are wrapped by the call that failed.
var (
	// ErrConflict: a conditional Set found another version than the one it expected
	// (userError CONFLICT). Get the state again before writing.
	ErrConflict = errors.New("convograph: conflict")
	// ErrInvalidInput: the server refused the document (userError INVALID_INPUT), e.g.
	// state.session_id differs from the sessionID or active_envelope.id is empty; or a
	// session id that is not valid UTF-8, refused before any request.
	ErrInvalidInput = errors.New("convograph: invalid input")
	// ErrPoisonedState: a checkpoint with an outcome other than PROCEED was refused
	// (userError POISONED_STATE). Set always sends PROCEED.
	ErrPoisonedState = errors.New("convograph: poisoned state")
	// ErrLimitExceeded: a server limit, e.g. a session id of more than 500 characters
	// (userError LIMIT_EXCEEDED).
	ErrLimitExceeded = errors.New("convograph: limit exceeded")
	// ErrForbidden: the token may not do this, e.g. a READ token writing (userError
	// FORBIDDEN, or HTTP 403).
	ErrForbidden = errors.New("convograph: forbidden")
	// ErrStorageFull: the server's database has no space left for the write (userError
	// STORAGE_FULL); nothing of it was stored. Reads and deletes still work, and the same
	// Set succeeds once the operator has made room.
	ErrStorageFull = errors.New("convograph: storage full")
	// ErrNotFound: userError NOT_FOUND.
	ErrNotFound = errors.New("convograph: not found")
	// ErrUnauthorized: the bearer token is missing, unknown, revoked or expired (HTTP 401), or holds
	// a control character, such as a trailing line break, which no request can carry
	// (refused before any request).
	ErrUnauthorized = errors.New("convograph: unauthorized")
	// ErrTooLarge: the request body exceeds the server's limit (HTTP 413).
	ErrTooLarge = errors.New("convograph: request too large")
	// ErrUnavailable: the server could not be reached, answered 502, 503 or 504 (e.g. its
	// database is down), or 429 (the token is over its rate limit), or its database went
	// away while the operation ran (a *GraphQLError DATABASE_UNAVAILABLE). Trying again
	// later may succeed; an *HTTPError's RetryAfter says when, if the server said. A Set that fails so
	// may have been stored (its answer lost): calling Set again is safe, and with conflict
	// detection it recognises that write as its own (see Set).
	ErrUnavailable = errors.New("convograph: server unavailable")
	// ErrBadResponse: the answer was not a GraphQL response this client understands.
	ErrBadResponse = errors.New("convograph: malformed response")
	// ErrInvalidState: Set was given a state it cannot send: nil, a value encoding/json
	// cannot marshal, or []byte/string/json.RawMessage that is not valid JSON or not
	// valid UTF-8. No request is made.
	ErrInvalidState = errors.New("convograph: invalid state")
	// ErrClosed: the provider was closed.
	ErrClosed = errors.New("convograph: provider closed")
)

// Error is what every method of StateProvider returns on failure: the method, the
// session and the cause (a *GraphQLError, an *HTTPError, a context error, a transport
// error, or one of the sentinels).
type Error struct {
	Op        string // "Get", "Set" or "Delete"
	SessionID string
	Err       error
}

func (e *Error) Error() string {
	return fmt.Sprintf("convograph: %s %q: %v", e.Op, e.SessionID, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

var codeErrors = map[string]error{
	"CONFLICT":       ErrConflict,
	"INVALID_INPUT":  ErrInvalidInput,
	"POISONED_STATE": ErrPoisonedState,
	"LIMIT_EXCEEDED": ErrLimitExceeded,
	"FORBIDDEN":      ErrForbidden,
	"NOT_FOUND":      ErrNotFound,
	"STORAGE_FULL":   ErrStorageFull,
}

// GraphQLError is a refusal the server gave in a 200 answer: a mutation's userError
// (Code, Message, Field) or a GraphQL execution error (Code from its extensions, if any).
type GraphQLError struct {
	Code    string   // e.g. "CONFLICT", "INVALID_INPUT"; may be empty for a GraphQL error
	Message string   // the server's message
	Field   []string // the offending input field, e.g. ["state", "session_id"]
	// UserError is true for a mutation's userErrors entry, false for a GraphQL error.
	UserError bool
}

func (e *GraphQLError) Error() string {
	var b strings.Builder
	if e.Code != "" {
		b.WriteString(e.Code)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if len(e.Field) > 0 {
		fmt.Fprintf(&b, " (field %s)", strings.Join(e.Field, "."))
	}
	return b.String()
}

// Is reports whether target is the sentinel of e's code (ErrConflict for CONFLICT, ...),
// and ErrUnavailable for DATABASE_UNAVAILABLE: the server's database went away while the
// operation ran (under application/json that is an HTTP 200, not a 503).
func (e *GraphQLError) Is(target error) bool {
	if e.Code == "DATABASE_UNAVAILABLE" && !e.UserError {
		return target == ErrUnavailable
	}
	sentinel, ok := codeErrors[e.Code]
	return ok && sentinel == target
}

// HTTPError is an answer with a status other than 200.
type HTTPError struct {
	StatusCode int
	// Code is the first error's extensions.code when the body had one, e.g.
	// "DATABASE_UNAVAILABLE" with a 503.
	Code string
	// Message is the first error's message, or the start of a body that was not JSON; for a
	// redirect (which the provider does not follow), where it points.
	Message string
	// RequestID is the server's x-request-id header, for its logs.
	RequestID string
	// RetryAfter is how long the server asked the client to wait before trying again: its
	// Retry-After header (seconds or a date), else the error's retryAfterSeconds; 0 when it
	// did not say. A 429 (over the token's rate limit) always says; nothing of the request
	// was run, and the same request sent after that wait gets in.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// Is matches ErrUnauthorized (401), ErrForbidden (403), ErrTooLarge (413) and
// ErrUnavailable (429, 502, 503, 504).
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == 401
	case ErrForbidden:
		return e.StatusCode == 403
	case ErrTooLarge:
		return e.StatusCode == 413
	case ErrUnavailable:
		return e.StatusCode == 429 || e.StatusCode == 502 || e.StatusCode == 503 || e.StatusCode == 504
	}
	return false
}

// transportError is a request that got no answer (refused, reset, DNS...). It matches
// ErrUnavailable and unwraps to the net/http error (a *url.Error).
type transportError struct{ err error }

func (e *transportError) Error() string        { return "no answer from the server: " + e.err.Error() }
func (e *transportError) Unwrap() error        { return e.err }
func (e *transportError) Is(target error) bool { return target == ErrUnavailable }
