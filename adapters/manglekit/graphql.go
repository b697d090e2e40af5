package convograph

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The three operations, as the contract (contract.graphql) names them, and the history
// query that tells a lost answer's checkpoint after a delete (ownLostWrite).
const (
	getQuery = `query SessionState($sessionId: String!) {
  sessionState(sessionId: $sessionId) { version state }
}`
	historyQuery = `query SessionStateHistory($sessionId: String!) {
  sessionStateHistory(sessionId: $sessionId, first: 2) { nodes { version } }
}`
	setMutation = `mutation CheckpointSession($input: CheckpointSessionInput!) {
  checkpointSession(input: $input) {
    sessionState { version }
    userErrors { code message field }
  }
}`
	deleteMutation = `mutation DeleteSessionState($input: DeleteSessionStateInput!) {
  deleteSessionState(input: $input) {
    deleted
    userErrors { code message field }
  }
}`
)

const (
	// maxResponseBytes bounds what one answer may hold (the server's own request limit is
	// 32 MiB by default; a stored state is returned with at most that much escaping).
	maxResponseBytes = 256 << 20
	// errorSnippetBytes is how much of a non-JSON error body goes into an HTTPError.
	errorSnippetBytes = 512
	userAgent         = "convograph-manglekit-go/0.1"
)

// checkpointInput is CheckpointSessionInput.
type checkpointInput struct {
	SessionID       string          `json:"sessionId"`
	State           json.RawMessage `json:"state"`
	Outcome         string          `json:"outcome"`
	ExpectedVersion *int            `json:"expectedVersion,omitempty"`
}

// deleteInput is DeleteSessionStateInput.
type deleteInput struct {
	SessionID string `json:"sessionId"`
}

type userError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Field   []string `json:"field"`
}

// firstUserError turns a payload's userErrors into an error (nil when there are none).
func firstUserError(errs []userError) error {
	if len(errs) == 0 {
		return nil
	}
	e := errs[0]
	return &GraphQLError{Code: e.Code, Message: e.Message, Field: e.Field, UserError: true}
}

type graphQLRequest struct {
	Query     string `json:"query"`
	Variables any    `json:"variables"`
}

type graphQLResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string `json:"message"`
		Extensions struct {
			Code              string  `json:"code"`
			RetryAfterSeconds float64 `json:"retryAfterSeconds"` // with RATE_LIMITED
		} `json:"extensions"`
	} `json:"errors"`
}

// encodeRequest is the POST body: {"query": ..., "variables": ...}. HTML characters are
// left as they are (encoding/json would escape <, > and & by default).
func encodeRequest(query string, variables any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(graphQLRequest{Query: query, Variables: variables}); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// encodeState is the JSON document Set stores. []byte, string and json.RawMessage are
// taken as JSON text, as Manglekit's Checkpoint passes it; anything else is marshalled
// with encoding/json (which replaces invalid UTF-8 in strings with U+FFFD).
func encodeState(state any) (json.RawMessage, error) {
	var text []byte
	switch v := state.(type) {
	case nil:
		return nil, fmt.Errorf("%w: the state is nil", ErrInvalidState)
	case []byte:
		text = v
	case json.RawMessage:
		text = v
	case string:
		text = []byte(v)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, fmt.Errorf("%w: %T cannot be encoded as JSON: %v", ErrInvalidState, state, err)
		}
		return bytes.TrimRight(buf.Bytes(), "\n"), nil
	}
	// encoding/json passes raw text through without checking its UTF-8, and the server
	// refuses a body that is not UTF-8: say so here, before any request.
	if !utf8.Valid(text) {
		return nil, fmt.Errorf("%w: the state is not valid UTF-8", ErrInvalidState)
	}
	if !json.Valid(text) {
		return nil, fmt.Errorf("%w: the state is not valid JSON", ErrInvalidState)
	}
	// Valid to encoding/json, refused by the server (HTTP 400): a lone UTF-16 surrogate in
	// an escape, which no UTF-8 text can hold, and a number too large for a double.
	if why := unstorableJSON(text); why != "" {
		return nil, fmt.Errorf("%w: the state holds %s", ErrInvalidState, why)
	}
	return text, nil
}

// The nesting a state may have, below what the server reads of a request's body.
const maxStateDepth = 1000

// unstorableJSON says what, in valid JSON text, the server refuses; "" for nothing.
func unstorableJSON(text []byte) string {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	depth := 0
	for {
		token, err := dec.Token()
		if err != nil {
			break // io.EOF: the text was checked valid
		}
		if d, ok := token.(json.Delim); ok {
			if d == '[' || d == '{' {
				depth++
			} else {
				depth--
			}
			// The server reads a request body 1,024 levels deep, the state's own from
			// within the request's variables: deeper, its answer is a bare HTTP 400 (a
			// shallower state it refuses is ErrInvalidInput, a userError that says why).
			if depth > maxStateDepth {
				return fmt.Sprintf("JSON nested more than %d levels deep", maxStateDepth)
			}
		}
		// An integer of any length is stored exactly; only a number with a fraction or an
		// exponent is read as a double, which may overflow.
		if n, ok := token.(json.Number); ok && strings.ContainsAny(string(n), ".eE") {
			if f, err := strconv.ParseFloat(string(n), 64); err != nil && math.IsInf(f, 0) {
				return "a number too large to store: " + string(n)
			}
		}
	}
	return loneSurrogate(text)
}

// loneSurrogate describes the first lone UTF-16 surrogate escape in JSON text, "" for none.
func loneSurrogate(text []byte) string {
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' {
			continue
		}
		if i+1 < len(text) && text[i+1] != 'u' {
			i++ // an escape of one character (\\ included): nothing after it is escaped
			continue
		}
		unit, ok := utf16Escape(text, i)
		if !ok {
			continue
		}
		switch {
		case unit >= 0xD800 && unit <= 0xDBFF:
			if low, ok := utf16Escape(text, i+6); ok && low >= 0xDC00 && low <= 0xDFFF {
				i += 11 // the pair's second half
				continue
			}
			return "a lone UTF-16 surrogate escape (\\u" + string(text[i+2:i+6]) + ")"
		case unit >= 0xDC00 && unit <= 0xDFFF:
			return "a lone UTF-16 surrogate escape (\\u" + string(text[i+2:i+6]) + ")"
		}
		i += 5
	}
	return ""
}

// utf16Escape reads the \uXXXX escape at text[at:].
func utf16Escape(text []byte, at int) (uint64, bool) {
	if at+6 > len(text) || text[at] != '\\' || text[at+1] != 'u' {
		return 0, false
	}
	unit, err := strconv.ParseUint(string(text[at+2:at+6]), 16, 16)
	return unit, err == nil
}

// post runs one GraphQL operation and decodes its data into out.
func (p *StateProvider) post(ctx context.Context, query string, variables, out any) error {
	body, err := encodeRequest(query, variables)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidState, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return &transportError{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return &transportError{err: err}
	}
	if len(raw) > maxResponseBytes {
		return fmt.Errorf("%w: the answer exceeds %d bytes", ErrBadResponse, maxResponseBytes)
	}
	return decodeResponse(resp, raw, out)
}

// decodeResponse turns one HTTP answer into out (the operation's data) or an error.
func decodeResponse(resp *http.Response, raw []byte, out any) error {
	var body graphQLResponse
	jsonErr := json.Unmarshal(raw, &body)
	if resp.StatusCode != http.StatusOK {
		herr := &HTTPError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id"),
			RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
		if location := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && location != "" {
			// Resolved against the URL asked: a relative one ("/v2/graphql") is no URL to give.
			if resolved, err := resp.Location(); err == nil {
				resolved.User = nil // the endpoint's credentials, kept by a relative one: not in a message
				location = resolved.String()
			}
			herr.Message = "redirected to " + location + " (not followed: give the provider that URL)"
		} else if jsonErr == nil && len(body.Errors) > 0 {
			herr.Message = body.Errors[0].Message
			herr.Code = body.Errors[0].Extensions.Code
			if herr.RetryAfter == 0 {
				herr.RetryAfter = seconds(body.Errors[0].Extensions.RetryAfterSeconds)
			}
		} else {
			herr.Message = snippet(raw)
		}
		return herr
	}
	if jsonErr != nil {
		return fmt.Errorf("%w: %v (Content-Type %q, body %q)",
			ErrBadResponse, jsonErr, resp.Header.Get("Content-Type"), snippet(raw))
	}
	if len(body.Errors) > 0 {
		first := body.Errors[0]
		return &GraphQLError{Code: first.Extensions.Code, Message: first.Message}
	}
	if len(body.Data) == 0 || string(body.Data) == "null" {
		return fmt.Errorf("%w: no data and no errors", ErrBadResponse)
	}
	if err := json.Unmarshal(body.Data, out); err != nil {
		return fmt.Errorf("%w: unexpected data: %v", ErrBadResponse, err)
	}
	return nil
}

// retryAfter reads a Retry-After header: whole seconds, or an HTTP date; 0 for none, a
// date past, or anything else.
func retryAfter(header string, now time.Time) time.Duration {
	header = strings.TrimSpace(header)
	if header == "" {
		return 0
	}
	if strings.Trim(header, "0123456789") == "" { // delay-seconds (any length)
		n, _ := strconv.ParseFloat(header, 64)
		return seconds(n)
	}
	if at, err := http.ParseTime(header); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// maxRetryAfter caps a wait the server asks for, so that no number overflows a Duration.
const maxRetryAfter = 24 * time.Hour

// seconds is n seconds as a Duration, 0 for none or less, at most maxRetryAfter.
func seconds(n float64) time.Duration {
	switch {
	case !(n > 0): // NaN included
		return 0
	case n >= maxRetryAfter.Seconds():
		return maxRetryAfter
	}
	return time.Duration(n * float64(time.Second))
}

// snippet is the start of a body for an error message, as valid UTF-8 on one line.
func snippet(raw []byte) string {
	if len(raw) > errorSnippetBytes {
		raw = raw[:errorSnippetBytes]
	}
	text := strings.ToValidUTF8(string(raw), "\uFFFD")
	return strings.Join(strings.Fields(text), " ")
}

// documentDigest identifies a JSON document by what the server keeps of it, not by how it
// is written: the server stores a state compact, so the state it returns is another text
// of the one sent, and two texts have the same digest only if the server stores them
// alike. Objects are compared as key sets (their order aside; of a key given twice the
// last value, as the server reads it), strings unescaped, numbers as canonicalNumber says.
// ok is false for text that is not one JSON document the server would store.
func documentDigest(text []byte) (digest [sha256.Size]byte, ok bool) {
	// encoding/json reads a lone surrogate escape, and invalid UTF-8, as U+FFFD: the
	// server refuses both.
	if !utf8.Valid(text) || loneSurrogate(text) != "" {
		return digest, false
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return digest, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return digest, false // more than one document
	}
	h := sha256.New()
	w := bufio.NewWriter(h)
	writeCanonical(w, v)
	if err := w.Flush(); err != nil {
		return digest, false
	}
	copy(digest[:], h.Sum(nil))
	return digest, true
}

// sameDocument reports whether a and b are the same JSON document (see documentDigest).
func sameDocument(a, b []byte) bool {
	da, okA := documentDigest(a)
	db, okB := documentDigest(b)
	return okA && okB && da == db
}

// writeCanonical writes v, as decoded with UseNumber, in a form of which no two values
// share a text: every scalar is tagged and a string carries its length.
func writeCanonical(w *bufio.Writer, v any) {
	switch x := v.(type) {
	case nil:
		w.WriteByte('n')
	case bool:
		if x {
			w.WriteByte('t')
		} else {
			w.WriteByte('f')
		}
	case string:
		writeTagged(w, 's', x)
	case json.Number:
		tag, text := canonicalNumber(string(x))
		writeTagged(w, tag, text)
	case []any:
		w.WriteByte('[')
		for _, item := range x {
			writeCanonical(w, item)
		}
		w.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.WriteByte('{')
		for _, k := range keys {
			writeTagged(w, 's', k)
			writeCanonical(w, x[k])
		}
		w.WriteByte('}')
	}
}

func writeTagged(w *bufio.Writer, tag byte, text string) {
	w.WriteByte(tag)
	w.WriteString(strconv.Itoa(len(text)))
	w.WriteByte(':')
	w.WriteString(text)
}

// canonicalNumber is the JSON number n as the server stores it (graph/domain/jsoncodec.py),
// with a tag that keeps the kinds apart:
//   - 'i': an integer literal (no '.', 'e' or 'E'), by its exact value whatever its size
//     (-0 is 0);
//   - 'd': any other number whose decimal value is that of its double's shortest form, by
//     that double (1e2, 100.0 and 100.00 alike; not the integer 100; -0.0 is not 0.0;
//     0e-400 is 0.0);
//   - 'x': any other number (0.30000000000000000001, a double's digits and more; 1e-400
//     and 4e-324, past a double's smallest normal, whose doubles are 0.0 and 5e-324), by
//     its text as sent, which the server keeps as it is: a number of the same value
//     spelled otherwise is another text.
func canonicalNumber(n string) (tag byte, text string) {
	if !strings.ContainsAny(n, ".eE") {
		if n == "-0" {
			return 'i', "0"
		}
		return 'i', n
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return 'x', n // out of a double's range: refused before any request
	}
	shortest := strconv.FormatFloat(f, 'g', -1, 64)
	if sameDecimal(n, shortest) {
		return 'd', shortest
	}
	return 'x', n
}

// sameDecimal reports whether the JSON numbers a and b have the same decimal value
// (2.50 and 2.5e0 do; -0.0 and 0 do, as Python's Decimal compares them).
func sameDecimal(a, b string) bool {
	negA, digitsA, expA, okA := decimal(a)
	negB, digitsB, expB, okB := decimal(b)
	if !okA || !okB {
		return false
	}
	if digitsA == "" || digitsB == "" { // a zero
		return digitsA == digitsB
	}
	return negA == negB && digitsA == digitsB && expA == expB
}

// decimal is the JSON number n as ±digits×10^exp, digits without leading or trailing
// zeros ("" for zero); ok is false for an exponent past 64 bits (of a number other than 0).
func decimal(n string) (neg bool, digits string, exp int64, ok bool) {
	neg = strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mantissa, exponent := n, "0"
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		mantissa, exponent = n[:i], n[i+1:]
	}
	whole, fraction := mantissa, ""
	if i := strings.IndexByte(mantissa, '.'); i >= 0 {
		whole, fraction = mantissa[:i], mantissa[i+1:]
	}
	digits = strings.TrimLeft(whole+fraction, "0")
	significant := strings.TrimRight(digits, "0")
	if significant == "" {
		return neg, "", 0, true
	}
	negExp := strings.HasPrefix(exponent, "-")
	exponent = strings.TrimLeft(strings.TrimLeft(exponent, "+-"), "0")
	if len(exponent) > 18 {
		return neg, significant, 0, false
	}
	e, err := strconv.ParseInt("0"+exponent, 10, 64)
	if err != nil {
		return neg, significant, 0, false
	}
	if negExp {
		e = -e
	}
	// len(fraction) and the zeros trimmed are at most the text's length: no overflow.
	return neg, significant, e - int64(len(fraction)) + int64(len(digits)-len(significant)), true
}
