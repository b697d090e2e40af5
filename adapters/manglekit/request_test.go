package convograph

// Unit tests: the requests the provider builds, and how it reads a successful answer.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestSetSendsOneCheckpointSessionMutation(t *testing.T) {
	f := answering(t, 200, checkpointed, "Content-Type", "application/json")
	state := seedState(t, "s-1")
	if err := f.provider().Set(testContext(t), "s-1", state); err != nil {
		t.Fatal(err)
	}
	got := f.received()
	if len(got) != 1 {
		t.Fatalf("want one request, got %d", len(got))
	}
	r := got[0]
	if r.method != http.MethodPost || r.path != "/graphql" {
		t.Errorf("want POST /graphql, got %s %s", r.method, r.path)
	}
	for name, want := range map[string]string{
		"Authorization": "Bearer cvg_test",
		"Content-Type":  "application/json",
		"Accept":        "application/json",
		"User-Agent":    userAgent,
	} {
		if r.header.Get(name) != want {
			t.Errorf("header %s: got %q, want %q", name, r.header.Get(name), want)
		}
	}
	var body struct{ Query string }
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body.Query, "checkpointSession(input: $input)") ||
		!strings.Contains(body.Query, "userErrors { code message field }") {
		t.Errorf("unexpected query:\n%s", body.Query)
	}
	input := r.input(t)
	if string(input["sessionId"]) != `"s-1"` || string(input["outcome"]) != `"PROCEED"` {
		t.Errorf("sessionId/outcome: %s", r.body)
	}
	if _, ok := input["expectedVersion"]; ok {
		t.Errorf("an unconditional Set sent expectedVersion: %s", r.body)
	}
	want, _ := json.Marshal(state)
	assertSameTokens(t, input["state"], want)
	// <, > and & travel as they are, not as \u003c escapes.
	if !strings.Contains(string(r.body), "order <42> &") {
		t.Errorf("HTML characters were escaped: %s", r.body)
	}
}

func TestSetTakesJSONTextAndGoValues(t *testing.T) {
	doc := seedDocument(t, "s-2")
	state := seedState(t, "s-2")
	asMap, ok := decodeAny(t, doc).(map[string]any) // numbers as json.Number: none rounded
	if !ok {
		t.Fatal("the document is not an object")
	}
	cases := map[string]struct {
		state   any
		ordered bool // sent exactly in the document's key order
	}{
		"[]byte":          {doc, true},
		"string":          {string(doc), true},
		"json.RawMessage": {json.RawMessage(doc), true},
		"SessionState":    {*state, false},
		"*SessionState":   {state, false},
		"map":             {asMap, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := answering(t, 200, checkpointed)
			if err := f.provider().Set(testContext(t), "s-2", c.state); err != nil {
				t.Fatal(err)
			}
			sent := f.received()[0].input(t)["state"]
			if c.ordered {
				assertSameTokens(t, sent, doc)
			} else {
				assertSameMeaning(t, sent, doc)
			}
		})
	}
}

func TestSetRefusesAStateItCannotSendWithoutARequest(t *testing.T) {
	cases := map[string]any{
		"nil":                    nil,
		"truncated JSON":         []byte(`{"session_id": "s"`),
		"not JSON":               "session s",
		"invalid UTF-8 in bytes": []byte("{\"session_id\": \"s\", \"x\": \"\xff\"}"),
		"invalid UTF-8 string":   "{\"session_id\": \"s\xc3\"}",
		"a channel":              make(chan int),
		// Valid to encoding/json, refused by the server.
		"a lone high surrogate":  []byte(`{"session_id": "s", "x": "a\ud800b"}`),
		"a lone low surrogate":   `{"session_id": "s", "x": "\udc00"}`,
		"a reversed pair":        `{"session_id": "s", "x": "\udc00\ud800"}`,
		"a number past a double": json.RawMessage(`{"session_id": "s", "n": 1e400}`),
		"a negative one":         `{"session_id": "s", "n": [-2e308]}`,
		"nested past the server's reach": `{"session_id": "s", "x": ` +
			strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`,
	}
	for name, state := range cases {
		t.Run(name, func(t *testing.T) {
			f := answering(t, 200, checkpointed)
			err := f.provider().Set(testContext(t), "s", state)
			if !errors.Is(err, ErrInvalidState) {
				t.Fatalf("want ErrInvalidState, got %v", err)
			}
			var perr *Error
			if !errors.As(err, &perr) || perr.Op != "Set" || perr.SessionID != "s" {
				t.Errorf("want an *Error naming Set and the session, got %#v", err)
			}
			if n := len(f.received()); n != 0 {
				t.Errorf("%d requests were sent", n)
			}
		})
	}
}

// What looks like a surrogate escape and is not one, and large numbers a double holds,
// are sent.
func TestSetSendsEscapesAndNumbersTheServerStores(t *testing.T) {
	for _, state := range []string{
		`{"session_id": "s", "x": "\ud83e\udd93 \\ud800 \u00e9"}`,
		`{"session_id": "s", "n": [1e308, -1.5e-320, 123456789012345678901234567890]}`,
		`{"session_id": "s", "n": ` + strings.Repeat("9", 400) + `}`,
	} {
		f := answering(t, 200, checkpointed)
		if err := f.provider().Set(testContext(t), "s", state); err != nil {
			t.Fatalf("%s: %v", state, err)
		}
		if n := len(f.received()); n != 1 {
			t.Errorf("%s: %d requests were sent", state, n)
		}
	}
}

// encoding/json, which Manglekit's Checkpoint uses too, replaces invalid UTF-8 in a Go
// string with U+FFFD: what is stored is valid UTF-8, with the bad bytes replaced.
func TestInvalidUTF8InAGoStringIsSentAsReplacementCharacters(t *testing.T) {
	f := answering(t, 200, checkpointed)
	state := seedState(t, "s-3")
	state.ExecutionCtx.FeedbackHistory = []string{"bad \xff byte"}
	if err := f.provider().Set(testContext(t), "s-3", state); err != nil {
		t.Fatal(err)
	}
	var sent SessionState
	if err := json.Unmarshal(f.received()[0].input(t)["state"], &sent); err != nil {
		t.Fatal(err)
	}
	if got := sent.ExecutionCtx.FeedbackHistory[0]; got != "bad \uFFFD byte" {
		t.Errorf("got %q, want %q", got, "bad \uFFFD byte")
	}
}

func TestGetReturnsUntypedNilOnAFirstRunAndBytesOtherwise(t *testing.T) {
	f := answering(t, 200, noState)
	got, err := f.provider().Get(testContext(t), "new")
	if err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Fatalf("want an untyped nil, got %T %v", got, got)
	}
	if string(f.received()[0].variables(t)["sessionId"]) != `"new"` {
		t.Errorf("sessionId not sent: %s", f.received()[0].body)
	}

	doc := seedDocument(t, "old")
	f = answering(t, 200, `{"data":{"sessionState":{"version":3,"state":`+string(doc)+`}}}`)
	got, err = f.provider().Get(testContext(t), "old")
	if err != nil {
		t.Fatal(err)
	}
	if _, isRaw := got.(json.RawMessage); isRaw {
		t.Fatal("Get returned a json.RawMessage: Manglekit's Hydrate switches on []byte")
	}
	assertSameTokens(t, mustBytes(t, got), doc)
}

// Manglekit's Hydrate treats only an untyped nil as a first run: a nil []byte in the
// interface reaches json.Unmarshal and fails. This is why Get must return untyped nil.
func TestHydrateFailsOnANilByteSliceButNotOnGetsNil(t *testing.T) {
	typedNil := &durableStateManager{provider: nilBytesProvider{}}
	if _, err := typedNil.Hydrate(testContext(t), "s"); err == nil {
		t.Fatal("the manager accepted a nil []byte: it would not tell the quirk apart")
	}
	f := answering(t, 200, noState)
	state, err := (&durableStateManager{provider: f.provider()}).Hydrate(testContext(t), "s")
	if err != nil || state != nil {
		t.Fatalf("want a first run (nil, nil), got %v, %v", state, err)
	}
}
