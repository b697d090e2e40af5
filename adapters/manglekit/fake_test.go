package convograph

// Test helpers: an httptest server that records each request and answers what a real
// convograph server cannot be made to (500s, proxies' HTML, malformed JSON, a request
// that never gets an answer). The round trips themselves are in live_test.go, against a
// real server.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// request is what the fake server received.
type request struct {
	method, path string
	header       http.Header
	body         []byte
}

// variables decodes the request's GraphQL variables.
func (r request) variables(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var body struct {
		Query     string                     `json:"query"`
		Variables map[string]json.RawMessage `json:"variables"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("the request body is not JSON: %v\n%s", err, r.body)
	}
	return body.Variables
}

func (r request) input(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var input map[string]json.RawMessage
	if err := json.Unmarshal(r.variables(t)["input"], &input); err != nil {
		t.Fatalf("no input object: %v\n%s", err, r.body)
	}
	return input
}

// fake is an httptest server that records each request and answers with reply.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
}

func newFake(t *testing.T, reply http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, request{r.Method, r.URL.Path, r.Header.Clone(), body})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body)) // for reply to read again
		reply(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// answering is a fake that always gives this status, body and headers.
func answering(t *testing.T, status int, body string, header ...string) *fake {
	return newFake(t, func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
}

func (f *fake) received() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

func (f *fake) provider(opts ...Option) *StateProvider {
	return NewStateProvider(f.URL+"/graphql", "cvg_test", opts...)
}

const (
	checkpointed = `{"data":{"checkpointSession":{"sessionState":{"version":1},"userErrors":[]}}}`
	noState      = `{"data":{"sessionState":null}}`
)

// stalled is a fake that takes each request and never answers it (until the test ends).
func stalled(t *testing.T) (*fake, <-chan struct{}) {
	t.Helper()
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before f.Close (cleanups run last first)
	return f, arrived
}

type nilBytesProvider struct{}

func (nilBytesProvider) Get(context.Context, string) (any, error) { return []byte(nil), nil }
func (nilBytesProvider) Set(context.Context, string, any) error   { return nil }
func (nilBytesProvider) Delete(context.Context, string) error     { return nil }
func (nilBytesProvider) Close(context.Context) error              { return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// store is a fake convograph that keeps one session's checkpoints as the server does:
// sessionState answers the latest, sessionStateHistory the newest versions first,
// checkpointSession stores the next version unless its expectedVersion is not the latest
// (CONFLICT; 0 while the session holds none, also after a delete), deleteSessionState
// removes them all (the next version is still the one after the last deleted).
// failGets answers that many sessionState queries with a 503; dropAnswers stores that
// many checkpoints and closes the connection instead of answering (a lost answer);
// failSets answers that many checkpoints with a 502 without storing them.
type store struct {
	*fake
	mu          sync.Mutex
	states      [][]byte // the stored versions' documents; version i+1 is states[i]
	deletedUpTo int      // versions are not reused after a delete
	failGets    int
	dropAnswers int
	failSets    int
}

func newStore(t *testing.T) *store {
	t.Helper()
	s := &store{}
	s.fake = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		s.serve(t, w, r)
	})
	return s
}

func (s *store) serve(t *testing.T, w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	body := request{body: raw}
	var query struct{ Query string }
	if err := json.Unmarshal(raw, &query); err != nil {
		t.Errorf("the request body is not JSON: %v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	latest := s.deletedUpTo + len(s.states)
	current := latest // the version a checkpoint must expect
	if len(s.states) == 0 {
		current = 0
	}
	switch {
	case strings.Contains(query.Query, "sessionStateHistory(sessionId"):
		var nodes []string
		for v := latest; v > s.deletedUpTo && len(nodes) < 2; v-- {
			nodes = append(nodes, fmt.Sprintf(`{"version":%d}`, v))
		}
		fmt.Fprintf(w, `{"data":{"sessionStateHistory":{"nodes":[%s]}}}`, strings.Join(nodes, ","))
	case strings.Contains(query.Query, "sessionState(sessionId"):
		if s.failGets > 0 {
			s.failGets--
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"errors":[{"message":"the database is unavailable; retry shortly","extensions":{"code":"DATABASE_UNAVAILABLE"}}]}`)
			return
		}
		if len(s.states) == 0 {
			_, _ = io.WriteString(w, noState)
			return
		}
		fmt.Fprintf(w, `{"data":{"sessionState":{"version":%d,"state":%s}}}`, latest, s.states[len(s.states)-1])
	case strings.Contains(query.Query, "checkpointSession("):
		if s.failSets > 0 {
			s.failSets--
			w.WriteHeader(502)
			_, _ = io.WriteString(w, "<html><h1>502 Bad Gateway</h1></html>")
			return
		}
		input := body.input(t)
		if raw, ok := input["expectedVersion"]; ok {
			var expected int
			if err := json.Unmarshal(raw, &expected); err != nil {
				t.Errorf("expectedVersion %s: %v", raw, err)
			}
			if expected != current {
				fmt.Fprintf(w, `{"data":{"checkpointSession":{"sessionState":null,"userErrors":[`+
					`{"code":"CONFLICT","message":"version is %d, not the expected %d","field":["expectedVersion"]}]}}}`,
					current, expected)
				return
			}
		}
		s.states = append(s.states, append([]byte(nil), input["state"]...))
		if s.dropAnswers > 0 {
			s.dropAnswers--
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		fmt.Fprintf(w, `{"data":{"checkpointSession":{"sessionState":{"version":%d},"userErrors":[]}}}`, latest+1)
	case strings.Contains(query.Query, "deleteSessionState("):
		s.deletedUpTo = latest
		s.states = nil
		_, _ = io.WriteString(w, `{"data":{"deleteSessionState":{"deleted":true,"userErrors":[]}}}`)
	default:
		t.Errorf("unexpected query %s", query.Query)
	}
}

// versions is how many checkpoints the fake holds.
func (s *store) versions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.states)
}

// write stores a checkpoint as another process would.
func (s *store) write(doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, doc)
}

// expectedVersions lists the expectedVersion of each checkpoint sent ("none" for none).
func (s *store) expectedVersions(t *testing.T) []string {
	t.Helper()
	var got []string
	for _, r := range s.received() {
		if !strings.Contains(string(r.body), "checkpointSession(") {
			continue
		}
		if v, ok := r.input(t)["expectedVersion"]; ok {
			got = append(got, string(v))
		} else {
			got = append(got, "none")
		}
	}
	return got
}

// gets is how many sessionState queries the fake received.
func (s *store) gets() int {
	n := 0
	for _, r := range s.received() {
		if strings.Contains(string(r.body), "sessionState(sessionId") {
			n++
		}
	}
	return n
}
