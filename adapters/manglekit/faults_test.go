package convograph

// Unit tests: answers that are not a success, and calls cut short by their context.

import (
	"context"
	"errors"
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
			body:   `{"errors":[{"message":"missing, unknown or revoked bearer token"}]}`,
			header: []string{"WWW-Authenticate", `Bearer realm="convograph"`},
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "HTTP 401: missing, unknown or revoked bearer token") {
					t.Errorf("message %q", err)
				}
			}},
		{name: "403", status: 403, is: ErrForbidden, body: `{"errors":[{"message":"no"}]}`},
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
