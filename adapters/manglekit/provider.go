package convograph

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultTimeout bounds each call unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// StateProvider is a Manglekit core.StateProvider that stores session checkpoints in
// convograph. It is safe for concurrent use. Make one with NewStateProvider.
type StateProvider struct {
	endpoint  string
	urlErr    error // a URL NewStateProvider could not use, returned by every call
	tokenErr  error // a token no header can carry, returned by every call
	token     string
	client    *http.Client
	ownClient bool
	timeout   time.Duration
	conflicts bool

	mu       sync.Mutex
	closed   bool
	versions map[string]int // with conflict detection: the version last read or written
	// Conditional Sets that got no answer, by session, since the session's last answered
	// call: the server may have stored one of them (see ownLostWrite).
	unanswered map[string]unansweredSets
}

// unansweredSets are the conditional Sets of one session that got no answer, all sent with
// the same expectedVersion: at most one of them can have been stored, as that version's
// successor.
type unansweredSets struct {
	expected int
	digests  [][sha256.Size]byte // documentDigest of each one's state, newest last
}

// maxUnanswered bounds the states remembered per session (a runtime retrying a server that
// stays away sends the same one again, which is remembered once).
const maxUnanswered = 8

// core.StateProvider's method set: a *StateProvider can be handed to sdk.WithStateProvider.
var _ interface {
	Get(ctx context.Context, sessionID string) (any, error)
	Set(ctx context.Context, sessionID string, state any) error
	Delete(ctx context.Context, sessionID string) error
	Close(ctx context.Context) error
} = (*StateProvider)(nil)

// Option configures a StateProvider.
type Option func(*StateProvider)

// WithHTTPClient makes the provider send its requests with c (its transport, proxy, TLS
// settings and redirect policy: the provider's own client follows no redirect). Close then
// leaves c's connections alone.
func WithHTTPClient(c *http.Client) Option {
	return func(p *StateProvider) {
		if c != nil {
			p.client = c
		}
	}
}

// WithTimeout bounds each call (connect, send, wait, read; for a Set, every request it
// makes) to d; 0 or less means only the caller's context bounds it. The default is
// DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(p *StateProvider) { p.timeout = d }
}

// WithConflictDetection makes every Set conditional: it sends the version this provider
// last read (Get) or wrote (Set) for the session as expectedVersion, and 0 (the session
// has no state) when it has seen none: after a Get that found nothing, after its own
// Delete, and before any Get of the session succeeded. A checkpoint this provider did not
// see (written by another process in between, or before its first successful Get) makes
// Set fail with ErrConflict instead of being overwritten; Get again to take the newer
// state. Without it, Set is last-write-wins, as Manglekit's own backend is. The provider
// keeps one version per session until Close.
func WithConflictDetection() Option {
	return func(p *StateProvider) { p.conflicts = true }
}

type expectedVersionKey struct{}

// ExpectVersion returns a context that makes one Set conditional: it stores the state
// only if the session's latest version is still version (0: the session has none yet),
// else it fails with ErrConflict. It overrides WithConflictDetection for that call.
func ExpectVersion(ctx context.Context, version int) context.Context {
	return context.WithValue(ctx, expectedVersionKey{}, version)
}

// NewStateProvider returns a provider that talks to the convograph GraphQL endpoint at
// url (e.g. "http://127.0.0.1:8000/graphql"; a URL with no path gets "/graphql") with
// a bearer token of WRITE scope. A URL it cannot use is reported by every call, and so is a
// token holding a control character (ErrUnauthorized; e.g. a trailing line break).
func NewStateProvider(url, token string, opts ...Option) *StateProvider {
	p := &StateProvider{token: token, timeout: DefaultTimeout, versions: map[string]int{},
		unanswered: map[string]unansweredSets{}}
	p.endpoint, p.urlErr = endpointURL(url)
	p.tokenErr = checkToken(token)
	for _, opt := range opts {
		opt(p)
	}
	if p.client == nil {
		// A transport of its own, so that Close can release its connections. Redirects are
		// not followed (see notFollowed).
		p.client = &http.Client{CheckRedirect: notFollowed}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			p.client.Transport = t.Clone()
			p.ownClient = true
		}
	}
	return p
}

// notFollowed makes a redirect the answer: an *HTTPError with its status and where it points.
// net/http followed it as a GET without the body (301, 302, 303) and, to another host or port,
// without the bearer token, so that the server's answer ("No GraphQL query found", or 401 for a
// good token) said nothing of the redirect.
func notFollowed(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}

func endpointURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("convograph: unusable URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("convograph: unusable URL %q: want http(s)://host[:port]/graphql", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/graphql"
	}
	return u.String(), nil
}

// checkToken says why a bearer token cannot be sent: a control character, such as the line
// break a token read from a file ends with. net/http refuses such a header before it connects,
// which read as ErrUnavailable (a server to wait for) rather than a token to fix.
func checkToken(token string) error {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: the token holds a control character (byte %d of %d, %q): "+
				"a line break read with it from a file? Nothing was sent",
				ErrUnauthorized, i, len(token), string(c))
		}
	}
	return nil
}

// Get returns the session's latest checkpoint as the JSON document exactly as stored
// ([]byte), or an untyped nil when the session has none (Manglekit's first run).
func (p *StateProvider) Get(ctx context.Context, sessionID string) (any, error) {
	if err := checkSessionID("Get", sessionID); err != nil {
		return nil, err
	}
	callCtx, cancel := p.bound(ctx)
	defer cancel()
	version, state, err := p.latest(ctx, callCtx, "Get", sessionID)
	if err != nil {
		return nil, err
	}
	p.remember(sessionID, version)
	p.answered(sessionID)
	if state == nil {
		// Untyped: a nil []byte in the interface would make Manglekit's Hydrate fail.
		return nil, nil
	}
	// []byte, not json.RawMessage: Hydrate switches on the type.
	return []byte(state), nil
}

// latest reads the session's latest checkpoint: its version and state, or 0 and nil when
// it has none.
func (p *StateProvider) latest(ctx, callCtx context.Context, op, sessionID string) (int, json.RawMessage, error) {
	bad := func(why string) error {
		return &Error{Op: op, SessionID: sessionID, Err: fmt.Errorf("%w: %s", ErrBadResponse, why)}
	}
	var data struct {
		SessionState json.RawMessage `json:"sessionState"` // null: a first run; absent: not ours
	}
	vars := map[string]any{"sessionId": sessionID}
	if err := p.send(ctx, callCtx, op, sessionID, getQuery, vars, &data); err != nil {
		return 0, nil, err
	}
	switch string(data.SessionState) {
	case "":
		return 0, nil, bad("no sessionState in the answer")
	case "null":
		return 0, nil, nil
	}
	var found struct {
		Version int             `json:"version"`
		State   json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(data.SessionState, &found); err != nil {
		return 0, nil, bad("unexpected sessionState: " + err.Error())
	}
	if len(found.State) == 0 || string(found.State) == "null" {
		return 0, nil, bad("a checkpoint without a state")
	}
	return found.Version, found.State, nil
}

// Set stores state as the session's next checkpoint, with the outcome PROCEED (Manglekit
// calls Set only after Reflect said PROCEED). state is JSON text ([]byte, string or
// json.RawMessage), stored as it is, or any other value, marshalled with encoding/json.
// The document's session_id must equal sessionID and active_envelope.id must be
// non-empty, else the server refuses it (ErrInvalidInput).
//
// A conditional Set (WithConflictDetection or ExpectVersion) that got no answer (it
// failed with ErrUnavailable or a context error after it was sent) may have been stored.
// When a later Set of the session is refused with CONFLICT, it reads the latest
// checkpoint: if that is one of those unanswered Sets (the version after the one they
// expected, or the session's only checkpoint when they expected none, as after a Delete;
// holding the same document), it is this provider's own write, not a conflict.
// A Set of that same state then succeeds without storing it twice; another state is sent
// again, conditional on that version (with WithConflictDetection; under ExpectVersion the
// caller's condition stands, and fails with ErrConflict).
func (p *StateProvider) Set(ctx context.Context, sessionID string, state any) error {
	if err := checkSessionID("Set", sessionID); err != nil {
		return err
	}
	doc, err := encodeState(state)
	if err != nil {
		return &Error{Op: "Set", SessionID: sessionID, Err: err}
	}
	callCtx, cancel := p.bound(ctx)
	defer cancel()
	var expected *int
	callers := false
	if v, ok := ctx.Value(expectedVersionKey{}).(int); ok {
		expected, callers = &v, true
	} else if p.conflicts {
		// The version last read or written. None (no Get yet, or only failed ones): the
		// session is expected to have no state, so that a checkpoint this provider never
		// saw is refused rather than overwritten.
		v, _ := p.known(sessionID)
		expected = &v
	}
	err = p.checkpoint(ctx, callCtx, sessionID, doc, expected)
	if err == nil || expected == nil || !errors.Is(err, ErrConflict) {
		return err
	}
	// Refused: perhaps by this provider's own earlier write, whose answer was lost.
	version, same, ok := p.ownLostWrite(ctx, callCtx, sessionID, *expected, doc)
	if !ok || (!same && callers) {
		return err
	}
	p.remember(sessionID, version)
	p.answered(sessionID)
	if same {
		return nil // stored by that write: not again
	}
	return p.checkpoint(ctx, callCtx, sessionID, doc, &version)
}

// checkpoint sends one checkpointSession; expected is its expectedVersion, if any.
func (p *StateProvider) checkpoint(ctx, callCtx context.Context, sessionID string, doc json.RawMessage, expected *int) error {
	if err := p.usable(ctx); err != nil {
		return &Error{Op: "Set", SessionID: sessionID, Err: err} // nothing sent
	}
	input := checkpointInput{SessionID: sessionID, State: doc, Outcome: OutcomeProceed, ExpectedVersion: expected}
	var data struct {
		CheckpointSession *struct {
			SessionState *struct {
				Version int `json:"version"`
			} `json:"sessionState"`
			UserErrors []userError `json:"userErrors"`
		} `json:"checkpointSession"`
	}
	vars := map[string]any{"input": input}
	if err := p.send(ctx, callCtx, "Set", sessionID, setMutation, vars, &data); err != nil {
		if expected != nil && mayHaveRun(err) {
			p.unanswer(sessionID, *expected, doc)
		}
		return err
	}
	payload := data.CheckpointSession
	if payload == nil {
		if expected != nil {
			p.unanswer(sessionID, *expected, doc)
		}
		return &Error{Op: "Set", SessionID: sessionID,
			Err: fmt.Errorf("%w: no checkpointSession in the answer", ErrBadResponse)}
	}
	if err := firstUserError(payload.UserErrors); err != nil {
		return &Error{Op: "Set", SessionID: sessionID, Err: err} // nothing stored
	}
	if payload.SessionState == nil {
		if expected != nil {
			p.unanswer(sessionID, *expected, doc)
		}
		return &Error{Op: "Set", SessionID: sessionID,
			Err: fmt.Errorf("%w: no sessionState and no userErrors", ErrBadResponse)}
	}
	p.remember(sessionID, payload.SessionState.Version)
	p.answered(sessionID)
	return nil
}

// mayHaveRun reports whether a request that failed with err may have been carried out:
// anything but a refusal the server answered (a userError, or an HTTP status under 500:
// 401, 403, 413, 429, ... run nothing).
func mayHaveRun(err error) bool {
	var herr *HTTPError
	if errors.As(err, &herr) {
		return herr.StatusCode >= 500
	}
	var gerr *GraphQLError
	if errors.As(err, &gerr) {
		return !gerr.UserError
	}
	return true
}

// ownLostWrite tells whether the session's latest checkpoint is one of this provider's
// unanswered Sets that expected the version expected: the version after it (with expected
// 0, no state: the session's only checkpoint), holding the same document. If so it returns
// that version, and same tells whether doc is that document too. Any failure to tell is a
// no.
func (p *StateProvider) ownLostWrite(ctx, callCtx context.Context, sessionID string, expected int, doc json.RawMessage) (version int, same, ok bool) {
	p.mu.Lock()
	lost, found := p.unanswered[sessionID]
	p.mu.Unlock()
	if !found || lost.expected != expected {
		return 0, false, false
	}
	version, state, err := p.latest(ctx, callCtx, "Set", sessionID)
	if err != nil || state == nil {
		return 0, false, false
	}
	switch {
	case expected > 0 || version == 1:
		if version != expected+1 {
			return 0, false, false
		}
	case !p.onlyCheckpoint(ctx, callCtx, sessionID, version):
		// Versions are not reused: the first checkpoint after a delete takes the one after
		// the last deleted, which this provider never saw. Expecting no state, the lost
		// Set stored the session's first checkpoint since, and nothing came after it.
		return 0, false, false
	}
	stored, ok := documentDigest(state)
	if !ok {
		return 0, false, false
	}
	for _, d := range lost.digests {
		if d == stored {
			mine, ok := documentDigest(doc)
			return version, ok && mine == stored, true
		}
	}
	return 0, false, false
}

// onlyCheckpoint tells whether version is the only checkpoint the session holds. Any
// failure to tell is a no.
func (p *StateProvider) onlyCheckpoint(ctx, callCtx context.Context, sessionID string, version int) bool {
	var data struct {
		SessionStateHistory *struct {
			Nodes []struct {
				Version int `json:"version"`
			} `json:"nodes"`
		} `json:"sessionStateHistory"`
	}
	vars := map[string]any{"sessionId": sessionID}
	if err := p.send(ctx, callCtx, "Set", sessionID, historyQuery, vars, &data); err != nil {
		return false
	}
	history := data.SessionStateHistory
	return history != nil && len(history.Nodes) == 1 && history.Nodes[0].Version == version
}

// unanswer remembers a conditional Set of the session that got no answer.
func (p *StateProvider) unanswer(sessionID string, expected int, doc json.RawMessage) {
	digest, ok := documentDigest(doc)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	lost := p.unanswered[sessionID]
	if lost.expected != expected {
		lost = unansweredSets{expected: expected}
	}
	for _, d := range lost.digests {
		if d == digest {
			return
		}
	}
	lost.digests = append(lost.digests, digest)
	if len(lost.digests) > maxUnanswered {
		lost.digests = lost.digests[1:]
	}
	p.unanswered[sessionID] = lost
}

// answered forgets the session's unanswered Sets: the provider has an answer that says what
// the session holds (a Get, a stored Set, a Delete), and expects versions from there.
func (p *StateProvider) answered(sessionID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.unanswered, sessionID)
}

// Delete removes every stored version of the session's checkpoint. Deleting a session
// that has none is not an error.
func (p *StateProvider) Delete(ctx context.Context, sessionID string) error {
	if err := checkSessionID("Delete", sessionID); err != nil {
		return err
	}
	var data struct {
		DeleteSessionState *struct {
			Deleted    bool        `json:"deleted"`
			UserErrors []userError `json:"userErrors"`
		} `json:"deleteSessionState"`
	}
	vars := map[string]any{"input": deleteInput{SessionID: sessionID}}
	if err := p.call(ctx, "Delete", sessionID, deleteMutation, vars, &data); err != nil {
		return err
	}
	if data.DeleteSessionState == nil {
		return &Error{Op: "Delete", SessionID: sessionID,
			Err: fmt.Errorf("%w: no deleteSessionState in the answer", ErrBadResponse)}
	}
	if err := firstUserError(data.DeleteSessionState.UserErrors); err != nil {
		return &Error{Op: "Delete", SessionID: sessionID, Err: err}
	}
	// The session has no state now: with conflict detection, the next Set expects none, so a
	// checkpoint another process writes in between is not overwritten.
	p.remember(sessionID, 0)
	p.answered(sessionID)
	return nil
}

// checkSessionID refuses a session id that is not valid UTF-8, before any request:
// encoding/json would send each invalid byte as U+FFFD, and so name another session ("x\xff",
// "x\xfe" and "x\uFFFD" would all be "x\uFFFD"), whose checkpoint the call would then read,
// overwrite or delete.
func checkSessionID(op, sessionID string) error {
	if utf8.ValidString(sessionID) {
		return nil
	}
	return &Error{Op: op, SessionID: sessionID,
		Err: fmt.Errorf("%w: the session id is not valid UTF-8; nothing was sent", ErrInvalidInput)}
}

// Close releases the provider's idle connections (not those of a client given with
// WithHTTPClient). Later calls fail with ErrClosed; closing again does nothing.
func (p *StateProvider) Close(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.versions = map[string]int{}
	p.unanswered = map[string]unansweredSets{}
	if p.ownClient {
		p.client.CloseIdleConnections()
	}
	return nil
}

// Version is the session's version this provider last read or wrote, when conflict
// detection is on (0: Get found none); ok is false when it knows none (its next Set then
// expects the session to have no state).
func (p *StateProvider) Version(sessionID string) (version int, ok bool) {
	return p.known(sessionID)
}

// call runs one operation within the caller's context and the provider's timeout.
func (p *StateProvider) call(ctx context.Context, op, sessionID, query string, vars, out any) error {
	callCtx, cancel := p.bound(ctx)
	defer cancel()
	return p.send(ctx, callCtx, op, sessionID, query, vars, out)
}

// bound is ctx bounded by the provider's timeout, for all the requests of one call.
func (p *StateProvider) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.timeout > 0 {
		return context.WithTimeout(ctx, p.timeout)
	}
	return context.WithCancel(ctx)
}

// usable is why no request can be sent: the provider is closed, its URL unusable, or the
// caller's context done.
func (p *StateProvider) usable(ctx context.Context) error {
	if p.isClosed() {
		return ErrClosed
	}
	if p.urlErr != nil {
		return p.urlErr
	}
	if p.tokenErr != nil {
		return p.tokenErr
	}
	return ctx.Err()
}

// send runs one request of a call: ctx is the caller's context, callCtx the call's (ctx
// bounded by the provider's timeout).
func (p *StateProvider) send(ctx, callCtx context.Context, op, sessionID, query string, vars, out any) error {
	fail := func(err error) error { return &Error{Op: op, SessionID: sessionID, Err: err} }
	if err := p.usable(ctx); err != nil {
		return fail(err)
	}
	err := p.post(callCtx, query, vars, out)
	if err == nil {
		return nil
	}
	// A request cut short by a done context fails with that context's error, which
	// says more than the transport error it caused.
	var cut *transportError
	if errors.As(err, &cut) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fail(ctxErr)
		}
		if ctxErr := callCtx.Err(); ctxErr != nil {
			return fail(fmt.Errorf("no answer within the provider's timeout of %s: %w", p.timeout, ctxErr))
		}
	}
	return fail(err)
}

func (p *StateProvider) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *StateProvider) remember(sessionID string, version int) {
	if !p.conflicts {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.versions[sessionID] = version
	}
}

func (p *StateProvider) known(sessionID string) (int, bool) {
	if !p.conflicts {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.versions[sessionID]
	return v, ok
}
