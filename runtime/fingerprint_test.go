package runtime

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFingerprintIsTheServedOne: Fingerprint, the entry point support tools and tests use, frames
// a request as the handler that served it did (the record holds the same fingerprint), path
// values included: the same request to another shop is another fingerprint.
func TestFingerprintIsTheServedOne(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Path = "/v1/shops/{shop}/payments"
	request := func(shop string) *httptest.ResponseRecorder {
		r := req("t1", key1+shop, body100)
		r.URL.Path = "/v1/shops/" + shop + "/payments"
		return serveReq(e.atomicHandler(op), r)
	}
	fingerprint := func(shop string) string {
		r := req("t1", key1+shop, body100)
		r.URL.Path = "/v1/shops/" + shop + "/payments"
		_, fp, err := Fingerprint(op, decodePay, r)
		if err != nil {
			t.Fatal(err)
		}
		return fp.String()
	}
	for _, shop := range []string{"s1", "s2"} {
		if w := request(shop); w.Code != 201 {
			t.Fatalf("%s: %d %s", shop, w.Code, w.Body)
		}
		rec, found := e.record("t1", key1+shop)
		if !found {
			t.Fatalf("%s: no record", shop)
		}
		if got := fingerprint(shop); got != rec.Fingerprint.String() {
			t.Errorf("%s: Fingerprint %s, the served request's %s", shop, got, rec.Fingerprint)
		}
	}
	if fingerprint("s1") == fingerprint("s2") {
		t.Error("the path value is not part of the fingerprint")
	}
	// A refused request is the decoder's error, located.
	_, _, err := Fingerprint(op, decodePay, req("t1", key1, `{"amount":-1}`))
	if err == nil || !strings.Contains(err.Error(), "amount") {
		t.Errorf("refused body: %v", err)
	}
}
