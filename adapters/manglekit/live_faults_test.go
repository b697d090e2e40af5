package convograph

// Faults of a real server that the caller arranges and names in an environment variable
// (tests/test_adapter_manglekit.py does): a revoked token, a server that accepts
// connections and never answers, a server that is gone. Each test skips without its
// variable.

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// CONVOGRAPH_REVOKED_TOKEN: a token the server has revoked.
func TestFaultRevokedToken(t *testing.T) {
	s := live(t)
	token := os.Getenv("CONVOGRAPH_REVOKED_TOKEN")
	if token == "" {
		t.Skip("set CONVOGRAPH_REVOKED_TOKEN to a revoked token to run it")
	}
	p := NewStateProvider(s.url, token)
	ctx := testContext(t)
	id := s.prefix + "-revoked"
	_, getErr := p.Get(ctx, id)
	setErr := p.Set(ctx, id, seedDocument(t, id))
	deleteErr := p.Delete(ctx, id)
	for op, err := range map[string]error{"Get": getErr, "Set": setErr, "Delete": deleteErr} {
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: want ErrUnauthorized, got %v", op, err)
			continue
		}
		herr := asHTTPError(t, err)
		if herr.StatusCode != 401 || !strings.Contains(herr.Message, "revoked") {
			t.Errorf("%s: got %#v", op, herr)
		}
		t.Logf("%s: %v", op, err)
	}
}

// faultTimeout is the provider timeout of the fault tests: CONVOGRAPH_FAULT_TIMEOUT
// (a Go duration), 3s by default.
func faultTimeout(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("CONVOGRAPH_FAULT_TIMEOUT")
	if v == "" {
		return 3 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("CONVOGRAPH_FAULT_TIMEOUT=%q: %v", v, err)
	}
	return d
}

// CONVOGRAPH_DOWN_URL: the endpoint of a server that is not running. Each call fails
// with ErrUnavailable before its timeout.
func TestFaultServerDown(t *testing.T) {
	url := os.Getenv("CONVOGRAPH_DOWN_URL")
	if url == "" {
		t.Skip("set CONVOGRAPH_DOWN_URL to the endpoint of a stopped server to run it")
	}
	timeout := faultTimeout(t)
	p := NewStateProvider(url, "cvg_any", WithTimeout(timeout))
	ctx := context.Background()
	calls := map[string]func() error{
		"Get":    func() error { _, err := p.Get(ctx, "down"); return err },
		"Set":    func() error { return p.Set(ctx, "down", seedDocument(t, "down")) },
		"Delete": func() error { return p.Delete(ctx, "down") },
	}
	for op, call := range calls {
		start := time.Now()
		err := call()
		elapsed := time.Since(start)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: want ErrUnavailable, got %v", op, err)
		}
		if elapsed >= timeout {
			t.Errorf("%s: returned after %s, not before its timeout of %s", op, elapsed, timeout)
		}
		t.Logf("%s failed after %s: %v", op, elapsed.Round(time.Microsecond), err)
	}
}

// CONVOGRAPH_STALLED_URL: the endpoint of a server that accepts connections and never
// answers (a stopped process). Each call fails with context.DeadlineExceeded at its
// timeout.
func TestFaultServerStalled(t *testing.T) {
	url := os.Getenv("CONVOGRAPH_STALLED_URL")
	if url == "" {
		t.Skip("set CONVOGRAPH_STALLED_URL to the endpoint of a frozen server to run it")
	}
	timeout := faultTimeout(t)
	p := NewStateProvider(url, "cvg_any", WithTimeout(timeout))
	start := time.Now()
	_, err := p.Get(context.Background(), "stalled")
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "provider's timeout") {
		t.Fatalf("want the provider's timeout, got %v", err)
	}
	if elapsed >= timeout+2*time.Second {
		t.Errorf("returned %s after its timeout of %s", elapsed-timeout, timeout)
	}
	t.Logf("Get failed after %s: %v", elapsed.Round(time.Microsecond), err)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(timeout/4, cancel)
	start = time.Now()
	err = p.Set(ctx, "stalled", seedDocument(t, "stalled"))
	elapsed = time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled mid-request: want context.Canceled, got %v", err)
	}
	if elapsed >= timeout {
		t.Errorf("a cancelled Set returned after %s, not before its timeout of %s", elapsed, timeout)
	}
	t.Logf("Set cancelled after %s: %v", elapsed.Round(time.Microsecond), err)
}

// CONVOGRAPH_RATE_LIMITED_URL and CONVOGRAPH_RATE_LIMITED_TOKEN: a server whose rate limit
// is 1 request per second with a burst of 1, and a WRITE token of it. A Set over the
// limit fails with ErrUnavailable and the server's Retry-After; it stored nothing, and
// after that wait the same Set goes through.
func TestFaultRateLimited(t *testing.T) {
	url, token := os.Getenv("CONVOGRAPH_RATE_LIMITED_URL"), os.Getenv("CONVOGRAPH_RATE_LIMITED_TOKEN")
	if url == "" || token == "" {
		t.Skip("set CONVOGRAPH_RATE_LIMITED_URL and CONVOGRAPH_RATE_LIMITED_TOKEN (a server " +
			"limited to 1 request per second, burst 1) to run it")
	}
	p := NewStateProvider(url, token, WithConflictDetection())
	ctx := testContext(t)
	id := "go-test-" + randomHex(t) + "-rate-limited"
	if _, err := p.Get(ctx, id); err != nil { // the burst
		t.Fatal(err)
	}
	err := p.Set(ctx, id, seedDocument(t, id))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("over the rate limit: want ErrUnavailable, got %v", err)
	}
	herr := asHTTPError(t, err)
	if herr.StatusCode != 429 || herr.Code != "RATE_LIMITED" {
		t.Errorf("got %#v", herr)
	}
	if herr.RetryAfter < time.Second || herr.RetryAfter > 2*time.Second {
		t.Fatalf("RetryAfter %s, want the server's 1s", herr.RetryAfter)
	}
	t.Logf("Set: %v", err)
	time.Sleep(herr.RetryAfter)
	// Conditional on no state: the refused Set stored nothing.
	if err := p.Set(ctx, id, seedDocument(t, id)); err != nil {
		t.Fatalf("after waiting %s: %v", herr.RetryAfter, err)
	}
	if v, _ := p.Version(id); v != 1 {
		t.Errorf("version %d, want 1", v)
	}
}
