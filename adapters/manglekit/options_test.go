package convograph

// Unit tests: the options, the URL and Close.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestCloseEndsTheProvider(t *testing.T) {
	f := answering(t, 200, noState)
	p := f.provider()
	if _, err := p.Get(testContext(t), "s"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(testContext(t)); err != nil {
		t.Fatalf("closing twice: %v", err)
	}
	if _, err := p.Get(testContext(t), "s"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: want ErrClosed, got %v", err)
	}
	if err := p.Set(testContext(t), "s", seedDocument(t, "s")); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Close: want ErrClosed, got %v", err)
	}
	if err := p.Delete(testContext(t), "s"); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: want ErrClosed, got %v", err)
	}
	if n := len(f.received()); n != 1 {
		t.Errorf("want only the first request, got %d", n)
	}
}

// With conflict detection, each Set expects the version last read or written.
func TestConflictDetectionSendsTheVersionLastSeen(t *testing.T) {
	var mu sync.Mutex
	version := 0 // the fake's latest version; each Set stores the next one
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Test-Op") == "get" {
			fmt.Fprintf(w, `{"data":{"sessionState":{"version":%d,"state":{}}}}`, version)
			return
		}
		version++
		fmt.Fprintf(w, `{"data":{"checkpointSession":{"sessionState":{"version":%d},"userErrors":[]}}}`, version)
	})
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if body, _ := r.GetBody(); body != nil {
			raw, _ := io.ReadAll(body)
			if strings.Contains(string(raw), "sessionState(sessionId") {
				r.Header.Set("X-Test-Op", "get")
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	setVersion := func(v int) {
		mu.Lock()
		defer mu.Unlock()
		version = v
	}
	expected := func(i int) string {
		t.Helper()
		if v, ok := f.received()[i].input(t)["expectedVersion"]; ok {
			return string(v)
		}
		return "none"
	}
	ctx := testContext(t)
	doc := seedDocument(t, "s")

	p := f.provider(WithConflictDetection(), WithHTTPClient(client))
	steps := []func() error{
		func() error { return p.Set(ctx, "s", doc) },                          // 0: nothing seen: expects none -> v1
		func() error { return p.Set(ctx, "s", doc) },                          // 1: expects 1 -> v2
		func() error { setVersion(7); _, err := p.Get(ctx, "s"); return err }, // 2: another writer got to 7
		func() error { return p.Set(ctx, "s", doc) },                          // 3: expects 7 -> v8
		func() error { return p.Set(ExpectVersion(ctx, 3), "s", doc) },        // 4: the caller's 3 wins -> v9
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	got := []string{expected(0), expected(1), expected(3), expected(4)}
	if strings.Join(got, " ") != "0 1 7 3" {
		t.Errorf("expectedVersion sent: %v, want [0 1 7 3]", got)
	}
	if v, ok := p.Version("s"); !ok || v != 9 {
		t.Errorf("Version: got %d, %v; want 9, true", v, ok)
	}

	plain := f.provider()
	if err := plain.Set(ctx, "s", doc); err != nil {
		t.Fatal(err)
	}
	if got := expected(len(f.received()) - 1); got != "none" {
		t.Errorf("without conflict detection Set sent expectedVersion %s", got)
	}
	if _, ok := plain.Version("s"); ok {
		t.Error("Version known without conflict detection")
	}
}

func TestTheURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1:8000":               "http://127.0.0.1:8000/graphql",
		"http://127.0.0.1:8000/":              "http://127.0.0.1:8000/graphql",
		"https://cg.example/api/graphql":      "https://cg.example/api/graphql",
		"http://127.0.0.1:8000/graphql?x=1#f": "http://127.0.0.1:8000/graphql?x=1#f",
	} {
		if got := NewStateProvider(raw, "t").endpoint; got != want {
			t.Errorf("%s: got %s, want %s", raw, got, want)
		}
	}
	for _, raw := range []string{"", "127.0.0.1:8000", "ftp://host/graphql", "http://%zz"} {
		_, err := NewStateProvider(raw, "t").Get(testContext(t), "s")
		if err == nil || !strings.Contains(err.Error(), "unusable URL") {
			t.Errorf("%q: want an unusable-URL error, got %v", raw, err)
		}
	}
}

func TestWithHTTPClientIsUsed(t *testing.T) {
	f := answering(t, 200, noState)
	var sent int
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return http.DefaultTransport.RoundTrip(r)
	})}
	p := f.provider(WithHTTPClient(client))
	if _, err := p.Get(testContext(t), "s"); err != nil {
		t.Fatal(err)
	}
	if sent != 1 {
		t.Errorf("the given client sent %d requests, want 1", sent)
	}
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
}
