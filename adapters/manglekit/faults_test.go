package convograph

// Unit tests: answers that are not a success, and calls cut short by their context.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAnswersThatAreNotASuccess(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		header []string
		is     error // the sentinel errors.Is must find, if any
		check  func(t *testing.T, err error)
	}{
		{name: "500 text", status: 500, body: "Internal Server Error", check: func(t *testing.T, err error) {
			herr := asHTTPError(t, err)
			if herr.StatusCode != 500 || herr.Message != "Internal Server Error" {
				t.Errorf("got %#v", herr)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Error("a 500 is not ErrUnavailable")
			}
		}},
		{name: "503 database down", status: 503, is: ErrUnavailable,
			body:   `{"errors":[{"message":"database unavailable","extensions":{"code":"DATABASE_UNAVAILABLE","requestId":"r-1"}}]}`,
			header: []string{"X-Request-Id", "r-1"},
			check: func(t *testing.T, err error) {
				herr := asHTTPError(t, err)
				if herr.Code != "DATABASE_UNAVAILABLE" || herr.RequestID != "r-1" || herr.Message != "database unavailable" {
					t.Errorf("got %#v", herr)
				}
			}},
		{name: "502 proxy HTML", status: 502, is: ErrUnavailable,
			body: "<html>\n<body>\n<h1>502 Bad Gateway</h1>\n</body>\n</html>\n",
			check: func(t *testing.T, err error) {
				if msg := asHTTPError(t, err).Message; msg != "<html> <body> <h1>502 Bad Gateway</h1> </body> </html>" {
					t.Errorf("message %q", msg)
				}
			}},
		{name: "401 revoked", status: 401, is: ErrUnauthorized,
			body:   `{"errors":[{"message":"missing, unknown, revoked or expired bearer token","extensions":{"code":"UNAUTHENTICATED"}}]}`,
			header: []string{"WWW-Authenticate", `Bearer realm="convograph"`},
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "HTTP 401 UNAUTHENTICATED: missing, unknown, revoked or expired bearer token") {
					t.Errorf("message %q", err)
				}
			}},
		{name: "403", status: 403, is: ErrForbidden, body: `{"errors":[{"message":"no"}]}`},
		// Over the token's rate limit: nothing ran, and the server says when to come back.
		{name: "429 rate limited", status: 429, is: ErrUnavailable,
			body: `{"errors":[{"message":"rate limit exceeded for this token: 1 requests per second, burst 1; retry after 7 s",` +
				`"extensions":{"code":"RATE_LIMITED","retryAfterSeconds":7}}]}`,
			header: []string{"Retry-After", "7"},
			check: func(t *testing.T, err error) {
				herr := asHTTPError(t, err)
				if herr.StatusCode != 429 || herr.Code != "RATE_LIMITED" || herr.RetryAfter != 7*time.Second {
					t.Errorf("got %#v", herr)
				}
				if !strings.Contains(err.Error(), "HTTP 429 RATE_LIMITED: rate limit exceeded") ||
					!strings.Contains(err.Error(), "(retry after 7s)") {
					t.Errorf("message %q", err)
				}
			}},
		{name: "429 Retry-After as a date", status: 429, is: ErrUnavailable, body: `{"errors":[{"message":"slow down"}]}`,
			header: []string{"Retry-After", time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)},
			check: func(t *testing.T, err error) {
				if wait := asHTTPError(t, err).RetryAfter; wait < 85*time.Second || wait > 90*time.Second {
					t.Errorf("RetryAfter %s, want about 90s", wait)
				}
			}},
		{name: "429 without Retry-After", status: 429, is: ErrUnavailable,
			body: `{"errors":[{"message":"over","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":3}}]}`,
			check: func(t *testing.T, err error) {
				if wait := asHTTPError(t, err).RetryAfter; wait != 3*time.Second {
					t.Errorf("RetryAfter %s, want the error's 3s", wait)
				}
			}},
		{name: "503 busy", status: 503, is: ErrUnavailable, body: `{"errors":[{"message":"busy"}]}`,
			header: []string{"Retry-After", "1"},
			check: func(t *testing.T, err error) {
				if wait := asHTTPError(t, err).RetryAfter; wait != time.Second {
					t.Errorf("RetryAfter %s, want 1s", wait)
				}
			}},
		{name: "Retry-After unreadable", status: 503, is: ErrUnavailable, body: `{"errors":[{"message":"busy"}]}`,
			header: []string{"Retry-After", "soon"},
			check: func(t *testing.T, err error) {
				if wait := asHTTPError(t, err).RetryAfter; wait != 0 {
					t.Errorf("RetryAfter %s, want 0", wait)
				}
			}},
		{name: "413", status: 413, is: ErrTooLarge,
			body: `{"errors":[{"message":"request body exceeds 33554432 bytes"}]}`,
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "exceeds 33554432 bytes") {
					t.Errorf("message %q", err)
				}
			}},
		{name: "200 truncated JSON", status: 200, is: ErrBadResponse, body: `{"data": {"sessionState": `},
		{name: "200 HTML", status: 200, is: ErrBadResponse, body: "<html>login</html>",
			header: []string{"Content-Type", "text/html"},
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), `"text/html"`) || !strings.Contains(err.Error(), "<html>login</html>") {
					t.Errorf("message %q", err)
				}
			}},
		{name: "200 no data", status: 200, is: ErrBadResponse, body: `{"data": null}`},
		{name: "200 data of another shape", status: 200, is: ErrBadResponse, body: `{"data": {"sessionState": 5}}`},
		// An endpoint that is not convograph must not read as a first run: Manglekit
		// would start the session afresh and overwrite it.
		{name: "200 data without sessionState", status: 200, is: ErrBadResponse, body: `{"data": {}}`},
		{name: "200 state null", status: 200, is: ErrBadResponse,
			body: `{"data": {"sessionState": {"version": 1, "state": null}}}`},
		// The database went away while the operation ran (the token was checked from the
		// server's cache): under application/json that is a 200 whose error says so.
		{name: "200 database unavailable", status: 200, is: ErrUnavailable,
			body: `{"data":null,"errors":[{"message":"the database is unavailable; retry shortly",` +
				`"locations":[{"line":1,"column":39}],"path":["sessionState"],` +
				`"extensions":{"code":"DATABASE_UNAVAILABLE","requestId":"97cd9b03aacc4d6b"}}]}`,
			check: func(t *testing.T, err error) {
				gerr := asGraphQLError(t, err)
				if gerr.Code != "DATABASE_UNAVAILABLE" || gerr.UserError {
					t.Errorf("got %#v", gerr)
				}
			}},
		// A Location relative to the URL asked (RFC 9110 allows one) is named as the URL to
		// give the provider, as entropic names it: it said "redirected to /v2/graphql".
		{name: "308 to a relative Location", status: 308, body: "moved",
			header: []string{"Location", "/v2/graphql"},
			check: func(t *testing.T, err error) {
				herr := asHTTPError(t, err)
				if herr.StatusCode != 308 || !strings.HasPrefix(herr.Message, "redirected to http://127.0.0.1:") ||
					!strings.Contains(herr.Message, "/v2/graphql (not followed") {
					t.Errorf("got %#v", herr)
				}
			}},
		{name: "200 GraphQL error", status: 200,
			body: `{"data":null,"errors":[{"message":"Variable '$sessionId' got invalid value","extensions":{"code":"BAD_USER_INPUT"}}]}`,
			check: func(t *testing.T, err error) {
				gerr := asGraphQLError(t, err)
				if gerr.Code != "BAD_USER_INPUT" || gerr.UserError || !strings.Contains(gerr.Message, "$sessionId") {
					t.Errorf("got %#v", gerr)
				}
			}},
	}
	for _, c := range cases {
		c := c
		t.Run(c.name, func(t *testing.T) {
			f := answering(t, c.status, c.body, c.header...)
			got, err := f.provider().Get(testContext(t), "s-9")
			if err == nil {
				t.Fatalf("no error; Get returned %v", got)
			}
			if got != nil {
				t.Errorf("Get returned %v with its error", got)
			}
			var perr *Error
			if !errors.As(err, &perr) || perr.Op != "Get" || perr.SessionID != "s-9" {
				t.Errorf("want an *Error naming Get and the session, got %#v", err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("errors.Is(%v, %v) is false", err, c.is)
			}
			if c.check != nil {
				c.check(t, err)
			}
		})
	}
}

func TestUserErrorsBecomeGraphQLErrors(t *testing.T) {
	f := answering(t, 200, `{"data":{"checkpointSession":{"sessionState":null,"userErrors":[
		{"code":"CONFLICT","message":"version is 2, not the expected 1","field":["expectedVersion"]}]}}}`)
	err := f.provider().Set(ExpectVersion(testContext(t), 1), "s", seedDocument(t, "s"))
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalidInput) {
		t.Fatalf("want ErrConflict only, got %v", err)
	}
	gerr := asGraphQLError(t, err)
	if gerr.Code != "CONFLICT" || !gerr.UserError || len(gerr.Field) != 1 || gerr.Field[0] != "expectedVersion" {
		t.Errorf("got %#v", gerr)
	}
	if want := `convograph: Set "s": CONFLICT: version is 2, not the expected 1 (field expectedVersion)`; err.Error() != want {
		t.Errorf("message\n got %q\nwant %q", err.Error(), want)
	}

	f = answering(t, 200, `{"data":{"deleteSessionState":{"deleted":false,"userErrors":[
		{"code":"FORBIDDEN","message":"this token may only read","field":null}]}}}`)
	if err := f.provider().Delete(testContext(t), "s"); !errors.Is(err, ErrForbidden) {
		t.Errorf("want ErrForbidden, got %v", err)
	}

	f = answering(t, 200, `{"data":{"checkpointSession":{"sessionState":null,"userErrors":[
		{"code":"STORAGE_FULL","message":"the database has no space left: nothing was written","field":null}]}}}`)
	if err := f.provider().Set(testContext(t), "s", seedDocument(t, "s")); !errors.Is(err, ErrStorageFull) || errors.Is(err, ErrUnavailable) {
		t.Errorf("want ErrStorageFull only, got %v", err)
	}

	f = answering(t, 200, `{"data":{"checkpointSession":{"sessionState":null,"userErrors":[]}}}`)
	if err := f.provider().Set(testContext(t), "s", seedDocument(t, "s")); !errors.Is(err, ErrBadResponse) {
		t.Errorf("neither a state nor an error: want ErrBadResponse, got %v", err)
	}
	f = answering(t, 200, `{"data":{"somethingElse":{"deleted":true,"userErrors":[]}}}`)
	if err := f.provider().Set(testContext(t), "s", seedDocument(t, "s")); !errors.Is(err, ErrBadResponse) {
		t.Errorf("Set answered with another field: want ErrBadResponse, got %v", err)
	}
	if err := f.provider().Delete(testContext(t), "s"); !errors.Is(err, ErrBadResponse) {
		t.Errorf("Delete answered with another field: want ErrBadResponse, got %v", err)
	}
}

func TestCancellingTheContextMidRequestReturnsAtOnce(t *testing.T) {
	f, arrived := stalled(t)
	p := f.provider(WithTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived // the request is at the server, waiting for its answer
		cancel()
	}()
	start := time.Now()
	_, err := p.Get(ctx, "s")
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("a cancelled call is not ErrUnavailable: %v", err)
	}
	if elapsed >= time.Minute {
		t.Errorf("returned after %s, not before its timeout", elapsed)
	}
	t.Logf("Get returned %s after it started, on cancellation mid-request", elapsed)
}

func TestDeadlines(t *testing.T) {
	t.Run("the caller's", func(t *testing.T) {
		f, _ := stalled(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := f.provider(WithTimeout(time.Minute)).Set(ctx, "s", seedDocument(t, "s"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want context.DeadlineExceeded, got %v", err)
		}
		if len(f.received()) != 1 {
			t.Errorf("the request did not reach the server")
		}
	})
	t.Run("the provider's", func(t *testing.T) {
		f, _ := stalled(t)
		start := time.Now()
		err := f.provider(WithTimeout(200*time.Millisecond)).Delete(context.Background(), "s")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want context.DeadlineExceeded, got %v", err)
		}
		if !strings.Contains(err.Error(), "no answer within the provider's timeout of 200ms") {
			t.Errorf("message %q", err)
		}
		if elapsed := time.Since(start); elapsed >= time.Minute {
			t.Errorf("returned after %s", elapsed)
		}
	})
}

func TestADoneContextSendsNothing(t *testing.T) {
	f := answering(t, 200, noState)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.provider().Get(ctx, "s"); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if n := len(f.received()); n != 0 {
		t.Errorf("%d requests were sent", n)
	}
}

// With conflict detection, a provider that has seen no version of the session (it never
// read it, or its reads failed) expects the session to have none: a checkpoint another
// process wrote is refused, not overwritten.
func TestConflictDetectionWithoutAVersionSeen(t *testing.T) {
	t.Run("never read", func(t *testing.T) {
		s := newStore(t)
		s.write(seedDocument(t, "s")) // another process's v1
		p := s.provider(WithConflictDetection())
		err := p.Set(testContext(t), "s", seedDocument(t, "s"))
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("want ErrConflict, got %v", err)
		}
		if n := s.versions(); n != 1 {
			t.Errorf("%d versions stored, want the other process's only", n)
		}
		if got := strings.Join(s.expectedVersions(t), " "); got != "0" {
			t.Errorf("expectedVersion sent: %s, want 0", got)
		}
		if _, ok := p.Version("s"); ok {
			t.Error("a version is known after a refused Set")
		}
	})
	t.Run("the read failed", func(t *testing.T) {
		s := newStore(t)
		s.write(seedDocument(t, "s"))
		s.failGets = 1
		p := s.provider(WithConflictDetection())
		if _, err := p.Get(testContext(t), "s"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Get: want ErrUnavailable, got %v", err)
		}
		if err := p.Set(testContext(t), "s", seedDocument(t, "s")); !errors.Is(err, ErrConflict) {
			t.Fatalf("Set after a failed Get: want ErrConflict, got %v", err)
		}
		if n := s.versions(); n != 1 {
			t.Errorf("%d versions stored, want 1", n)
		}
		// Reading the session again is what lets the provider write.
		if _, err := p.Get(testContext(t), "s"); err != nil {
			t.Fatal(err)
		}
		if err := p.Set(testContext(t), "s", seedDocument(t, "s")); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.expectedVersions(t), " "); got != "0 1" {
			t.Errorf("expectedVersion sent: %s, want 0 1", got)
		}
	})
	t.Run("a new session", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		for i := 0; i < 2; i++ {
			if err := p.Set(testContext(t), "s", seedDocument(t, "s")); err != nil {
				t.Fatalf("Set #%d: %v", i+1, err)
			}
		}
		if got := strings.Join(s.expectedVersions(t), " "); got != "0 1" {
			t.Errorf("expectedVersion sent: %s, want 0 1", got)
		}
	})
}

// A checkpoint whose answer was lost may have been stored. With conflict detection the
// runtime's next Set would conflict with it, its own write: the provider recognises it
// (the latest version is the one after the version that Set expected, and holds the
// state it sent) and takes it as its own.
func TestALostAnswerIsNotAConflictWithItself(t *testing.T) {
	doc := seedDocument(t, "s")
	next := seedState(t, "s")
	next.ExecutionCtx.RetryCount++
	lost := func(t *testing.T, s *store, p *StateProvider) {
		t.Helper()
		s.dropAnswers = 1
		err := p.Set(testContext(t), "s", doc)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("the Set whose answer was lost: want ErrUnavailable, got %v", err)
		}
		if n := s.versions(); n != 1 {
			t.Fatalf("%d versions stored, want the lost answer's one", n)
		}
	}
	// retried sends the lost Set's state again: it stores nothing more and the provider
	// takes the lost write's version; its next Set follows it (`sent`: every
	// expectedVersion the fake received).
	retried := func(t *testing.T, s *store, p *StateProvider, version int, sent string) {
		t.Helper()
		if err := p.Set(testContext(t), "s", doc); err != nil {
			t.Fatalf("the retry: want success, got %v", err)
		}
		if n := s.versions(); n != 1 {
			t.Errorf("%d versions stored, want 1: the retry stored it again", n)
		}
		if v, ok := p.Version("s"); !ok || v != version {
			t.Errorf("Version: %d, %v; want %d, true", v, ok, version)
		}
		if err := p.Set(testContext(t), "s", next); err != nil {
			t.Fatalf("the next Set: %v", err)
		}
		if got := strings.Join(s.expectedVersions(t), " "); got != sent {
			t.Errorf("expectedVersion sent: %s, want %s", got, sent)
		}
	}
	t.Run("the same state again", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		if _, err := p.Get(testContext(t), "s"); err != nil {
			t.Fatal(err)
		}
		lost(t, s, p)
		retried(t, s, p, 1, "0 0 1")
	})
	t.Run("the next state", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		lost(t, s, p)
		if err := p.Set(testContext(t), "s", next); err != nil {
			t.Fatalf("the next Set: want success, got %v", err)
		}
		if n := s.versions(); n != 2 {
			t.Errorf("%d versions stored, want 2", n)
		}
		// Refused as expecting 0, then sent again after the lost one's version.
		if got := strings.Join(s.expectedVersions(t), " "); got != "0 0 1" {
			t.Errorf("expectedVersion sent: %s, want 0 0 1", got)
		}
		if v, _ := p.Version("s"); v != 2 {
			t.Errorf("Version: %d, want 2", v)
		}
	})
	t.Run("another process wrote after it", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		lost(t, s, p)
		s.write(doc) // v2, not seen by p
		if err := p.Set(testContext(t), "s", doc); !errors.Is(err, ErrConflict) {
			t.Fatalf("want ErrConflict, got %v", err)
		}
		if n := s.versions(); n != 2 {
			t.Errorf("%d versions stored, want 2", n)
		}
	})
	// After a Delete the provider expects no state, and the server numbers the next
	// checkpoint after the last deleted version: the lost one is the session's only one.
	t.Run("after a delete", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		for i := 0; i < 2; i++ {
			if err := p.Set(testContext(t), "s", next); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Delete(testContext(t), "s"); err != nil {
			t.Fatal(err)
		}
		lost(t, s, p)
		retried(t, s, p, 3, "0 1 0 0 3")
	})
	t.Run("after a delete, another process wrote after it", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		if err := p.Set(testContext(t), "s", next); err != nil {
			t.Fatal(err)
		}
		if err := p.Delete(testContext(t), "s"); err != nil {
			t.Fatal(err)
		}
		lost(t, s, p)
		s.write(doc) // v3, not seen by p
		if err := p.Set(testContext(t), "s", doc); !errors.Is(err, ErrConflict) {
			t.Fatalf("want ErrConflict, got %v", err)
		}
		if n := s.versions(); n != 2 {
			t.Errorf("%d versions stored, want 2", n)
		}
	})
	t.Run("another process's state", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		s.failSets = 1 // a 502: stored or not, the provider cannot tell
		if err := p.Set(testContext(t), "s", doc); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("want ErrUnavailable, got %v", err)
		}
		other := seedState(t, "s")
		other.PayloadType = "other.Type"
		raw, _ := json.Marshal(other)
		s.write(raw) // v1, another process's
		if err := p.Set(testContext(t), "s", doc); !errors.Is(err, ErrConflict) {
			t.Fatalf("want ErrConflict, got %v", err)
		}
	})
	t.Run("a conflict after an answered Set", func(t *testing.T) {
		s := newStore(t)
		p := s.provider(WithConflictDetection())
		if err := p.Set(testContext(t), "s", doc); err != nil {
			t.Fatal(err)
		}
		s.write(doc) // the same state, by another process
		if err := p.Set(testContext(t), "s", doc); !errors.Is(err, ErrConflict) {
			t.Fatalf("want ErrConflict, got %v", err)
		}
		if n := s.gets(); n != 0 {
			t.Errorf("%d reads for a conflict that no lost answer can explain", n)
		}
	})
	t.Run("ExpectVersion", func(t *testing.T) {
		s := newStore(t)
		p := s.provider()
		s.dropAnswers = 1
		if err := p.Set(ExpectVersion(testContext(t), 0), "s", doc); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("want ErrUnavailable, got %v", err)
		}
		// Another state under the caller's own condition: the session is at 1 now.
		if err := p.Set(ExpectVersion(testContext(t), 0), "s", next); !errors.Is(err, ErrConflict) {
			t.Fatalf("another state expecting 0: want ErrConflict, got %v", err)
		}
		if err := p.Set(ExpectVersion(testContext(t), 0), "s", doc); err != nil {
			t.Fatalf("the retry: want success, got %v", err)
		}
		if n := s.versions(); n != 1 {
			t.Errorf("%d versions stored, want 1", n)
		}
	})
}

// What the server writes back is the same document in another form: compact, numbers in
// their shortest form, integers of any size exact.
func TestSameDocument(t *testing.T) {
	sent := `{"session_id": "s", "n": [1.10, 1e2, -0, 12345678901234567890, 0.30000000000000000001],
	          "m": {"b": "\u00e9", "a": true}}`
	for stored, same := range map[string]bool{
		`{"session_id":"s","n":[1.1,100.0,0,12345678901234567890,0.30000000000000000001],"m":{"b":"é","a":true}}`: true,
		`{"m":{"a":true,"b":"é"},"session_id":"s","n":[1.1,100.0,0,12345678901234567890,0.30000000000000000001]}`: true,
		`{"session_id":"s","n":[1.1,100,0,12345678901234567890,0.30000000000000000001],"m":{"b":"é","a":true}}`:   false, // 1e2 is 100.0
		`{"session_id":"s","n":[1.1,100.0,0,12345678901234567890,0.3],"m":{"b":"é","a":true}}`:                    false,
		`{"session_id":"s","n":[1.1,100.0,0,12345678901234567891,0.30000000000000000001],"m":{"b":"é","a":true}}`: false,
		`{"session_id":"s","n":[1.2,100.0,0,12345678901234567890,0.30000000000000000001],"m":{"b":"é","a":true}}`: false,
		`{"session_id":"s","n":[1.1,100.0,0,12345678901234567890,0.30000000000000000001],"m":{"b":"e","a":true}}`: false,
		`{"session_id":"s","n":[1.1,100.0,0,12345678901234567890,0.30000000000000000001],"m":{"b":"é"}}`:          false,
		`{"session_id":"s","n":[1.1,"100",0,12345678901234567890,0.30000000000000000001],"m":{"b":"é","a":true}}`: false,
	} {
		if got := sameDocument([]byte(sent), []byte(stored)); got != same {
			t.Errorf("sameDocument(sent, %s) = %v, want %v", stored, got, same)
		}
	}
}

// The server's rule for a number (graph/domain/jsoncodec.py): an integer literal is kept
// exactly; any other number is stored as its double's shortest form when that denotes the
// same decimal value as the text (2.50 is 2.5, 1e2 is 100.0), and otherwise as the text
// itself (0.30000000000000000001). Two texts the server stores differently are never the
// same document: a Set whose answer was lost would take another writer's state for its own.
func TestSameDocumentKeepsWhatTheServerKeepsApart(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		// Found by a review: each was the same document.
		{`0.30000000000000000001`, `0.3`, false},
		{`100`, `100.0`, false},
		{`12345678901234567890.5`, `12345678901234567890.4`, false},
		{`"\ud800"`, `"\ufffd"`, false}, // a lone surrogate: the server refuses it
		{`"\ud800"`, `"\ud800"`, false},
		// Integers: their exact value, whatever their size.
		{`-0`, `0`, true},
		{`123456789012345678901`, `123456789012345678901`, true},
		{`12345678901234567890`, `12345678901234567891`, false},
		{`10000000000000000`, `1e16`, false},
		{`100`, `1e2`, false},
		{`123456789012345678901`, `123456789012345678901.0`, false},
		// Numbers whose text is their double's value: stored in its shortest form.
		{`2.50`, `2.5`, true},
		{`1e5`, `100000.0`, true},
		{`1E+5`, `100000.0`, true},
		{`1e0000000000000000005`, `100000.0`, true},
		{`1e2`, `100.0`, true},
		{`1e16`, `1e+16`, true},
		{`10000000000000000.0`, `1e+16`, true},
		{`1.0e-7`, `1e-07`, true},
		{`1.00000000000000020`, `1.0000000000000002`, true},
		{`-0.0`, `-0e5`, true},
		{`-0.0`, `0.0`, false},
		{`0e-400`, `0.0`, true},
		{`5e-324`, `4.9406564584124654e-324`, false}, // the double's exact value is not its shortest form
		{`5e-324`, `5e-324`, true},
		// Numbers whose double says less than the text: stored as the text, exactly.
		{`0.30000000000000000001`, `0.30000000000000000001`, true},
		{`0.30000000000000000001`, `0.300000000000000000010`, false},
		{`0.30000000000000000001`, `0.30000000000000000001e0`, false},
		{`0.10000000000000000555`, `0.1`, false},
		{`9007199254740993.0`, `9007199254740992.0`, false},
		{`1e-400`, `0.0`, false}, // past a double's smallest normal, the double is another number
		{`4e-324`, `5e-324`, false},
		{`1e-400`, `1e-400`, true},
		{`1e-99999999999999999999`, `0.0`, false}, // an exponent past 64 bits
		// Strings, compared unescaped.
		{`"\u00e9"`, `"é"`, true},
		{`"\ud83d\ude00"`, `"😀"`, true},
		{`"a\/b"`, `"a/b"`, true},
		{`"1"`, `1`, false},
		// Objects: keys in any order; of a key given twice the last value counts, as the
		// server reads it.
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{`{"a":1,"a":2}`, `{"a":2}`, true},
		{`{"a":1,"a":2}`, `{"a":1}`, false},
		{`{"\u0061":1}`, `{"a":1}`, true},
		{`{"a":1}`, `{"A":1}`, false},
		{`{"a":"b","c":"d"}`, `{"a":"b\",\"c\":\"d"}`, false},
		// Structure.
		{`[1,2]`, `[2,1]`, false},
		{`[["a"],"b"]`, `[["a","b"]]`, false},
		{`[]`, `{}`, false},
		{`null`, `false`, false},
		{`[null, true, false]`, `[null,true,false]`, true},
		{`{"a":1} {"a":1}`, `{"a":1}`, false}, // not one document
	} {
		if got := sameDocument([]byte(c.a), []byte(c.b)); got != c.same {
			t.Errorf("sameDocument(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
		if got := sameDocument([]byte(c.b), []byte(c.a)); got != c.same {
			t.Errorf("sameDocument(%s, %s) = %v, want %v", c.b, c.a, got, c.same)
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for header, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		" 12 ":                          12 * time.Second,
		"99999999999999999999999":       maxRetryAfter,
		"Fri, 02 Jan 2026 03:05:05 GMT": time.Minute,
		"Fri, 02 Jan 2026 03:04:00 GMT": 0, // past
		"-5":                            0,
		"1.5":                           0,
		"Inf":                           0,
		"NaN":                           0,
		"soon":                          0,
	} {
		if got := retryAfter(header, now); got != want {
			t.Errorf("Retry-After %q: got %s, want %s", header, got, want)
		}
	}
}

// A relative Location is resolved against the endpoint without the credentials its URL may
// hold: the message, which a runtime logs, said "redirected to http://user:secret@…".
func TestARedirectNamesNoCredentials(t *testing.T) {
	f := answering(t, 308, "moved", "Location", "/v2/graphql")
	endpoint := strings.Replace(f.URL, "http://", "http://user:secret@", 1) + "/graphql"
	_, err := NewStateProvider(endpoint, "cvg_test").Get(testContext(t), "s-9")
	herr := asHTTPError(t, err)
	if strings.Contains(herr.Message, "secret") || !strings.Contains(herr.Message, f.URL+"/v2/graphql (not followed") {
		t.Errorf("got %q", herr.Message)
	}
}
