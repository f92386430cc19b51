package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestRetriesTransientStatuses(t *testing.T) {
	for _, code := range []int{408, 429, 500, 502, 503, 504} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := newScriptServer(t, status(code), created)
			tr, fc := newTestTransport(t, srv.Client().Transport)
			resp, body, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, []byte(`{"amount":100}`))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 201 || string(body) != `{"id":"pay_1"}` {
				t.Fatalf("got %d %q, want 201 from the second attempt", resp.StatusCode, body)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 || reqs[0].key != reqs[1].key || reqs[0].key == "" {
				t.Fatalf("requests %+v: want 2 with one non-empty key", reqs)
			}
			if got := fc.Sleeps(); len(got) != 1 || got[0] != DefaultBaseDelay-1 {
				t.Fatalf("sleeps %v, want one full-jitter wait below %s", got, DefaultBaseDelay)
			}
		})
	}
}

func TestRetries409OnlyWhenInFlight(t *testing.T) {
	srv := newScriptServer(t, problem(409, "https://idemgen.dev/problems/in-flight"), created)
	tr, fc := newTestTransport(t, srv.Client().Transport)
	resp, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || len(srv.Requests()) != 2 {
		t.Fatalf("got %d after %d requests, want 201 after 2", resp.StatusCode, len(srv.Requests()))
	}
	// Retry-After: 1 is longer than the first backoff bound (250ms): it wins.
	if got := fc.Sleeps(); len(got) != 1 || got[0] != time.Second {
		t.Fatalf("sleeps %v, want [1s] from Retry-After", got)
	}
}

func TestDoesNotRetryFinalResponses(t *testing.T) {
	long := strings.Repeat("x", 3*maxProblemBytes) // longer than the part read to classify a 409
	cases := []struct {
		name    string
		handler http.HandlerFunc
		code    int
		body    string
	}{
		{"400", status(400), 400, "Bad Request"},
		{"401", status(401), 401, "Unauthorized"},
		{"403", status(403), 403, "Forbidden"},
		{"404", status(404), 404, "Not Found"},
		{"413", status(413), 413, "Request Entity Too Large"},
		{"422", problem(422, "https://idemgen.dev/problems/payload-mismatch"), 422, `{"type":"https://idemgen.dev/problems/payload-mismatch","title":"conflict","status":409}`},
		{"425", status(425), 425, "Too Early"},
		{"200", status(200), 200, "OK"},
		{"409 plain", status(409), 409, "Conflict"},
		{"409 other problem", problem(409, "https://idemgen.dev/problems/payload-mismatch"), 409, `{"type":"https://idemgen.dev/problems/payload-mismatch","title":"conflict","status":409}`},
		{"409 lookalike problem", problem(409, "https://example.com/not-in-flight"), 409, `{"type":"https://example.com/not-in-flight","title":"conflict","status":409}`},
		{"409 problem with long body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(409)
			io.WriteString(w, `{"type":"x","detail":"`+long+`"}`)
		}, 409, `{"type":"x","detail":"` + long + `"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newScriptServer(t, c.handler, created)
			tr, fc := newTestTransport(t, srv.Client().Transport)
			resp, body, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.code || string(body) != c.body {
				t.Fatalf("got %d %.80q, want %d %.80q", resp.StatusCode, body, c.code, c.body)
			}
			if n := len(srv.Requests()); n != 1 || len(fc.Sleeps()) != 0 {
				t.Fatalf("%d requests, sleeps %v: want 1 request and no wait", n, fc.Sleeps())
			}
		})
	}
}

func TestProblemIs(t *testing.T) {
	for typ, want := range map[string]bool{
		"in-flight":                            true,
		"https://idemgen.dev/p/in-flight":      true,
		"urn:problem:in-flight":                true,
		"https://x.example/problems#in-flight": true,
		"https://x.example/not-in-flight":      false,
		"in-flight-soon":                       false,
		"":                                     false,
	} {
		if got := problemIs(typ, "in-flight"); got != want {
			t.Errorf("problemIs(%q) = %v, want %v", typ, got, want)
		}
	}
}

func TestRetriesNetworkErrorsUntilAttemptsRunOut(t *testing.T) {
	srv := newScriptServer(t, drop)
	tr, fc := newTestTransport(t, srv.Client().Transport, WithMaxAttempts(3))
	_, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, []byte(`{}`))
	var ex *ExhaustedError
	if !errors.As(err, &ex) || !errors.Is(err, ErrMaxAttempts) {
		t.Fatalf("err %v, want *ExhaustedError with ErrMaxAttempts", err)
	}
	if ex.Attempts != 3 || ex.Status != 0 || ex.Err == nil || ex.Key == "" {
		t.Fatalf("got %+v, want 3 attempts ending in a transport error", ex)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("server saw %d requests, want 3", n)
	}
	// Full jitter at its maximum: just under 250ms, then 500ms.
	if got, want := fc.Sleeps(), []time.Duration{DefaultBaseDelay - 1, 2*DefaultBaseDelay - 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sleeps %v, want %v", got, want)
	}
	if want := newFakeClock().now.Add(DefaultRetention - time.Hour); !ex.RetryBefore.Equal(want) {
		t.Fatalf("RetryBefore %s, want %s", ex.RetryBefore, want)
	}
}

func TestExhaustedKeepsLastResponse(t *testing.T) {
	srv := newScriptServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(503)
		io.WriteString(w, `{"type":"store-unavailable"}`)
	})
	tr, _ := newTestTransport(t, srv.Client().Transport, WithMaxAttempts(2))
	_, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, []byte(`{}`))
	var ex *ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("err %v, want *ExhaustedError", err)
	}
	if ex.Status != 503 || string(ex.Body) != `{"type":"store-unavailable"}` || ex.Header.Get("Content-Type") != "application/problem+json" || ex.RetryAfter != 2*time.Second || ex.Err != nil {
		t.Fatalf("got %+v, want the last 503 problem with Retry-After 2s", ex)
	}
	if !strings.Contains(err.Error(), "503 Service Unavailable") {
		t.Fatalf("message %q does not name the last status", err)
	}
}

// TestDroppedResponseGetsReplay: the server does the work and stores the response, then the
// connection drops before the client reads it. The retry, with the same key, must get the stored
// response as a replay, and the work must have happened once.
func TestDroppedResponseGetsReplay(t *testing.T) {
	type stored struct {
		status int
		body   string
	}
	var (
		mu    sync.Mutex
		done  = map[string]stored{}
		work  = map[string]int{}
		drops int
	)
	srv := newScriptServer(t, func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(DefaultHeader)
		mu.Lock()
		defer mu.Unlock()
		if s, ok := done[key]; ok {
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(s.status)
			io.WriteString(w, s.body)
			return
		}
		work[key]++
		done[key] = stored{201, fmt.Sprintf(`{"id":"pay_%d"}`, len(work))}
		if drops == 0 {
			drops++
			drop(w, r)
			return
		}
		w.WriteHeader(201)
		io.WriteString(w, done[key].body)
	})
	tr, _ := newTestTransport(t, srv.Client().Transport)
	resp, body, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, []byte(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || !Replayed(resp) || string(body) != `{"id":"pay_1"}` {
		t.Fatalf("got %d replayed=%v %q, want the stored 201 replayed", resp.StatusCode, Replayed(resp), body)
	}
	key := tr.KeyOf(resp)
	if len(work) != 1 || work[key] != 1 {
		t.Fatalf("work per key %v, want exactly once for key %q", work, key)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("server saw %d requests, want 2", n)
	}
}

func TestKeyStablePerOperationFreshAcross(t *testing.T) {
	srv := newScriptServer(t, status(503), status(503), created, status(503), created)
	tr, _ := newTestTransport(t, srv.Client().Transport)
	hc := &http.Client{Transport: tr}
	for range 2 {
		if _, _, err := post(t, hc, context.Background(), srv.URL, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5", len(reqs))
	}
	first, second := reqs[0].key, reqs[3].key
	if reqs[1].key != first || reqs[2].key != first || reqs[4].key != second {
		t.Fatalf("keys changed between attempts: %+v", reqs)
	}
	if first == second {
		t.Fatalf("two operations shared key %q", first)
	}
	for _, k := range []string{first, second} {
		u, err := uuid.Parse(k)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || len(k) != 36 {
			t.Fatalf("key %q is not a UUID v4 in text form (%v)", k, err)
		}
	}
	for _, r := range reqs {
		if r.keys != 1 {
			t.Fatalf("a request carried %d key headers, want 1", r.keys)
		}
	}
}

func TestCallerSuppliedKey(t *testing.T) {
	const key = "order-42-3f9c1a7e"
	t.Run("context", func(t *testing.T) {
		srv := newScriptServer(t, status(500), created)
		tr, _ := newTestTransport(t, srv.Client().Transport)
		ctx := WithKey(context.Background(), key)
		if k, ok := KeyFrom(ctx); !ok || k != key {
			t.Fatalf("KeyFrom = %q, %v", k, ok)
		}
		resp, _, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range srv.Requests() {
			if r.key != key {
				t.Fatalf("server saw key %q, want %q", r.key, key)
			}
		}
		if tr.KeyOf(resp) != key {
			t.Fatalf("KeyOf = %q, want %q", tr.KeyOf(resp), key)
		}
	})
	t.Run("header kept", func(t *testing.T) {
		srv := newScriptServer(t, status(502), created)
		tr, _ := newTestTransport(t, srv.Client().Transport)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		req.Header.Set("idempotency-key", key)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		reqs := srv.Requests()
		if len(reqs) != 2 || reqs[0].key != key || reqs[1].key != key || reqs[0].keys != 1 {
			t.Fatalf("requests %+v, want 2 carrying the caller's header once", reqs)
		}
		if got := req.Header.Get(DefaultHeader); got != key {
			t.Fatalf("caller's request modified: header %q", got)
		}
	})
	t.Run("custom header name", func(t *testing.T) {
		var got []string
		srv := newScriptServer(t, func(w http.ResponseWriter, r *http.Request) {
			got = append(got, r.Header.Get("X-Request-Key"), r.Header.Get(DefaultHeader))
			created(w, r)
		})
		tr, _ := newTestTransport(t, srv.Client().Transport, WithHeader("x-request-key"))
		if _, _, err := post(t, &http.Client{Transport: tr}, WithKey(context.Background(), key), srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != key || got[1] != "" {
			t.Fatalf("headers seen %q, want the key in X-Request-Key only", got)
		}
	})
	refused := []struct {
		name   string
		ctx    context.Context
		header []string
		opts   []Option
		want   string
	}{
		{"header and context differ", WithKey(context.Background(), key), []string{"other-key-123456"}, nil, "differ"},
		{"two header lines", context.Background(), []string{key, key}, nil, "2 Idempotency-Key headers"},
		{"comma in key", WithKey(context.Background(), "a,b"), nil, nil, "byte 0x2c"},
		{"space in key", WithKey(context.Background(), "a b"), nil, nil, "byte 0x20"},
		{"empty key", WithKey(context.Background(), ""), nil, nil, "empty"},
		{"key func error", context.Background(), nil, []Option{WithKeyFunc(func(*http.Request) (string, error) {
			return "", errors.New("store down")
		})}, "store down"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			srv := newScriptServer(t, created)
			tr, _ := newTestTransport(t, srv.Client().Transport, c.opts...)
			body := &closeTracker{Reader: strings.NewReader(`{}`)}
			req, _ := http.NewRequestWithContext(c.ctx, http.MethodPost, srv.URL, body)
			for _, h := range c.header {
				req.Header.Add(DefaultHeader, h)
			}
			_, err := tr.RoundTrip(req)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one mentioning %q", err, c.want)
			}
			if n := len(srv.Requests()); n != 0 || !body.closed {
				t.Fatalf("%d requests sent, body closed %v: want none sent and the body closed", n, body.closed)
			}
		})
	}
}

func TestKeyFuncCalledOncePerOperation(t *testing.T) {
	srv := newScriptServer(t, status(503), status(503), created)
	calls := 0
	tr, _ := newTestTransport(t, srv.Client().Transport, WithKeyFunc(func(r *http.Request) (string, error) {
		calls++
		return fmt.Sprintf("derived-%s-%d", r.URL.Path, calls), nil
	}))
	if _, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL+"/v1/payments", nil); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("KeyFunc called %d times, want 1", calls)
	}
	for _, r := range srv.Requests() {
		if r.key != "derived-/v1/payments-1" {
			t.Fatalf("key %q, want the derived one on every attempt", r.key)
		}
	}
}

func TestBodyReplayedByteExact(t *testing.T) {
	body := make([]byte, 200<<10) // 200 KiB of every byte value, invalid UTF-8 included
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, withGetBody := range []bool{false, true} {
		t.Run(fmt.Sprintf("GetBody=%v", withGetBody), func(t *testing.T) {
			srv := newScriptServer(t, status(503), drop, created)
			tr, _ := newTestTransport(t, srv.Client().Transport)
			var reqBody io.Reader = bytes.NewReader(body)
			tracker := &closeTracker{Reader: reqBody}
			if !withGetBody {
				reqBody = tracker // no GetBody: the Transport must buffer it
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL, reqBody)
			if (req.GetBody != nil) != withGetBody {
				t.Fatalf("test setup: GetBody set = %v", req.GetBody != nil)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			for i, r := range reqs {
				if !bytes.Equal(r.body, body) {
					t.Fatalf("attempt %d sent %d bytes differing from the %d original", i+1, len(r.body), len(body))
				}
			}
			if !withGetBody && !tracker.closed {
				t.Fatal("the caller's request body was not closed")
			}
		})
	}
}

func TestBodyCap(t *testing.T) {
	srv := newScriptServer(t, created)
	tr, _ := newTestTransport(t, srv.Client().Transport, WithMaxBodyBytes(10))
	send := func(r io.Reader) error {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, r)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := send(&closeTracker{Reader: strings.NewReader("0123456789")}); err != nil {
		t.Fatalf("10 bytes at a 10-byte cap: %v", err)
	}
	over := &closeTracker{Reader: strings.NewReader("0123456789A")}
	if err := send(over); !errors.Is(err, ErrBodyTooLarge) || !over.closed {
		t.Fatalf("11 bytes: err %v, closed %v; want ErrBodyTooLarge and the body closed", err, over.closed)
	}
	if err := send(strings.NewReader("0123456789A")); err != nil {
		t.Fatalf("11 bytes with GetBody need no buffer: %v", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("server saw %d requests, want 2 (the refused body is never sent)", n)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Run("seconds", func(t *testing.T) {
		srv := newScriptServer(t, statusRetryAfter(429, "7"), created)
		tr, fc := newTestTransport(t, srv.Client().Transport)
		if _, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		if got := fc.Sleeps(); len(got) != 1 || got[0] != 7*time.Second {
			t.Fatalf("sleeps %v, want [7s]", got)
		}
	})
	t.Run("HTTP date", func(t *testing.T) {
		var fc *fakeClock
		srv := newScriptServer(t, func(w http.ResponseWriter, r *http.Request) {
			statusRetryAfter(503, fc.Now().Add(12*time.Second).Format(http.TimeFormat))(w, r)
		}, created)
		var tr *Transport
		tr, fc = newTestTransport(t, srv.Client().Transport)
		if _, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		if got := fc.Sleeps(); len(got) != 1 || got[0] != 12*time.Second {
			t.Fatalf("sleeps %v, want [12s]", got)
		}
	})
	t.Run("shorter than backoff", func(t *testing.T) {
		srv := newScriptServer(t, statusRetryAfter(503, "0"), created)
		tr, fc := newTestTransport(t, srv.Client().Transport)
		if _, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		if got := fc.Sleeps(); len(got) != 1 || got[0] != DefaultBaseDelay-1 {
			t.Fatalf("sleeps %v, want the jittered backoff", got)
		}
	})
	t.Run("longer than MaxDelay", func(t *testing.T) {
		srv := newScriptServer(t, statusRetryAfter(503, "120"), created)
		tr, fc := newTestTransport(t, srv.Client().Transport)
		_, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, nil)
		var ex *ExhaustedError
		if !errors.As(err, &ex) || !errors.Is(err, ErrRetryAfterTooLong) || ex.RetryAfter != 120*time.Second || ex.Attempts != 1 {
			t.Fatalf("err %v, want ErrRetryAfterTooLong after 1 attempt carrying 120s", err)
		}
		if len(fc.Sleeps()) != 0 || len(srv.Requests()) != 1 {
			t.Fatalf("sleeps %v, requests %d: want no retry earlier than asked", fc.Sleeps(), len(srv.Requests()))
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"0":                              0,
		" 30 ":                           30 * time.Second,
		"Sun, 01 Mar 2026 12:01:00 GMT":  time.Minute,
		"Sunday, 01-Mar-26 12:00:10 GMT": 10 * time.Second, // RFC 850, obsolete but allowed
		"Sun Mar  1 12:00:05 2026":       5 * time.Second,  // asctime
		"Sun, 01 Mar 2026 11:00:00 GMT":  0,                // in the past
		"99999999999999999999999":        maxRetryAfter,
	} {
		got, ok := retryAfter(http.Header{"Retry-After": {in}}, now)
		if !ok || got != want {
			t.Errorf("Retry-After %q = %s, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5", "soon", "12abc"} {
		if got, ok := retryAfter(http.Header{"Retry-After": {in}}, now); ok {
			t.Errorf("Retry-After %q accepted as %s; want ignored", in, got)
		}
	}
}

func TestContextCancelledMidBackoff(t *testing.T) {
	srv := newScriptServer(t, statusRetryAfter(503, "20"), created)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Real clock: the wait must really be interrupted.
	tr := New(srv.Client().Transport, WithOnRetry(func(Retry) {
		time.AfterFunc(20*time.Millisecond, cancel)
	}))
	start := time.Now()
	_, _, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, nil)
	var ex *ExhaustedError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &ex) || ex.Attempts != 1 || ex.Status != 503 {
		t.Fatalf("err %v, want context.Canceled in an *ExhaustedError after 1 attempt", err)
	}
	// A correctness bound, not a speed assertion: the 20s wait must not have run out.
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("returned after %s: the backoff wait was not interrupted", d)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestContextDeadlineBeforeNextAttempt(t *testing.T) {
	srv := newScriptServer(t, statusRetryAfter(503, "10"), created)
	tr, fc := newTestTransport(t, srv.Client().Transport)
	fc.now = time.Now() // the context's deadline is on the real clock
	ctx, cancel := context.WithDeadline(context.Background(), fc.Now().Add(5*time.Second))
	defer cancel()
	_, _, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
	if len(fc.Sleeps()) != 0 || len(srv.Requests()) != 1 {
		t.Fatalf("sleeps %v, %d requests: want to stop at once, not sleep into the deadline", fc.Sleeps(), len(srv.Requests()))
	}
}

func TestContextAlreadyCancelled(t *testing.T) {
	srv := newScriptServer(t, created)
	tr, _ := newTestTransport(t, srv.Client().Transport)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, nil)
	if !errors.Is(err, context.Canceled) || len(srv.Requests()) != 0 {
		t.Fatalf("err %v after %d requests, want Canceled and nothing sent", err, len(srv.Requests()))
	}
}

func TestGivesUpBeforeRetention(t *testing.T) {
	t.Run("persisted key too old", func(t *testing.T) {
		srv := newScriptServer(t, created)
		tr, fc := newTestTransport(t, srv.Client().Transport)
		// Default retention 24h, margin 1h: a key first sent 23h30m ago must not be sent.
		firstSent := fc.Now().Add(-23*time.Hour - 30*time.Minute)
		ctx := WithKeySince(context.Background(), "persisted-key-0001", firstSent)
		_, _, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, nil)
		var rec *ReconcileError
		if !errors.As(err, &rec) || !errors.Is(err, ErrReconcile) {
			t.Fatalf("err %v, want *ReconcileError", err)
		}
		if rec.Key != "persisted-key-0001" || rec.Attempts != 0 || !rec.FirstSent.Equal(firstSent) || !rec.Deadline.Equal(firstSent.Add(23*time.Hour)) {
			t.Fatalf("got %+v", rec)
		}
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("%d requests sent with an expired key", n)
		}
	})
	t.Run("persisted key still fresh", func(t *testing.T) {
		srv := newScriptServer(t, created)
		tr, fc := newTestTransport(t, srv.Client().Transport)
		ctx := WithKeySince(context.Background(), "persisted-key-0002", fc.Now().Add(-22*time.Hour))
		if _, _, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		if r := srv.Requests(); len(r) != 1 || r[0].key != "persisted-key-0002" {
			t.Fatalf("requests %+v", r)
		}
	})
	t.Run("during retries", func(t *testing.T) {
		srv := newScriptServer(t, statusRetryAfter(503, "4"))
		tr, fc := newTestTransport(t, srv.Client().Transport,
			WithRetention(10*time.Second), WithRetentionMargin(time.Second),
			WithMaxAttempts(100), WithMaxElapsed(0))
		_, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, nil)
		var rec *ReconcileError
		if !errors.As(err, &rec) {
			t.Fatalf("err %v, want *ReconcileError", err)
		}
		// Attempts at 0s, 4s, 8s; the next would be at 12s, past 10s - 1s.
		if rec.Attempts != 3 || rec.Status != 503 || len(srv.Requests()) != 3 {
			t.Fatalf("got %+v after %d requests, want 3 attempts", rec, len(srv.Requests()))
		}
		// It gives up at once instead of sleeping into the deadline.
		if got := fc.Sleeps(); len(got) != 2 {
			t.Fatalf("sleeps %v, want [4s 4s]", got)
		}
	})
}

func TestDefaultRetentionMargin(t *testing.T) {
	for retention, want := range map[time.Duration]time.Duration{
		24 * time.Hour:   time.Hour,
		time.Hour:        6 * time.Minute,
		10 * time.Minute: time.Minute,
	} {
		c := New(nil, WithRetention(retention)).cfg
		if got := c.safetyMargin(); got != want {
			t.Errorf("retention %s: margin %s, want %s", retention, got, want)
		}
	}
}

func TestMaxElapsed(t *testing.T) {
	srv := newScriptServer(t, status(500))
	tr, fc := newTestTransport(t, srv.Client().Transport,
		WithBackoff(time.Second, 30*time.Second), WithMaxElapsed(10*time.Second), WithMaxAttempts(100))
	_, _, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, nil)
	var ex *ExhaustedError
	if !errors.As(err, &ex) || !errors.Is(err, ErrMaxElapsed) {
		t.Fatalf("err %v, want ErrMaxElapsed", err)
	}
	// Waits just under 1s, 2s, 4s: attempts at ~0, 1, 3, 7s; the next would be at ~15s > 10s.
	if ex.Attempts != 4 || len(fc.Sleeps()) != 3 || ex.Status != 500 {
		t.Fatalf("got %+v, sleeps %v; want 4 attempts", ex, fc.Sleeps())
	}
}

func TestBackoffFullJitter(t *testing.T) {
	c := defaultConfig()
	c.baseDelay, c.maxDelay = 100*time.Millisecond, 3*time.Second
	var bound time.Duration
	c.jitter = func(n time.Duration) time.Duration { bound = n; return n / 2 }
	for n, want := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 5: 1600 * time.Millisecond,
		6: 3 * time.Second, 60: 3 * time.Second, 1000: 3 * time.Second,
	} {
		if got := c.backoff(n); bound != want || got != want/2 {
			t.Errorf("retry %d: bound %s (wait %s), want bound %s", n, bound, got, want)
		}
	}
	// The real jitter source stays inside [0, bound) and uses the range.
	c = defaultConfig()
	var top time.Duration
	for range 2000 {
		d := c.backoff(3) // bound 1s
		if d < 0 || d >= time.Second {
			t.Fatalf("wait %s outside [0, 1s)", d)
		}
		top = max(top, d)
	}
	if top < 900*time.Millisecond {
		t.Fatalf("largest of 2000 waits %s: not uniform over [0, 1s)", top)
	}
}

func TestFailedResponsesDrainedAndClosed(t *testing.T) {
	srv := newScriptServer(t, status(503), problem(409, "in-flight"), created)
	bt := &bodyTracker{base: srv.Client().Transport}
	tr, _ := newTestTransport(t, bt)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(bt.bodies) != 3 {
		t.Fatalf("%d responses, want 3", len(bt.bodies))
	}
	for i, b := range bt.bodies[:2] {
		if eof, closed := b.state(); !eof || !closed {
			t.Fatalf("failed attempt %d: read to end %v, closed %v", i+1, eof, closed)
		}
	}
	if _, closed := bt.bodies[2].state(); closed {
		t.Fatal("the final response was closed before the caller read it")
	}
	resp.Body.Close()
}

func TestSafeMethodsPassThrough(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			srv := newScriptServer(t, status(503), created)
			tr, fc := newTestTransport(t, srv.Client().Transport)
			req, _ := http.NewRequest(method, srv.URL, nil)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			reqs := srv.Requests()
			if resp.StatusCode != 503 || len(reqs) != 1 || reqs[0].key != "" || len(fc.Sleeps()) != 0 {
				t.Fatalf("got %d, requests %+v: want the 503 untouched, one request, no key", resp.StatusCode, reqs)
			}
		})
	}
	t.Run("WithMethods", func(t *testing.T) {
		srv := newScriptServer(t, status(503), created)
		tr, _ := newTestTransport(t, srv.Client().Transport, WithMethods("put"))
		req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if reqs := srv.Requests(); resp.StatusCode != 201 || len(reqs) != 2 || reqs[0].key == "" {
			t.Fatalf("PUT with WithMethods(put): %d, %+v", resp.StatusCode, reqs)
		}
	})
}

func TestAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newScriptServer(t, func(w http.ResponseWriter, r *http.Request) {
		select { // hang until the client gives up on this attempt
		case <-r.Context().Done():
		case <-release:
		}
	}, created)
	tr, _ := newTestTransport(t, srv.Client().Transport, WithAttemptTimeout(100*time.Millisecond))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The attempt timeout bounds waiting for headers, not reading the final body.
	time.Sleep(200 * time.Millisecond)
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != `{"id":"pay_1"}` {
		t.Fatalf("body %q, %v: the final body must stay readable after the attempt timeout", body, err)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[0].key != reqs[1].key {
		t.Fatalf("requests %+v, want 2 with one key", reqs)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{WithMaxAttempts(0), "WithMaxAttempts(0)"},
		{WithBackoff(time.Second, time.Millisecond), "WithBackoff"},
		{WithBackoff(0, time.Second), "WithBackoff"},
		{WithMaxElapsed(-1), "WithMaxElapsed"},
		{WithRetention(0), "WithRetention"},
		{WithRetentionMargin(25 * time.Hour), "margin"},
		{WithMaxBodyBytes(-1), "WithMaxBodyBytes"},
		{WithHeader("Bad Header"), "WithHeader"},
		{WithKeyFunc(nil), "WithKeyFunc"},
		{WithAttemptTimeout(-time.Second), "WithAttemptTimeout"},
	} {
		tr := New(nil, c.opt)
		if err := tr.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want an error naming %q", err, c.want)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RoundTrip = %v, want the option error", err)
		}
	}
	if err := New(nil).Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestUntrustedCertificateNotRetried(t *testing.T) {
	var hits int
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is expected
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	// http.DefaultTransport does not trust the test server's certificate.
	tr, fc := newTestTransport(t, http.DefaultTransport.(*http.Transport).Clone())
	req, _ := http.NewRequest(http.MethodPost, tlsSrv.URL, nil)
	_, err := tr.RoundTrip(req)
	var ex *ExhaustedError
	if err == nil || errors.As(err, &ex) || len(fc.Sleeps()) != 0 || hits != 0 {
		t.Fatalf("err %v, sleeps %v: want the certificate error at once", err, fc.Sleeps())
	}
}

func TestOneLineSetup(t *testing.T) {
	srv := newScriptServer(t, status(503), created)
	hc := &http.Client{Transport: New(nil, WithBackoff(time.Millisecond, time.Millisecond))}
	resp, body, err := post(t, hc, context.Background(), srv.URL, []byte(`{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || string(body) != `{"id":"pay_1"}` || len(srv.Requests()) != 2 {
		t.Fatalf("got %d %q after %d requests", resp.StatusCode, body, len(srv.Requests()))
	}
}

func TestRedirectKeepsSuppliedKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(DefaultHeader))
		mu.Unlock()
		http.Redirect(w, r, "/new", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(DefaultHeader))
		mu.Unlock()
		created(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tr, _ := newTestTransport(t, srv.Client().Transport)
	const key = "redirected-key-0001"
	resp, _, err := post(t, &http.Client{Transport: tr}, WithKey(context.Background(), key), srv.URL+"/old", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || len(keys) != 2 || keys[0] != key || keys[1] != key {
		t.Fatalf("got %d, keys %q: want the supplied key on both hops", resp.StatusCode, keys)
	}
}

// TestQueryKey: with WithQueryKey the key travels in the URL's query (AIP-155's request_id, an
// idemgen operation marked with key.query), the same on every attempt, with no key header; the
// request's own value is kept where the caller wrote it, and two values are refused unsent.
func TestQueryKey(t *testing.T) {
	const key = "order-42-3f9c1a7e"
	// serve answers 503 then 201, and records the query and the key headers of each attempt.
	serve := func(t *testing.T) (srv *scriptServer, queries *[]string, headers *int) {
		queries, headers = new([]string), new(int)
		record := func(next http.HandlerFunc) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				*queries = append(*queries, r.URL.RawQuery)
				*headers += len(r.Header.Values(DefaultHeader))
				next(w, r)
			}
		}
		return newScriptServer(t, record(status(503)), record(created)), queries, headers
	}
	for _, c := range []struct {
		name, url string
		ctx       context.Context
		want      func(string) string // the query the server sees, given the key
	}{
		{"context key appended", "/hubs?view=full&b=%2F", WithKey(context.Background(), key), func(k string) string { return "view=full&b=%2F&request_id=" + k }},
		{"generated key", "/hubs", context.Background(), func(k string) string { return "request_id=" + k }},
		{"the URL's own key", "/hubs?request_id=" + key + "&view=full", context.Background(), func(string) string { return "request_id=" + key + "&view=full" }},
		{"the URL's key and the same context key", "/hubs?request_id=" + key, WithKey(context.Background(), key), func(string) string { return "request_id=" + key }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, queries, headers := serve(t)
			tr, _ := newTestTransport(t, srv.Client().Transport, WithQueryKey("request_id"))
			req, _ := http.NewRequestWithContext(c.ctx, http.MethodPost, srv.URL+c.url, strings.NewReader(`{}`))
			before := req.URL.String()
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			k, q := tr.KeyOf(resp), *queries
			if ValidKey(k) != nil || len(q) != 2 || q[0] != c.want(k) || q[1] != q[0] || *headers != 0 {
				t.Fatalf("key %q: the server saw queries %q and %d key headers; want %q twice and none", k, q, *headers, c.want(k))
			}
			if req.URL.String() != before {
				t.Fatalf("caller's request modified: %s", req.URL)
			}
		})
	}
	for _, c := range []struct {
		name, url string
		ctx       context.Context
		want      string
	}{
		{"two values", "/hubs?request_id=a-1&request_id=a-2", context.Background(), "2 request_id query parameters"},
		{"URL and context differ", "/hubs?request_id=a-1", WithKey(context.Background(), key), "request_id query parameter and context key (WithKey) differ"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, _, _ := serve(t)
			tr, _ := newTestTransport(t, srv.Client().Transport, WithQueryKey("request_id"))
			req, _ := http.NewRequestWithContext(c.ctx, http.MethodPost, srv.URL+c.url, strings.NewReader(`{}`))
			if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one mentioning %q", err, c.want)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Fatalf("%d requests sent", n)
			}
		})
	}
	// The last of WithHeader and WithQueryKey wins; an empty name is an invalid option.
	if tr := New(nil, WithQueryKey("request_id"), WithHeader("X-Key")); tr.cfg.query != "" || tr.cfg.header != "X-Key" {
		t.Errorf("WithHeader after WithQueryKey: query %q, header %q", tr.cfg.query, tr.cfg.header)
	}
	if err := New(nil, WithQueryKey("")).Validate(); err == nil || !strings.Contains(err.Error(), "WithQueryKey") {
		t.Errorf("WithQueryKey(\"\"): %v", err)
	}
}
