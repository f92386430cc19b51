package runtime

import (
	"net/http"
	"testing"
	"time"
)

// OASIS Repeatable Requests 1.0: the first attempt's time is required with a request id; a
// first attempt older than the retention is 412 before any lookup; Repeatability-Result says
// whether the request was taken as repeatable.
func TestRepeatabilityFirstSent(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Key = KeyRule{Header: "Repeatability-Request-ID", Required: true, MinLength: 1, FirstSent: "Repeatability-First-Sent"}
	h := e.atomicHandler(op)
	now := time.Now().UTC().Format(http.TimeFormat)
	old := time.Now().Add(-2 * op.Retention).UTC().Format(http.TimeFormat)
	send := func(key, firstSent string) (int, string, string) {
		r := req("t1", "", body100)
		r.Header.Set("Repeatability-Request-ID", key)
		if firstSent != "" {
			r.Header.Set("Repeatability-First-Sent", firstSent)
		}
		w := serveReq(h, r)
		name := ""
		if w.Code >= 400 {
			name = problemType(t, w)
		}
		return w.Code, name, w.Header().Get("Repeatability-Result")
	}
	if code, _, result := send("req-1", now); code != 201 || result != "accepted" {
		t.Errorf("new: %d %q", code, result)
	}
	if code, _, result := send("req-1", now); code != 201 || result != "accepted" {
		t.Errorf("repeat: %d %q", code, result)
	}
	if code, name, result := send("req-2", old); code != 412 || name != ProblemKeyExpired || result != "rejected" {
		t.Errorf("first sent before the retention: %d %s %q", code, name, result)
	}
	if code, name, result := send("req-3", ""); code != 400 || name != ProblemKeyInvalid || result != "rejected" {
		t.Errorf("no first-sent time: %d %s %q", code, name, result)
	}
	if code, name, _ := send("req-4", "yesterday"); code != 400 || name != ProblemKeyInvalid {
		t.Errorf("malformed first-sent time: %d %s", code, name)
	}
	if e.payments("t1") != 1 {
		t.Errorf("payments %d, want 1", e.payments("t1"))
	}
}
