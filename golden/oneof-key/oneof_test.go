package oneofkey

// Hand-written tests of the code generated for testdata/specs/oneof-key.yaml: the key of a
// oneOf body, whose every member declares idempotency_key, is read from whichever shape
// arrived; a body without it reports no key (the runtime answers key-missing).

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

func TestKeyOfAOneOfBody(t *testing.T) {
	op := operationCreateTransaction()
	for body, want := range map[string]string{
		`{"idempotency_key":"transfer-0001","amount":5}`:  "transfer-0001",
		`{"lines":[1,2],"idempotency_key":"entry-00001"}`: "entry-00001",
		`{"amount":5}`: "",
	} {
		_, k, ok, err := fptest.BodyKey(op, decodeCreateTransaction, httptest.NewRequest("POST", "/v1/transactions", nil), "application/json", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if k != want || ok != (want != "") {
			t.Errorf("%s: key %q (%v), want %q", body, k, ok, want)
		}
	}
}
