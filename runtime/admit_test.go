package runtime

import "testing"

// Two Content-Type lines are refused: the decoder, the fingerprint and a wrapped handler could
// each read a different one.
func TestTwoContentTypes(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.atomicHandler(payOp())
	r := req("t1", key1, body100)
	r.Header.Add("Content-Type", "text/plain")
	if w := serveReq(h, r); w.Code != 400 || problemType(t, w) != ProblemBodyInvalid {
		t.Errorf("two Content-Type lines: %d %s", w.Code, w.Body)
	}
	if e.payments("t1") != 0 {
		t.Error("the handler ran")
	}
}
