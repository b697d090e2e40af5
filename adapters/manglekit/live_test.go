package convograph

// Live tests: round trips through a real convograph server, named by CONVOGRAPH_URL and
// CONVOGRAPH_TOKEN (a WRITE token); without them they skip. With
// CONVOGRAPH_SESSION_PREFIX set, the sessions they write are left in place for the
// caller to read back (tests/test_adapter_manglekit.py does); otherwise each test
// deletes its own.
//
// The TestFault* tests are in live_faults_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLiveFirstRunGetIsAnUntypedNil(t *testing.T) {
	s := live(t)
	got, err := s.provider().Get(testContext(t), s.session(t, "first-run"))
	if err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Fatalf("want an untyped nil, got %T %v", got, got)
	}
}

// The SEEDS.md document, every key filled, goes in as []byte and comes back the same:
// the same keys in the same order with the same values (12345678901234567890 included).
// A second version goes in through the Go types and comes back the same in meaning.
func TestLiveTheSeedDocumentRoundTrips(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "roundtrip")
	p := s.provider()
	doc := seedDocument(t, id)

	if err := p.Set(ctx, id, doc); err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	assertSameTokens(t, mustBytes(t, got), doc)

	if err := p.Set(ctx, id, seedState(t, id)); err != nil {
		t.Fatal(err)
	}
	got, err = p.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	assertSameMeaning(t, mustBytes(t, got), doc)
}

// Hydrate, Checkpoint, Hydrate, ... Delete, as Manglekit's DurableStateManager calls its
// provider across a session's turns and a restart.
func TestLiveTheManagerLoop(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "loop")
	manager := &durableStateManager{provider: s.provider()}

	hydrated, err := manager.Hydrate(ctx, id)
	if err != nil || hydrated != nil {
		t.Fatalf("first run: want (nil, nil), got %v, %v", hydrated, err)
	}
	state := seedState(t, id)
	state.ExecutionCtx.CurrentHistory = nil
	state.AuditRecords = nil
	for step := 1; step <= 3; step++ {
		state.ActiveEnvelope.Metadata["step"] = strconv.Itoa(step)
		state.ExecutionCtx.CurrentHistory = append(state.ExecutionCtx.CurrentHistory,
			Message{Role: "user", Content: "message " + strconv.Itoa(step)})
		state.LogicalFacts = append(state.LogicalFacts, "step("+strconv.Itoa(step)+").")
		state.AuditRecords = []AuditRecord{{Step: step, Outcome: OutcomeProceed,
			Rules:     []RuleSnapshot{{RuleName: "allow_refund", Tier: "policy"}},
			Timestamp: "2025-03-01T10:00:0" + strconv.Itoa(step) + "Z", LatencyMs: int64(step),
			FactCount: len(state.LogicalFacts), MatchedCount: 1}}
		if err := manager.Checkpoint(ctx, state); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		// A restarted process: a new provider, hydrating what the last one wrote.
		restarted := &durableStateManager{provider: s.provider()}
		hydrated, err := restarted.Hydrate(ctx, id)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if hydrated == nil {
			t.Fatalf("step %d: nothing to hydrate", step)
		}
		want, _ := json.Marshal(state)
		got, _ := json.Marshal(hydrated)
		assertSameTokens(t, got, want)
		state = hydrated
	}
	if n := len(state.ExecutionCtx.CurrentHistory); n != 3 {
		t.Fatalf("history of %d messages after 3 steps", n)
	}
	if err := manager.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := manager.Delete(ctx, id); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	hydrated, err = manager.Hydrate(ctx, id)
	if err != nil || hydrated != nil {
		t.Fatalf("after Delete: want a first run again, got %v, %v", hydrated, err)
	}
}

func TestLiveDeleteIsIdempotent(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "never-written")
	p := s.provider()
	for i := 0; i < 2; i++ {
		if err := p.Delete(ctx, id); err != nil {
			t.Fatalf("Delete #%d of a session that has no state: %v", i+1, err)
		}
	}
	if got, err := p.Get(ctx, id); err != nil || got != nil {
		t.Fatalf("want (nil, nil), got %v, %v", got, err)
	}
}

// Without conflict detection Set is last-write-wins, as in Manglekit's own backend; with
// it, a process that did not see the latest checkpoint is refused with ErrConflict.
func TestLiveConflicts(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "conflict")
	doc := seedDocument(t, id)
	a := s.provider(WithConflictDetection())
	b := s.provider(WithConflictDetection())

	if got, err := a.Get(ctx, id); err != nil || got != nil { // a: first run, expects 0
		t.Fatalf("want a first run, got %v, %v", got, err)
	}
	if err := a.Set(ctx, id, doc); err != nil { // v1
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, id); err != nil { // b sees v1
		t.Fatal(err)
	}
	if err := b.Set(ctx, id, doc); err != nil { // v2
		t.Fatal(err)
	}
	err := a.Set(ctx, id, doc) // a still expects 1
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale Set: want ErrConflict, got %v", err)
	}
	gerr := asGraphQLError(t, err)
	if gerr.Code != "CONFLICT" || !reflect.DeepEqual(gerr.Field, []string{"expectedVersion"}) ||
		!strings.Contains(gerr.Message, "version is 2, not the expected 1") {
		t.Errorf("got %#v", gerr)
	}
	if err := a.Set(ctx, id, doc); !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale Set again: want ErrConflict until a re-reads, got %v", err)
	}
	if _, err := a.Get(ctx, id); err != nil { // a re-hydrates
		t.Fatal(err)
	}
	if err := a.Set(ctx, id, doc); err != nil { // v3
		t.Fatal(err)
	}
	if v, _ := a.Version(id); v != 3 {
		t.Errorf("a's version %d, want 3", v)
	}
	if err := s.provider().Set(ExpectVersion(ctx, 1), id, doc); !errors.Is(err, ErrConflict) {
		t.Errorf("ExpectVersion(1) at version 3: want ErrConflict, got %v", err)
	}
	if err := s.provider().Set(ctx, id, doc); err != nil { // last write wins: v4
		t.Fatalf("an unconditional Set: %v", err)
	}
}

// A provider that read a version before another one deleted the session and checkpointed
// it again must not overwrite what it never saw: versions are not reused after a Delete.
func TestLiveConflictsAcrossADelete(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "conflict-delete")
	doc := seedDocument(t, id)
	a := s.provider(WithConflictDetection())
	b := s.provider(WithConflictDetection())
	for i := 0; i < 2; i++ { // v1, v2
		if err := a.Set(ctx, id, doc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Get(ctx, id); err != nil { // b sees v2
		t.Fatal(err)
	}
	if err := a.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // a new run: v3, v4
		if err := a.Set(ctx, id, doc); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := a.Version(id); v != 4 {
		t.Errorf("a's version %d, want 4", v)
	}
	if err := b.Set(ctx, id, doc); !errors.Is(err, ErrConflict) {
		t.Fatalf("b's Set on the version before the delete: want ErrConflict, got %v", err)
	}
}

// After its own Delete a provider expects the session to have no state: a checkpoint
// another process writes before its next Set is not overwritten.
func TestLiveConflictsAfterItsOwnDelete(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "conflict-own-delete")
	doc := seedDocument(t, id)
	a := s.provider(WithConflictDetection())
	b := s.provider()
	if err := a.Set(ctx, id, doc); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx, id, doc); err != nil { // another process, after the delete
		t.Fatal(err)
	}
	if err := a.Set(ctx, id, doc); !errors.Is(err, ErrConflict) {
		t.Fatalf("a's Set after its own Delete and b's checkpoint: want ErrConflict, got %v", err)
	}
}

// A provider that has seen no version of the session expects it to have none: one that
// never read it, or whose read failed, does not overwrite a checkpoint it never saw.
func TestLiveConflictsWithoutAVersionSeen(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "conflict-unseen")
	doc := seedDocument(t, id)
	a := s.provider(WithConflictDetection())
	if err := a.Set(ctx, id, doc); err != nil { // a new session: v1
		t.Fatalf("a first Set without a Get: %v", err)
	}
	b := s.provider(WithConflictDetection())
	if err := b.Set(ctx, id, doc); !errors.Is(err, ErrConflict) { // b never read it
		t.Fatalf("b never read the session: want ErrConflict, got %v", err)
	}
	proxy := newFaultProxy(t, s.url)
	c := NewStateProvider(proxy.endpoint(), s.token, WithConflictDetection())
	proxy.next("503")
	if _, err := c.Get(ctx, id); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("c's Get through a 503: want ErrUnavailable, got %v", err)
	}
	if err := c.Set(ctx, id, doc); !errors.Is(err, ErrConflict) {
		t.Fatalf("c's Set after its Get failed: want ErrConflict, got %v", err)
	}
	if got := s.history(t, id); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("versions stored: %v, want a's only", got)
	}
	if _, err := c.Get(ctx, id); err != nil { // c reads it: now it may write
		t.Fatal(err)
	}
	if err := c.Set(ctx, id, doc); err != nil {
		t.Fatal(err)
	}
	if got := s.history(t, id); !reflect.DeepEqual(got, []int{2, 1}) {
		t.Fatalf("versions stored: %v, want [2 1]", got)
	}
}

// A checkpoint the server stored and whose answer was lost fails with ErrUnavailable. The
// runtime's retry, or its next checkpoint, finds it and takes it as its own, instead of
// conflicting with it: the retry stores nothing more, the next checkpoint follows it.
func TestLiveALostAnswerIsNotAConflictWithItself(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "lost-answer")
	doc := seedDocument(t, id)
	proxy := newFaultProxy(t, s.url)
	p := NewStateProvider(proxy.endpoint(), s.token, WithConflictDetection())
	if got, err := p.Get(ctx, id); err != nil || got != nil {
		t.Fatalf("want a first run, got %v, %v", got, err)
	}
	proxy.next("drop")
	if err := p.Set(ctx, id, doc); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a Set whose answer was lost: want ErrUnavailable, got %v", err)
	}
	if got := s.history(t, id); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("versions stored: %v, want [1]", got)
	}
	if err := p.Set(ctx, id, doc); err != nil { // the runtime retries
		t.Fatalf("the retry: want success, got %v", err)
	}
	if got := s.history(t, id); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("versions stored after the retry: %v, want [1]", got)
	}
	if v, _ := p.Version(id); v != 1 {
		t.Errorf("Version %d, want 1", v)
	}

	second := seedState(t, id)
	second.ExecutionCtx.RetryCount = 2
	third := seedState(t, id)
	third.ExecutionCtx.RetryCount = 3
	proxy.next("drop")
	if err := p.Set(ctx, id, second); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a Set whose answer was lost: want ErrUnavailable, got %v", err)
	}
	if err := p.Set(ctx, id, third); err != nil { // the runtime goes on
		t.Fatalf("the next checkpoint: want success, got %v", err)
	}
	if got := s.history(t, id); !reflect.DeepEqual(got, []int{3, 2, 1}) {
		t.Fatalf("versions stored: %v, want [3 2 1]", got)
	}
	got, err := s.provider().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(third)
	assertSameMeaning(t, mustBytes(t, got), want)
}

// After a Delete the next checkpoint takes the version after the last deleted one (versions
// are not reused), which the provider never saw: a lost answer's checkpoint is still its own.
func TestLiveALostAnswerAfterADeleteIsNotAConflictWithItself(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "lost-after-delete")
	doc := seedDocument(t, id)
	proxy := newFaultProxy(t, s.url)
	p := NewStateProvider(proxy.endpoint(), s.token, WithConflictDetection())
	for i := 0; i < 2; i++ {
		if err := p.Set(ctx, id, doc); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	proxy.next("drop")
	if err := p.Set(ctx, id, doc); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a Set whose answer was lost: want ErrUnavailable, got %v", err)
	}
	if got := s.history(t, id); !reflect.DeepEqual(got, []int{3}) {
		t.Fatalf("versions stored: %v, want [3]", got)
	}
	if err := p.Set(ctx, id, doc); err != nil { // the runtime retries
		t.Fatalf("the retry: want success, got %v", err)
	}
	next := seedState(t, id)
	next.ExecutionCtx.RetryCount = 2
	if err := p.Set(ctx, id, next); err != nil { // and goes on
		t.Fatalf("the next checkpoint: want success, got %v", err)
	}
	if got := s.history(t, id); !reflect.DeepEqual(got, []int{4, 3}) {
		t.Fatalf("versions stored: %v, want [4 3]", got)
	}
}

// A Set whose answer was lost counts the latest checkpoint as its own when its digest is
// that of a state it sent. Each value goes through a Set and is read back: a state sent
// is the same document as the one stored of it, and as no other stored differently (the
// server keeps 100 and 100.0 apart, and 0.30000000000000000001 and 0.3, and the texts of
// one exact value spelled otherwise). Once in a document the server reads with its fast
// parser, once in one with a run of 16 digits, which it reads with the exact one.
func TestLiveTheDigestKeepsApartWhatTheServerDoes(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	values := []string{
		`0`, `-0`, `0.0`, `-0.0`, `0e-400`, `100`, `100.0`, `1e2`, `1E+2`, `100.00`,
		`2.5`, `2.50`, `0.1`, `0.10000000000000000555`, `0.3`, `0.30000000000000000001`,
		`0.300000000000000000010`, `0.30000000000000000001e0`, `12345678901234567890`,
		`12345678901234567890.0`, `12345678901234567890.4`, `12345678901234567890.5`,
		`123456789012345678901`, `1e16`, `10000000000000000`, `10000000000000000.0`,
		`1.0000000000000002`, `1.00000000000000020`, `9007199254740992.0`,
		`9007199254740993.0`, `1e-7`, `1.0e-7`, `1e-400`, `4e-324`, `5e-324`,
		`"\u00e9"`, `"é"`, `{"a":1,"a":2}`, `{"a":2}`, `{"a":1}`,
	}
	for _, path := range []struct{ name, pad string }{
		{"numbers", ""},
		{"numbers-exact", `, "pad": "1234567890123456"`},
	} {
		id := s.session(t, path.name)
		p := s.provider()
		sent := make([][]byte, len(values))
		stored := make([][]byte, len(values))
		for i, v := range values {
			sent[i] = []byte(`{"session_id": "` + id + `", "active_envelope": {"id": "env-1"}, "n": ` +
				v + path.pad + `}`)
			if err := p.Set(ctx, id, sent[i]); err != nil {
				t.Fatalf("%s: Set %s: %v", path.name, v, err)
			}
			got, err := p.Get(ctx, id)
			if err != nil {
				t.Fatalf("%s: Get %s: %v", path.name, v, err)
			}
			stored[i] = mustBytes(t, got)
		}
		for i, v := range values {
			if !sameDocument(sent[i], stored[i]) {
				t.Errorf("%s: %s was stored as %s, a document the digest tells apart", path.name, v, stored[i])
			}
			for j, w := range values {
				equal := bytes.Equal(stored[i], stored[j])
				if sameDocument(sent[i], stored[j]) && !equal {
					t.Errorf("%s: %s is the same as %s stored, which is %s, and %s is stored as %s",
						path.name, v, w, stored[j], v, stored[i])
				}
				if same := sameDocument(stored[i], stored[j]); same != equal {
					t.Errorf("%s: stored %s and %s: same %v, equal texts %v", path.name, stored[i], stored[j], same, equal)
				}
			}
		}
	}
}

// What the server refuses, nothing of it stored.
func TestLiveRefusedDocuments(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "refused")
	p := s.provider()

	err := p.Set(ctx, id, seedDocument(t, id+"-other"))
	if !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a session_id that is not the session's: want ErrInvalidInput, got %v", err)
	}
	if f := asGraphQLError(t, err).Field; !reflect.DeepEqual(f, []string{"state", "session_id"}) {
		t.Errorf("field %v", f)
	}
	noEnvelopeID := seedState(t, id)
	noEnvelopeID.ActiveEnvelope.ID = ""
	err = p.Set(ctx, id, noEnvelopeID)
	if !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("an empty active_envelope.id: want ErrInvalidInput, got %v", err)
	}
	if f := asGraphQLError(t, err).Field; !reflect.DeepEqual(f, []string{"state", "active_envelope", "id"}) {
		t.Errorf("field %v", f)
	}
	long := strings.Repeat("x", 501)
	if err := p.Set(ctx, long, seedDocument(t, long)); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("a 501-character session id: want ErrLimitExceeded, got %v", err)
	}
	if got, err := p.Get(ctx, id); err != nil || got != nil {
		t.Fatalf("something was stored: %v, %v", got, err)
	}
}

// A body over the server's limit (CONVOGRAPH_MAX_BODY_BYTES, 32 MiB by default) is
// refused with 413 before the server reads it.
func TestLiveABodyOverTheLimitIs413(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "too-large")
	limit := 32 << 20
	if v := os.Getenv("CONVOGRAPH_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("CONVOGRAPH_MAX_BODY_BYTES=%q: %v", v, err)
		}
		limit = n
	}
	state := seedState(t, id)
	state.ActiveEnvelope.Data, _ = json.Marshal(strings.Repeat("a", limit))
	err := s.provider().Set(ctx, id, state)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a body over %d bytes: want ErrTooLarge, got %v "+
			"(if the server's limit is higher, set CONVOGRAPH_MAX_BODY_BYTES to it)", limit, err)
	}
	if herr := asHTTPError(t, err); herr.StatusCode != 413 || !strings.Contains(herr.Message, "exceeds") {
		t.Errorf("got %#v", herr)
	}
	if got, err := s.provider().Get(ctx, id); err != nil || got != nil {
		t.Fatalf("something was stored: %v, %v", got, err)
	}
}

// Invalid UTF-8 in a Go string: Manglekit's Checkpoint marshals the state with
// encoding/json, which replaces each invalid byte with U+FFFD, so what is stored is the
// string with replacement characters. The same bytes handed to Set as JSON text are
// refused before any request (ErrInvalidState): the server would refuse the body.
func TestLiveInvalidUTF8(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "utf8")
	p := s.provider()
	state := seedState(t, id)
	state.ExecutionCtx.FeedbackHistory = []string{"bad \xff byte"}
	state.ExecutionCtx.CurrentHistory[0].Content = "caf\xc3"
	if err := (&durableStateManager{provider: p}).Checkpoint(ctx, state); err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var stored SessionState
	if err := json.Unmarshal(mustBytes(t, got), &stored); err != nil {
		t.Fatal(err)
	}
	if f := stored.ExecutionCtx.FeedbackHistory[0]; f != "bad \uFFFD byte" {
		t.Errorf("feedback stored as %q", f)
	}
	if c := stored.ExecutionCtx.CurrentHistory[0].Content; c != "caf\uFFFD" {
		t.Errorf("content stored as %q", c)
	}

	rawID := s.session(t, "utf8-raw")
	raw := bytes.Replace(seedDocument(t, rawID), []byte("Please refund"), []byte("Please \xff refund"), 1)
	if err := p.Set(ctx, rawID, raw); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("raw invalid UTF-8: want ErrInvalidState, got %v", err)
	}
	if got, err := p.Get(ctx, rawID); err != nil || got != nil {
		t.Fatalf("something was stored: %v, %v", got, err)
	}
}

// A session id that is not valid UTF-8 is refused before any request. encoding/json sent
// each bad byte as U+FFFD, so that "x\xff", "x\xfe" and "x\uFFFD" were one session: a Set
// of one overwrote another's checkpoint, a Get returned it and a Delete removed it.
func TestLiveASessionIDThatIsNotUTF8IsRefused(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	p := s.provider()
	neighbour := s.session(t, "utf8-id-\uFFFD")
	mine := seedState(t, neighbour)
	mine.PayloadType = "the neighbour's own"
	if err := p.Set(ctx, neighbour, mine); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{s.prefix + "-utf8-id-\xff", s.prefix + "-utf8-id-\xfe"} {
		if err := p.Set(ctx, id, seedState(t, id)); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("Set %q: want ErrInvalidInput, got %v", id, err)
		}
		if got, err := p.Get(ctx, id); !errors.Is(err, ErrInvalidInput) || got != nil {
			t.Errorf("Get %q: want nil and ErrInvalidInput, got %.80s, %v", id, got, err)
		}
		if err := p.Delete(ctx, id); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("Delete %q: want ErrInvalidInput, got %v", id, err)
		} else if !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("Delete %q: the error does not say why: %v", id, err)
		}
	}
	got, err := p.Get(ctx, neighbour)
	if err != nil {
		t.Fatal(err)
	}
	var stored SessionState
	if err := json.Unmarshal(mustBytes(t, got), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.PayloadType != mine.PayloadType {
		t.Errorf("the neighbour's checkpoint was overwritten: payload_type %q", stored.PayloadType)
	}
}

// A token with a trailing line break (read from a file with it) is refused before any
// request, as a token to fix: net/http refused the header before connecting, which read as
// ErrUnavailable, a server to wait for and try again.
func TestLiveATokenWithALineBreakIsRefused(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	id := s.session(t, "token-line-break")
	for _, suffix := range []string{"\n", "\r\n"} {
		p := NewStateProvider(s.url, s.token+suffix)
		_, getErr := p.Get(ctx, id)
		setErr := p.Set(ctx, id, seedState(t, id))
		deleteErr := p.Delete(ctx, id)
		for op, err := range map[string]error{"Get": getErr, "Set": setErr, "Delete": deleteErr} {
			if !errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrUnavailable) {
				t.Errorf("%s with the token + %q: want ErrUnauthorized (not ErrUnavailable), got %v", op, suffix, err)
			} else if !strings.Contains(err.Error(), "control character") {
				t.Errorf("%s: the error does not say why: %v", op, err)
			}
		}
	}
	if got, err := s.provider().Get(ctx, id); err != nil || got != nil {
		t.Fatalf("something was stored: %.80s, %v", got, err)
	}
}

// A redirect (an http:// URL a proxy sends on to https://, say) is an *HTTPError with its
// status and where it points, and nothing is stored. Followed, the POST went on as a GET
// without its body (301, 302, 303) and, to another host or port, without its bearer token:
// the server's answer, "HTTP 401 UNAUTHENTICATED: missing, unknown, revoked or expired bearer token"
// or "No GraphQL query found", blamed a good token and said nothing of the redirect.
func TestLiveARedirectIsNamed(t *testing.T) {
	s := live(t)
	ctx := testContext(t)
	for _, code := range []int{301, 302, 303, 307} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, s.url, code)
		}))
		id := s.session(t, "redirect-"+strconv.Itoa(code))
		err := NewStateProvider(redirector.URL+"/graphql", s.token).Set(ctx, id, seedState(t, id))
		redirector.Close()
		stored, getErr := s.provider().Get(ctx, id)
		if getErr != nil {
			t.Fatal(getErr)
		}
		var herr *HTTPError
		if !errors.As(err, &herr) || herr.StatusCode != code || !strings.Contains(herr.Message, s.url) {
			t.Errorf("%d: want an *HTTPError %d naming %s, got %v", code, code, s.url, err)
		}
		if errors.Is(err, ErrUnavailable) || stored != nil {
			t.Errorf("%d: unavailable %t, stored %t", code, errors.Is(err, ErrUnavailable), stored != nil)
		}
	}
}

func TestLiveADoneContextFailsWithItsError(t *testing.T) {
	s := live(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.provider().Get(ctx, s.session(t, "cancelled")); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if err := s.provider().Delete(expired, s.session(t, "expired")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded, got %v", err)
	}
}
