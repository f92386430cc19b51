package twilio

// Hand-written test of the generated Register and of the paths ServeMux patterns cannot
// express ({Sid}.json): it mounts the generated wrappers on a real http.ServeMux with a real
// runtime and PostgreSQL (scripts/with-postgres.sh) and routes requests through them.

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/jackc/pgx/v5/pgxpool"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func newServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	echo := func(v any) (runtime.Response, error) {
		calls.Add(1)
		b, _ := json.Marshal(v)
		return runtime.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}, nil
	}
	mux := http.NewServeMux()
	err = Register(mux, rt, Handlers{
		UpdateCall: func(ctx context.Context, tx pgstore.DBTX, p UpdateCallParams, body UpdateCallBody) (runtime.Response, error) {
			return echo(map[string]any{"account": p.AccountSid, "sid": p.Sid, "status": body.Status})
		},
		UpdateRecording: func(ctx context.Context, tx pgstore.DBTX, p UpdateRecordingParams) (runtime.Response, error) {
			return echo(map[string]any{"account": p.AccountSid, "sid": p.Sid, "format": p.Format})
		},
		// CreateCall left nil: not mounted.
	})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &calls
}

func post(t *testing.T, srv *httptest.Server, path, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if key != "" {
		req.Header.Set("I-Twilio-Idempotency-Token", key)
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(resp))
	return resp, b.String()
}

func readAll(resp *http.Response) string {
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

func TestRegisterRoutesLiteralSuffixSegments(t *testing.T) {
	srv, calls := newServer(t)
	const acc = "/2010-04-01/Accounts/AC0123456789abcdef0123456789abcdef"

	resp, body := post(t, srv, acc+"/Calls/CA42.json", "key-0001-call-aaaaaaaa", "Status=canceled")
	if resp.StatusCode != 200 || !strings.Contains(body, `"sid":"CA42"`) || !strings.Contains(body, `"status":"canceled"`) {
		t.Fatalf("update call: %d %s", resp.StatusCode, body)
	}
	resp, body2 := post(t, srv, acc+"/Calls/CA42.json", "key-0001-call-aaaaaaaa", "Status=canceled")
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" || body2 != body {
		t.Fatalf("retry: %d replayed=%q %s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body2)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}

	// The literal part of the segment is checked by the wrapper: anything else is 404 and
	// never reaches the handler or the store.
	for _, p := range []string{acc + "/Calls/CA42.xml", acc + "/Calls/.json", acc + "/Calls/CA42"} {
		if resp, _ := post(t, srv, p, "key-0002-call-bbbbbbbb", "Status=canceled"); resp.StatusCode != 404 {
			t.Errorf("%s: status %d, want 404", p, resp.StatusCode)
		}
	}

	// Two parameters in one segment ({Sid}.{Format}), the second an enum.
	resp, body = post(t, srv, acc+"/Recordings/RE7.mp3", "key-0003-rec-cccccccc", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"sid":"RE7"`) || !strings.Contains(body, `"format":"mp3"`) {
		t.Fatalf("recording: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, srv, acc+"/Recordings/RE7.wav", "key-0004-rec-dddddddd", ""); resp.StatusCode != 400 {
		t.Errorf("enum path parameter: %d %s, want 400", resp.StatusCode, body)
	}
	if resp, _ := post(t, srv, acc+"/Recordings/RE7", "key-0005-rec-eeeeeeee", ""); resp.StatusCode != 404 {
		t.Errorf("segment without its literal: %d, want 404", resp.StatusCode)
	}

	// CreateCall was nil in Handlers: not mounted.
	if resp, _ := post(t, srv, acc+"/Calls.json", "key-0006-call-ffffffff", "To=a&From=b"); resp.StatusCode != 404 && resp.StatusCode != 405 {
		t.Errorf("unmounted operation: %d, want 404 or 405", resp.StatusCode)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestRegisterReportsConflictsAsErrors(t *testing.T) {
	mux := http.NewServeMux()
	// Register only mounts: the pool connects lazily and never here.
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	h := Handlers{UpdateCall: func(context.Context, pgstore.DBTX, UpdateCallParams, UpdateCallBody) (runtime.Response, error) {
		return runtime.Response{}, nil
	}}
	if err := Register(mux, rt, h); err != nil {
		t.Fatal(err)
	}
	err = Register(mux, rt, h) // the same patterns again: ServeMux would panic
	if err == nil || !strings.Contains(err.Error(), "/Calls/{seg4}") {
		t.Fatalf("second Register: err = %v, want a conflict naming the pattern", err)
	}
	if err := Register(nil, rt, h); err == nil {
		t.Error("nil mux accepted")
	}
}
