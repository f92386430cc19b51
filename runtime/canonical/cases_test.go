package canonical_test

import (
	"errors"
	"mime"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// caseFile is the part of a shared/cases file (testdata/cases/README.md) this layer can check.
type caseFile struct {
	Steps []struct {
		Request struct {
			Method  string
			Path    string
			Headers map[string]string
			Body    string
		}
		Expect struct {
			Status  int
			SameAs  *int `yaml:"same_as"`
			Headers map[string]string
			Problem string
		}
	}
}

// TestCases replays the request sequences of the cases about request identity at the
// fingerprint layer, with the generated-shape code of shape_test.go: a body the decoder refuses
// must be expected as 400 body-invalid; otherwise, for each idempotency key, the first
// fingerprint is recorded, and a later request must be expected as a replay when its
// fingerprint is equal and as a 422 payload-mismatch when it differs.
func TestCases(t *testing.T) {
	for _, name := range []string{
		"003-key-order-and-whitespace-replay.yaml",
		"004-nested-order-replays-array-order-mismatches.yaml",
		"013-excluded-field-ignored.yaml",
		"014-number-spellings.yaml",
		"015-string-escapes.yaml",
		"016-duplicate-member-names.yaml",
		"018-form-body.yaml",
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "cases", name))
			if err != nil {
				t.Fatal(err)
			}
			var c caseFile
			if err := yaml.Unmarshal(raw, &c); err != nil {
				t.Fatalf("parse %s: %v", name, err)
			}
			recorded := map[string]canonical.Fingerprint{}
			for i, s := range c.Steps {
				mt, _, _ := mime.ParseMediaType(s.Request.Headers["Content-Type"])
				fp, err := fingerprintRequest(s.Request.Path, mt, []byte(s.Request.Body))
				key := s.Request.Headers["Idempotency-Key"]
				replay := s.Expect.SameAs != nil || s.Expect.Headers["Idempotent-Replayed"] == "true"
				var ce *canonical.Error
				switch {
				case err != nil:
					if !errors.As(err, &ce) || s.Expect.Problem != "body-invalid" {
						t.Errorf("step %d: refused with %v, expected %+v", i, err, s.Expect)
					}
					continue
				case s.Expect.Problem == "body-invalid":
					t.Errorf("step %d: accepted, expected body-invalid", i)
					continue
				}
				first, ok := recorded[key]
				switch {
				case !ok:
					if replay || s.Expect.Problem != "" {
						t.Errorf("step %d: first request for its key, expected %+v", i, s.Expect)
					}
					recorded[key] = fp
				case first == fp:
					if !replay {
						t.Errorf("step %d: fingerprint equals the recorded one (replay), expected %+v", i, s.Expect)
					}
				default:
					if s.Expect.Problem != "payload-mismatch" {
						t.Errorf("step %d: fingerprint differs (mismatch), expected %+v", i, s.Expect)
					}
				}
			}
		})
	}
}

func fingerprintRequest(path, mediaType string, body []byte) (canonical.Fingerprint, error) {
	switch path {
	case "/v1/payments":
		v, err := decodeCreatePaymentJSON(body)
		if err != nil {
			return canonical.Fingerprint{}, err
		}
		return fingerprintCreatePayment(mediaType, &v), nil
	case "/v1/orders":
		v, err := decodeCreateOrderJSON(body)
		if err != nil {
			return canonical.Fingerprint{}, err
		}
		return fingerprintCreateOrder(mediaType, &v), nil
	case "/v1/charges":
		if _, err := decodeCreateChargeForm(body); err != nil {
			return canonical.Fingerprint{}, err
		}
		return fingerprintCreateCharge(mediaType, body)
	}
	panic("no operation for " + path)
}

// Typed fingerprints agree with the generic canonicalizer (excluded pointers applied) for
// bodies without integers beyond 2^53, and differ where exactness matters.
func TestTypedMatchesGeneric(t *testing.T) {
	ex, err := canonical.NewExclusion("/client_timestamp")
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{
		`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
		`{"to":"x","currency":"EUR","amount":1,"zeta":[1,{"b":2,"a":1}],"Amount":5,"\ud83d\ude00":1,"a":null,"client_timestamp":"t"}`,
		`{"amount":10e2,"currency":"\u20acUR","to":"caf\u00e9","description":"","metadata":{}}`,
	}
	for _, body := range bodies {
		v, err := decodeCreatePaymentJSON([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		typed := appendCanonicalPaymentRequest(nil, &v)
		generic, err := canonical.AppendCanonicalExcluding(nil, []byte(body), ex)
		if err != nil {
			t.Fatal(err)
		}
		if string(typed) != string(generic) {
			t.Errorf("%s:\n typed   %s\n generic %s", body, typed, generic)
		}
	}
}

func TestFingerprintDistinguishes(t *testing.T) {
	fp := func(body string) canonical.Fingerprint {
		t.Helper()
		f, err := fingerprintRequest("/v1/payments", "application/json", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return f
	}
	base := `{"amount":9007199254740992,"currency":"EUR","to":"a"}`
	different := []string{
		`{"amount":9007199254740993,"currency":"EUR","to":"a"}`,       // exact integers
		`{"amount":9007199254740992,"currency":"EUR","to":"a","x":1}`, // undeclared member counts
		`{"amount":9007199254740992,"currency":"EUR","to":"a","description":""}`,
		`{"amount":9007199254740992,"currency":"EUR","to":"a","metadata":{}}`,
		`{"amount":9007199254740992,"currency":"EUr","to":"a"}`,
	}
	for _, d := range different {
		if fp(d) == fp(base) {
			t.Errorf("%s has the fingerprint of %s", d, base)
		}
	}
	if fp(base) != fp(`{"to":"a","amount":9007199254740992.0,"currency":"\u0045UR","client_timestamp":"now"}`) {
		t.Error("equivalent body has another fingerprint")
	}
	v, _ := decodeCreatePaymentJSON([]byte(base))
	if fingerprintCreatePayment("application/json", &v) == fingerprintCreatePayment("application/merge-patch+json", &v) {
		t.Error("media type not framed")
	}
	var f canonical.Framer
	f.Begin("createRefund", "POST", "/v1/payments")
	f.MediaType("application/json")
	f.BodyEnd(appendCanonicalPaymentRequest(f.BodyStart(), &v))
	if f.Sum() == fingerprintCreatePayment("application/json", &v) {
		t.Error("operationId not framed")
	}
	// Order bodies: the excluded map key is ignored, other keys count.
	o := func(body string) canonical.Fingerprint {
		t.Helper()
		f, err := fingerprintRequest("/v1/orders", "application/json", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return f
	}
	a := o(`{"payer":{"name":"J"},"lines":[],"metadata":{"trace_id":"1","k":"v"}}`)
	if a != o(`{"payer":{"name":"J"},"lines":[],"metadata":{"k":"v","trace_id":"2"}}`) {
		t.Error("excluded /metadata/trace_id changed the fingerprint")
	}
	if a == o(`{"payer":{"name":"J"},"lines":[],"metadata":{"k":"w","trace_id":"1"}}`) {
		t.Error("metadata value ignored")
	}
}

// The fingerprint of a fixed-shape body costs at most 2 allocations (issue 3, item 7).
func TestFingerprintAllocs(t *testing.T) {
	v, err := decodeCreatePaymentJSON([]byte(`{"amount":1000,"currency":"EUR","to":"acc_9","description":"x","metadata":{"b":"2","a":"1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	fingerprintCreatePayment("application/json", &v) // warm the pool
	if n := testing.AllocsPerRun(200, func() { fingerprintCreatePayment("application/json", &v) }); n > 2 {
		t.Errorf("%v allocations per fingerprint", n)
	}
}
