package convograph

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"
)

// seedDocument is testdata/session_state.json (the SessionState document of SEEDS.md,
// every key filled) with its session_id set to sessionID, as JSON text.
func seedDocument(t *testing.T, sessionID string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/session_state.json")
	if err != nil {
		t.Fatal(err)
	}
	const placeholder = `"session_id": "replaced-by-each-test"`
	if !bytes.Contains(raw, []byte(placeholder)) {
		t.Fatalf("testdata/session_state.json lacks %s", placeholder)
	}
	id, err := json.Marshal(sessionID)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(raw, []byte(placeholder), append([]byte(`"session_id": `), id...), 1)
}

// seedState is the same document decoded into the Go types.
func seedState(t *testing.T, sessionID string) *SessionState {
	t.Helper()
	var state SessionState
	dec := json.NewDecoder(bytes.NewReader(seedDocument(t, sessionID)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&state); err != nil {
		t.Fatalf("the seed document does not fit the Go types: %v", err)
	}
	return &state
}

// jsonTokens lists a document's tokens in order: keys, values (numbers as written) and
// delimiters. Two documents with the same tokens say the same thing in the same order.
func jsonTokens(t *testing.T, doc []byte) []any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var tokens []any
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return tokens
		}
		if err != nil {
			t.Fatalf("not JSON: %v\n%s", err, doc)
		}
		tokens = append(tokens, tok)
	}
}

// assertSameTokens fails unless got is want: the same keys in the same order with the same
// values (whitespace and escaping aside).
func assertSameTokens(t *testing.T, got, want []byte) {
	t.Helper()
	g, w := jsonTokens(t, got), jsonTokens(t, want)
	for i := 0; i < len(g) && i < len(w); i++ {
		if !reflect.DeepEqual(g[i], w[i]) {
			t.Fatalf("documents differ at token %d: got %#v, want %#v\ngot:  %s\nwant: %s", i, g[i], w[i], got, want)
		}
	}
	if len(g) != len(w) {
		t.Fatalf("documents differ in length: got %d tokens, want %d\ngot:  %s\nwant: %s", len(g), len(w), got, want)
	}
}

// decodeAny decodes a document with numbers kept as written.
func decodeAny(t *testing.T, doc []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	return v
}

// assertSameMeaning fails unless got and want hold the same values, key order aside.
func assertSameMeaning(t *testing.T, got, want []byte) {
	t.Helper()
	if !reflect.DeepEqual(decodeAny(t, got), decodeAny(t, want)) {
		t.Fatalf("documents differ:\ngot:  %s\nwant: %s", got, want)
	}
}

// liveServer is the convograph server the live tests talk to.
type liveServer struct {
	url, token string
	prefix     string
	keep       bool // leave the sessions for the caller to read back
}

// live skips the test unless CONVOGRAPH_URL and CONVOGRAPH_TOKEN name a server.
func live(t *testing.T) liveServer {
	t.Helper()
	url, token := os.Getenv("CONVOGRAPH_URL"), os.Getenv("CONVOGRAPH_TOKEN")
	if url == "" || token == "" {
		t.Skip("live test skipped: set CONVOGRAPH_URL (a convograph /graphql endpoint) and " +
			"CONVOGRAPH_TOKEN (a WRITE token) to run it against a real server")
	}
	s := liveServer{url: url, token: token, prefix: os.Getenv("CONVOGRAPH_SESSION_PREFIX")}
	if s.prefix != "" {
		s.keep = true
	} else {
		s.prefix = "go-test-" + randomHex(t)
	}
	return s
}

// session is a session id for this test; unless the caller keeps them, it is deleted
// when the test ends.
func (s liveServer) session(t *testing.T, name string) string {
	t.Helper()
	id := s.prefix + "-" + name
	if !s.keep {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.provider().Delete(ctx, id); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	return id
}

func (s liveServer) provider(opts ...Option) *StateProvider {
	return NewStateProvider(s.url, s.token, opts...)
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustBytes is Get's answer as []byte, failing on anything else.
func mustBytes(t *testing.T, got any) []byte {
	t.Helper()
	b, ok := got.([]byte)
	if !ok {
		t.Fatalf("Get returned %T, want []byte", got)
	}
	return b
}

// asGraphQLError is errors.As for a *GraphQLError, failing the test when there is none.
func asGraphQLError(t *testing.T, err error) *GraphQLError {
	t.Helper()
	var gerr *GraphQLError
	if !errors.As(err, &gerr) {
		t.Fatalf("want a *GraphQLError in the chain, got %T: %v", err, err)
	}
	return gerr
}

// asHTTPError is errors.As for an *HTTPError, failing the test when there is none.
func asHTTPError(t *testing.T, err error) *HTTPError {
	t.Helper()
	var herr *HTTPError
	if !errors.As(err, &herr) {
		t.Fatalf("want an *HTTPError in the chain, got %T: %v", err, err)
	}
	return herr
}

// faultProxy stands between a provider and a live server and decides each request's fate,
// in the order given to next (then "pass"): "pass" forwards it and relays the answer;
// "drop" forwards it, lets the server finish, and closes the connection without a byte of
// the answer (a lost answer); "503" answers 503 DATABASE_UNAVAILABLE without forwarding it.
type faultProxy struct {
	*httptest.Server
	mu   sync.Mutex
	plan []string
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	fp := &faultProxy{}
	fp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fate := fp.fate()
		if fate == "503" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"errors":[{"message":"the database is unavailable; retry shortly","extensions":{"code":"DATABASE_UNAVAILABLE"}}]}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		forward, err := http.NewRequestWithContext(r.Context(), r.Method, target, bytes.NewReader(body))
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		for _, name := range []string{"Authorization", "Content-Type", "Accept", "User-Agent"} {
			forward.Header.Set(name, r.Header.Get(name))
		}
		resp, err := http.DefaultClient.Do(forward)
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		if fate == "drop" {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("proxy: %v", err)
				return
			}
			conn.Close()
			return
		}
		for name, values := range resp.Header {
			w.Header()[name] = values
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(fp.Close)
	return fp
}

// next sets the fates of the next requests.
func (fp *faultProxy) next(fates ...string) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.plan = append(fp.plan, fates...)
}

func (fp *faultProxy) fate() string {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if len(fp.plan) == 0 {
		return "pass"
	}
	fate := fp.plan[0]
	fp.plan = fp.plan[1:]
	return fate
}

// endpoint is the proxy's /graphql URL.
func (fp *faultProxy) endpoint() string { return fp.URL + "/graphql" }

// history is the versions the server holds of a session, newest first.
func (s liveServer) history(t *testing.T, sessionID string) []int {
	t.Helper()
	var data struct {
		SessionStateHistory struct {
			Nodes []struct {
				Version int `json:"version"`
			} `json:"nodes"`
		} `json:"sessionStateHistory"`
	}
	err := s.provider().call(testContext(t), "history", sessionID,
		`query($id: String!) { sessionStateHistory(sessionId: $id, first: 50) { nodes { version } } }`,
		map[string]any{"id": sessionID}, &data)
	if err != nil {
		t.Fatal(err)
	}
	var versions []int
	for _, n := range data.SessionStateHistory.Nodes {
		versions = append(versions, n.Version)
	}
	return versions
}
