package runtime

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// Every stored answer and every replay says until when a retry gets it back
// (Idempotency-Key-Expires: an HTTP date at the end of the retention); answers that store
// nothing (problems, an unguarded request, a status that is not final) say nothing, since no
// retry can get them back.
func TestKeyExpiresHeader(t *testing.T) {
	for _, mode := range []Mode{ModeAtomic, ModeLease} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newMemEnv(t, nil)
			op := payOp()
			h := e.atomicHandler(op)
			if mode == ModeLease {
				op = leaseOp()
				h = e.leaseHandler(op)
			}
			before := time.Now().Truncate(time.Second)
			first := serveReq(h, req("t1", key1, body100))
			if first.Code != http.StatusCreated {
				t.Fatalf("first: %d %s", first.Code, first.Body)
			}
			at := expiresAt(t, first)
			if want := before.Add(op.Retention); at.Before(want) || at.After(time.Now().Add(op.Retention)) {
				t.Errorf("first answer expires %v, want the retention (%v) from its completion, about %v", at, op.Retention, want)
			}

			e.clock.advance(10 * time.Minute) // the store's clock: the replay's retention left shrinks
			replay := serveReq(h, req("t1", key1, body100))
			if replay.Header().Get(HeaderReplayed) != "true" {
				t.Fatalf("second: %d %v, want a replay", replay.Code, replay.Header())
			}
			// The store counts the retention left on its own clock, 10 minutes on: the date moves
			// 10 minutes earlier on this machine's clock, within a second of rounding each way.
			if got, want := expiresAt(t, replay), at.Add(-10*time.Minute); got.Sub(want).Abs() > 2*time.Second {
				t.Errorf("replay expires %v, want about %v (the stored answer's end by the store's clock)", got, want)
			}

			for name, w := range map[string]*http.Response{
				"mismatch":  serveReq(h, req("t1", key1, `{"amount":7}`)).Result(),
				"no key":    serveReq(h, req("t1", "", body100)).Result(),
				"not final": serveReq(h, req("t1", "k-test-0002-503-aaaaaa", body100, "X-Fail", "503")).Result(),
			} {
				if v := w.Header.Get(HeaderKeyExpires); v != "" {
					t.Errorf("%s (%d) carries %s: %q; only stored answers and replays do", name, w.StatusCode, HeaderKeyExpires, v)
				}
			}
		})
	}
}

// A handler cannot set or store the header itself: the runtime's value wins, and the stored
// copy leaves it out (its replay gets the value of the moment).
func TestKeyExpiresIsTheRuntimes(t *testing.T) {
	e := newMemEnv(t, nil)
	h := AtomicHandler(e.rt, payOp(), BindAtomic(decodePay, func(context.Context, *memstore.DB, *payReq) (Response, error) {
		return Response{Status: http.StatusCreated, Header: http.Header{HeaderKeyExpires: {"Thu, 01 Jan 1970 00:00:00 GMT"}}}, nil
	}))
	first := serveReq(h, req("t1", key1, body100))
	if at := expiresAt(t, first); at.Year() == 1970 {
		t.Errorf("the handler's %s reached the client: %v", HeaderKeyExpires, at)
	}
	rec, _ := e.record("t1", key1)
	if len(rec.Response.Header) != 0 {
		t.Errorf("stored headers %s, want none (the expiry is the runtime's, computed per answer)", rec.Response.Header)
	}
}

// expiresAt parses the answer's Idempotency-Key-Expires (an IMF-fixdate), failing when absent.
func expiresAt(t *testing.T, w interface{ Header() http.Header }) time.Time {
	t.Helper()
	v := w.Header().Get(HeaderKeyExpires)
	at, err := http.ParseTime(v)
	if err != nil {
		t.Fatalf("%s = %q: %v", HeaderKeyExpires, v, err)
	}
	if at.Format(http.TimeFormat) != v {
		t.Errorf("%s = %q is not an IMF-fixdate (RFC 9110 section 5.6.7)", HeaderKeyExpires, v)
	}
	return at
}
