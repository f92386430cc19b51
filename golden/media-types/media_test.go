package mediatypes

// Hand-written tests of a body in typed and raw media types: what the handler is told (which
// media type arrived, the decoded value or the exact bytes), the fingerprints (canonical for
// JSON, byte for byte for JOSE and JWT), and the whole path through the generated handlers and
// through runtime.Middleware on PostgreSQL (scripts/with-postgres.sh).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

const (
	jsonMT = "application/json"
	jweMT  = "application/jose+jwe"
	jwtMT  = "application/jwt"
	// A compact JWE and a compact JWT, as a client sends them (the bytes are what count).
	jwe  = "eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMjU2R0NNIn0.OKOawDo13gRp2ojaHV7LFpZcgV7T6DVZKTyKOMTYUmKoTCVJRgckCL9kiMT03JGeipsEdY3mx_etLbbWSrFr05kLzcSr4qKAq7YN7e9jwQRb23nfa6c9d-StnImGyFDbSv04uVuxIp5Zms1gNxKKK2Da14B8S4rzVRltdYwam_lDp5XnZAYpQdb76FdIKLaVmqgfwX7XWRxv2322i-vDxRfqNzo_tETKzpVLzfiwQyeyPGLBIO56YJ7eObdv0je81860ppamavo35UgoRdbYaBcoh9QcfylQr66oc6vFWXRcZ_ZT2LawVCWTIy3brGPi6UklfCpIMfIjf7iGdXKHzg.48V1_ALb6US04U3b.5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4vpzs9tX_EFShS8iB7j6jiSdiwkIr3ajwQzaBtQD_A.XFBoMYUZodetZdvTiFvSkQ"
	jwe2 = "eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMjU2R0NNIn0.b3RoZXIta2V5.48V1_ALb6US04U3b.5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4.XFBoMYUZodetZdvTiFvSkQ"
	jwt  = "eyJhbGciOiJQUzI1NiJ9.eyJhbW91bnQiOjUwMH0.c2lnbmF0dXJl"
)

func req(op, target, mt, body string, header ...string) fptest.Request {
	return fptest.Request{Op: op, Target: target, MediaType: mt, Body: body, Header: header}
}

var corpus = []fptest.Request{
	// 0-5 createConsent: JSON canonically, the JWE by its bytes.
	req("createConsent", "/consents", jsonMT, `{"amount":"10.50","currency":"GBP"}`),
	req("createConsent", "/consents", jsonMT, `{ "currency": "GBP", "amount": "10.50" }`), // the same JSON, spelt otherwise: one request
	req("createConsent", "/consents", jweMT, jwe),
	req("createConsent", "/consents", jweMT, jwe),  // the same bytes: one request
	req("createConsent", "/consents", jweMT, jwe2), // other bytes: another request
	req("createConsent", "/consents", jsonMT, `{"amount":"10.5x","currency":"GBP"}`),
	// 6-9 createPayment: an exclusion applies to JSON only; two raw media types.
	req("createPayment", "/payments", jsonMT, `{"amount":500,"reference":"a"}`),
	req("createPayment", "/payments", jsonMT, `{"amount":500,"reference":"b"}`), // /reference excluded: one request
	req("createPayment", "/payments", jwtMT, jwt),
	req("createPayment", "/payments", jweMT, jwt), // the same bytes in another media type: another request
	// 10-12 updateMandate: an optional body.
	{Op: "updateMandate", Method: "PATCH", Target: "/mandates/m1", Path: map[string]string{"id": "m1"}},
	{Op: "updateMandate", Method: "PATCH", Target: "/mandates/m1", Path: map[string]string{"id": "m1"}, MediaType: jsonMT, Body: `{"limit":3}`},
	{Op: "updateMandate", Method: "PATCH", Target: "/mandates/m1", Path: map[string]string{"id": "m1"}, MediaType: jwtMT, Body: jwt},
	// 13-15 createBatch (a JSON array) and createTransfer (a form), each beside application/jwt.
	req("createBatch", "/batches", jsonMT, `["a","b"]`),
	req("createBatch", "/batches", jwtMT, jwt),
	req("createTransfer", "/transfers", "application/x-www-form-urlencoded", "note=rent&amount=12"),
}

func TestMediaTypesFingerprints(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"createConsent":  fptest.Run(operationCreateConsent(), decodeCreateConsent),
		"createPayment":  fptest.Run(operationCreatePayment(), decodeCreatePayment),
		"updateMandate":  fptest.Run(operationUpdateMandate(), decodeUpdateMandate),
		"createBatch":    fptest.Run(operationCreateBatch(), decodeCreateBatch),
		"createTransfer": fptest.Run(operationCreateTransfer(), decodeCreateTransfer),
	}))
	for _, p := range [][2]int{{0, 1}, {2, 3}, {6, 7}} {
		if want[p[0]] != want[p[1]] {
			t.Errorf("requests %d and %d: one request, two fingerprints", p[0], p[1])
		}
	}
	for _, p := range [][2]int{{0, 2}, {2, 4}, {8, 9}, {10, 11}, {11, 12}, {13, 14}} {
		if want[p[0]] == want[p[1]] {
			t.Errorf("requests %d and %d: two requests, one fingerprint", p[0], p[1])
		}
	}
}

// TestMediaTypesDecoded: the handler is told which media type arrived and gets the decoded value
// or the bytes as sent, never both.
func TestMediaTypesDecoded(t *testing.T) {
	decode := func(c fptest.Request) CreateConsentBody {
		t.Helper()
		v, _, err := fptest.Decode(operationCreateConsent(), decodeCreateConsent, c.HTTP(), c.MediaType, []byte(c.Body))
		if err != nil {
			t.Fatalf("%s: %v", c.MediaType, err)
		}
		return v.Body
	}
	if b := decode(corpus[0]); b.MediaType != jsonMT || b.JSON == nil || b.JSON.Amount != "10.50" || b.JSON.Currency != "GBP" || b.Raw != nil {
		t.Errorf("JSON: %+v", b)
	}
	if b := decode(corpus[2]); b.MediaType != jweMT || b.JSON != nil || string(b.Raw) != jwe {
		t.Errorf("JWE: %+v", b)
	}
	m, _, err := fptest.Decode(operationUpdateMandate(), decodeUpdateMandate, corpus[10].HTTP(), "", nil)
	if err != nil || m.Body.MediaType != "" || m.Body.JSON != nil || m.Body.Raw != nil {
		t.Errorf("absent optional body: %+v, %v", m.Body, err)
	}
	b, _, err := fptest.Decode(operationCreateBatch(), decodeCreateBatch, corpus[13].HTTP(), jsonMT, []byte(corpus[13].Body))
	if err != nil || b.Body.MediaType != jsonMT || len(b.Body.JSON) != 2 || b.Body.Raw != nil {
		t.Errorf("JSON array: %+v, %v", b.Body, err)
	}
	tr, _, err := fptest.Decode(operationCreateTransfer(), decodeCreateTransfer, corpus[15].HTTP(), "application/x-www-form-urlencoded", []byte(corpus[15].Body))
	if err != nil || tr.Body.Form == nil || tr.Body.Form.Amount != 12 || *tr.Body.Form.Note != "rent" {
		t.Errorf("form: %+v, %v", tr.Body, err)
	}
}

// server is the generated handlers, or runtime.Middleware in front of a handler of the
// application's own, on a real runtime over PostgreSQL. seen records what each run was given.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func (s *server) record(v string) {
	s.mu.Lock()
	s.seen = append(s.seen, v)
	s.mu.Unlock()
}

func (s *server) runs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func newRuntime(t *testing.T) *runtime.Runtime {
	t.Helper()
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func created(v string) (runtime.Response, error) {
	return runtime.Response{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(v)}, nil
}

// handlersServer mounts the generated handlers with Register.
func handlersServer(t *testing.T) *server {
	s := &server{}
	mux := http.NewServeMux()
	err := Register(mux, newRuntime(t), Handlers{
		CreateConsent: func(ctx context.Context, tx pgstore.DBTX, p CreateConsentParams, body CreateConsentBody) (runtime.Response, error) {
			var got string
			switch body.MediaType {
			case jsonMT:
				got = "json " + body.JSON.Amount + " " + body.JSON.Currency
			case jweMT:
				got = "jwe " + string(body.Raw)
			}
			s.record(got)
			return created(got)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// middlewareServer puts runtime.Middleware with the generated Routes in front of a handler that
// reads the body itself.
func middlewareServer(t *testing.T) *server {
	s := &server{}
	mw, err := runtime.Middleware[pgstore.DBTX](newRuntime(t), Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var got string
		switch ct := r.Header.Get("Content-Type"); {
		case strings.HasPrefix(ct, jsonMT):
			var c struct{ Amount, Currency string }
			if err := json.Unmarshal(b, &c); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			got = "json " + c.Amount + " " + c.Currency
		case ct == jweMT:
			got = "jwe " + string(b)
		}
		s.record(got)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		w.Write([]byte(got))
	})
	mux := http.NewServeMux()
	mux.Handle("POST /consents", mw(app))
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestMediaTypesServed: both ways of serving the operation take JSON and the JWE under their
// own keys, replay each, and tell a key reused with the other media type (another request) by a
// 422; a media type the operation does not declare is 415, before any key lookup.
func TestMediaTypesServed(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *server{"handlers": handlersServer, "middleware": middlewareServer} {
		t.Run(name, func(t *testing.T) {
			s := start(t)
			send := func(key, mt, body string) (int, string, string) {
				t.Helper()
				r, _ := http.NewRequest("POST", s.URL+"/consents", strings.NewReader(body))
				r.Header.Set("Content-Type", mt)
				r.Header.Set("x-idempotency-key", key)
				resp, err := s.Client().Do(r)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header.Get(runtime.HeaderReplayed), string(b)
			}
			const consent = `{"amount":"10.50","currency":"GBP"}`
			if code, _, body := send("key-json", jsonMT+"; charset=utf-8", consent); code != 201 || body != "json 10.50 GBP" {
				t.Fatalf("JSON: %d %q", code, body)
			}
			if code, replayed, body := send("key-json", jsonMT, `{"currency":"GBP","amount":"10.50"}`); code != 201 || replayed != "true" || body != "json 10.50 GBP" {
				t.Errorf("JSON retry, spelt otherwise: %d replayed=%q %q", code, replayed, body)
			}
			if code, _, body := send("key-jwe", jweMT, jwe); code != 201 || body != "jwe "+jwe {
				t.Fatalf("JWE: %d %q", code, body)
			}
			if code, replayed, body := send("key-jwe", jweMT, jwe); code != 201 || replayed != "true" || body != "jwe "+jwe {
				t.Errorf("JWE retry: %d replayed=%q %q", code, replayed, body)
			}
			if code, _, body := send("key-jwe", jweMT, jwe2); code != 422 {
				t.Errorf("the JWE key with other bytes: %d %q, want 422", code, body)
			}
			if code, _, body := send("key-json", jweMT, jwe); code != 422 {
				t.Errorf("the JSON key with a JWE: %d %q, want 422", code, body)
			}
			if code, _, body := send("key-text", "text/plain", jwe); code != 415 {
				t.Errorf("text/plain: %d %q, want 415", code, body)
			}
			if got, want := s.runs(), []string{"json 10.50 GBP", "jwe " + jwe}; !slices.Equal(got, want) {
				t.Errorf("runs %q, want %q", got, want)
			}
		})
	}
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:031e62ef5c7d8c84d8f7b72d43a2d220047183075be947c7945467882da5c672",                                                // 0 createConsent
	"v2:031e62ef5c7d8c84d8f7b72d43a2d220047183075be947c7945467882da5c672",                                                // 1 createConsent
	"v2:d564256eb18c9d45176fcbc02959b71d36b906af00fcf92904fca1607b71b592",                                                // 2 createConsent
	"v2:d564256eb18c9d45176fcbc02959b71d36b906af00fcf92904fca1607b71b592",                                                // 3 createConsent
	"v2:96787bab18f9420649e3cd4be62c059a8d9f5915aeeed5c44f8a22cf9fb6c2d4",                                                // 4 createConsent
	"refused at \"/amount\": invalid body at /amount (byte 17): must match the pattern \"^\\\\d{1,13}\\\\.\\\\d{1,5}$\"", // 5 createConsent
	"v2:e4dd54783480877018818d1ebe1c47d4a5fbdf0bb62c6b9a47b2a885da8fefd8",                                                // 6 createPayment
	"v2:e4dd54783480877018818d1ebe1c47d4a5fbdf0bb62c6b9a47b2a885da8fefd8",                                                // 7 createPayment
	"v2:0dbce6adca2c8654f6cf59b6e1d56e81f654f8a077dc6e00fa09cc142152c6b5",                                                // 8 createPayment
	"v2:4b29eebfe73dc444078d7441b5a8131f5f3e1ee7d2dc73bd52c4df101b9d3ee1",                                                // 9 createPayment
	"v2:ff60e824f1fb2f9d071324ee9b8c48759115ba5ccad50cf385723c10ae669743",                                                // 10 updateMandate
	"v2:d9a3a41b646f92e89859ce0e9c17b622c211fb2a9e255d8225d398539d7dd116",                                                // 11 updateMandate
	"v2:565896d9342b319245e19aa72d4ddbcf0319ebe5da95dc5de9c93e235638d8aa",                                                // 12 updateMandate
	"v2:1a9572d35dc58509d7f10c05255d82d2ee2407ccc8d5619f64400b263050e1a6",                                                // 13 createBatch
	"v2:afa4fb06b1d4c6f2ac477f3dc40cc6d2a220afba3e7d704bd3872009d6a51b21",                                                // 14 createBatch
	"v2:97d8b392438950fe9a57b8a5a92831cf9d9490c8bbbd23db1f67a1c81a796b6a",                                                // 15 createTransfer
}
