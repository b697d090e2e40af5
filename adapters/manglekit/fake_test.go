package convograph

// Test helpers: an httptest server that records each request and answers what a real
// convograph server cannot be made to (500s, proxies' HTML, malformed JSON, a request
// that never gets an answer). The round trips themselves are in live_test.go, against a
// real server.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
