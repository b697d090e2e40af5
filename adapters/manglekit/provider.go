package convograph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// DefaultTimeout bounds each call unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// StateProvider is a Manglekit core.StateProvider that stores session checkpoints in
// convograph. It is safe for concurrent use. Make one with NewStateProvider.
type StateProvider struct {
	endpoint  string
	urlErr    error // a URL NewStateProvider could not use, returned by every call
	token     string
	client    *http.Client
	ownClient bool
	timeout   time.Duration
	conflicts bool

	mu       sync.Mutex
	closed   bool
	versions map[string]int // with conflict detection: the version last read or written
}

// core.StateProvider's method set: a *StateProvider can be handed to sdk.WithStateProvider.
var _ interface {
	Get(ctx context.Context, sessionID string) (any, error)
	Set(ctx context.Context, sessionID string, state any) error
	Delete(ctx context.Context, sessionID string) error
	Close(ctx context.Context) error
} = (*StateProvider)(nil)

// Option configures a StateProvider.
type Option func(*StateProvider)

// WithHTTPClient makes the provider send its requests with c (its transport, proxy and
// TLS settings). Close then leaves c's connections alone.
func WithHTTPClient(c *http.Client) Option {
	return func(p *StateProvider) {
		if c != nil {
			p.client = c
		}
	}
}

// WithTimeout bounds each call (connect, send, wait, read) to d; 0 or less means only
// the caller's context bounds it. The default is DefaultTimeout.
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
// a bearer token of WRITE scope. A URL it cannot use is reported by every call.
func NewStateProvider(url, token string, opts ...Option) *StateProvider {
	p := &StateProvider{token: token, timeout: DefaultTimeout, versions: map[string]int{}}
	p.endpoint, p.urlErr = endpointURL(url)
	for _, opt := range opts {
		opt(p)
	}
	if p.client == nil {
		// A transport of its own, so that Close can release its connections.
		p.client = &http.Client{}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			p.client.Transport = t.Clone()
			p.ownClient = true
		}
	}
	return p
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

// Get returns the session's latest checkpoint as the JSON document exactly as stored
// ([]byte), or an untyped nil when the session has none (Manglekit's first run).
func (p *StateProvider) Get(ctx context.Context, sessionID string) (any, error) {
	bad := func(why string) error {
		return &Error{Op: "Get", SessionID: sessionID, Err: fmt.Errorf("%w: %s", ErrBadResponse, why)}
	}
	var data struct {
		SessionState json.RawMessage `json:"sessionState"` // null: a first run; absent: not ours
	}
	vars := map[string]any{"sessionId": sessionID}
	if err := p.call(ctx, "Get", sessionID, getQuery, vars, &data); err != nil {
		return nil, err
	}
	switch string(data.SessionState) {
	case "":
		return nil, bad("no sessionState in the answer")
	case "null":
		p.remember(sessionID, 0)
		// Untyped: a nil []byte in the interface would make Manglekit's Hydrate fail.
		return nil, nil
	}
	var found struct {
		Version int             `json:"version"`
		State   json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(data.SessionState, &found); err != nil {
		return nil, bad("unexpected sessionState: " + err.Error())
	}
	if len(found.State) == 0 || string(found.State) == "null" {
		return nil, bad("a checkpoint without a state")
	}
	p.remember(sessionID, found.Version)
	// []byte, not json.RawMessage: Hydrate switches on the type.
	return []byte(found.State), nil
}

// Set stores state as the session's next checkpoint, with the outcome PROCEED (Manglekit
// calls Set only after Reflect said PROCEED). state is JSON text ([]byte, string or
// json.RawMessage), stored as it is, or any other value, marshalled with encoding/json.
// The document's session_id must equal sessionID and active_envelope.id must be
// non-empty, else the server refuses it (ErrInvalidInput).
func (p *StateProvider) Set(ctx context.Context, sessionID string, state any) error {
	doc, err := encodeState(state)
	if err != nil {
		return &Error{Op: "Set", SessionID: sessionID, Err: err}
	}
	input := checkpointInput{SessionID: sessionID, State: doc, Outcome: OutcomeProceed}
	if v, ok := ctx.Value(expectedVersionKey{}).(int); ok {
		input.ExpectedVersion = &v
	} else if p.conflicts {
		// The version last read or written. None (no Get yet, or only failed ones): the
		// session is expected to have no state, so that a checkpoint this provider never
		// saw is refused rather than overwritten.
		v, _ := p.known(sessionID)
		input.ExpectedVersion = &v
	}
	var data struct {
		CheckpointSession *struct {
			SessionState *struct {
				Version int `json:"version"`
			} `json:"sessionState"`
			UserErrors []userError `json:"userErrors"`
		} `json:"checkpointSession"`
	}
	vars := map[string]any{"input": input}
	if err := p.call(ctx, "Set", sessionID, setMutation, vars, &data); err != nil {
		return err
	}
	payload := data.CheckpointSession
	if payload == nil {
		return &Error{Op: "Set", SessionID: sessionID,
			Err: fmt.Errorf("%w: no checkpointSession in the answer", ErrBadResponse)}
	}
	if err := firstUserError(payload.UserErrors); err != nil {
		return &Error{Op: "Set", SessionID: sessionID, Err: err}
	}
	if payload.SessionState == nil {
		return &Error{Op: "Set", SessionID: sessionID,
			Err: fmt.Errorf("%w: no sessionState and no userErrors", ErrBadResponse)}
	}
	p.remember(sessionID, payload.SessionState.Version)
	return nil
}

// Delete removes every stored version of the session's checkpoint. Deleting a session
// that has none is not an error.
func (p *StateProvider) Delete(ctx context.Context, sessionID string) error {
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
	return nil
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
	fail := func(err error) error { return &Error{Op: op, SessionID: sessionID, Err: err} }
	if p.isClosed() {
		return fail(ErrClosed)
	}
	if p.urlErr != nil {
		return fail(p.urlErr)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	callCtx := ctx
	if p.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
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
