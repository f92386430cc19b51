package idemhuma_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/bindtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The differential fuzzers: for every body the strict decoder accepts, what Huma's own binding
// (its validation against the operation's schema, then its unmarshaling into the input struct)
// makes of the body the middleware hands on is the value the fingerprint covers (the generated
// decoder's value, internal/testkit/bindtest); and a body Huma refuses after the middleware, it
// refuses as sent too (the re-encoding never makes a body Huma would take refused; it may make
// one Huma refuses as sent, 1.5e3 for an int64, acceptable). Forms: Huma binds none, so the
// handler parses its RawBody with net/url. Short in CI (the seeds), 60 s each in `make
// fuzz-adapters`:
//
//	cd adapters/huma && go test -run '^$' -fuzz FuzzBindJSON -fuzztime 60s .

// humaPayment is createPayment's body as a Huma service declares it, the schema's rules in
// Huma's tags.
type humaPayment struct {
	_               struct{}          `additionalProperties:"true"`
	Amount          int64             `json:"amount" minimum:"1"`
	Currency        string            `json:"currency" minLength:"3" maxLength:"3"`
	To              string            `json:"to"`
	Description     *string           `json:"description,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	ClientTimestamp *string           `json:"client_timestamp,omitempty"`
}

// bound is what the handler got, or false when Huma refused the body before it.
type bound struct {
	ran     bool
	payment humaPayment
	form    url.Values
	formErr error
}

// fuzzAPI is a Huma API with the middleware (or without: guarded false) on a runtime without
// database, whose handlers keep what Huma bound.
func fuzzAPI(t testing.TB, guarded bool) (http.Handler, *bound) {
	mux, a := newAPI()
	if guarded {
		idem, err := idemhuma.Middleware[pgstore.DBTX](bindtest.NewRuntime(t), api.Routes(), idemhuma.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a.UseMiddleware(idem)
	}
	got := &bound{}
	huma.Register(a, huma.Operation{OperationID: "createPayment", Method: http.MethodPost, Path: "/v1/payments", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *struct{ Body humaPayment }) (*struct{}, error) {
			*got = bound{ran: true, payment: in.Body}
			return &struct{}{}, nil
		})
	huma.Register(a, huma.Operation{OperationID: "createCharge", Method: http.MethodPost, Path: "/v1/charges", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *struct {
			RawBody []byte `contentType:"application/x-www-form-urlencoded"`
		}) (*struct{}, error) {
			*got = bound{ran: true}
			got.form, got.formErr = url.ParseQuery(string(in.RawBody))
			return &struct{}{}, nil
		})
	return mux, got
}

func serveFuzz(h http.Handler, r *http.Request) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

func FuzzBindJSON(f *testing.F) {
	for _, s := range bindtest.JSONSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	guarded, got := fuzzAPI(f, true)
	plain, gotPlain := fuzzAPI(f, false)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Payment(body)
		if !ok {
			return
		}
		code, answer := serveFuzz(guarded, bindtest.Request("/v1/payments", "application/json", body, oracle.Key()))
		if !got.ran {
			*gotPlain = bound{}
			plainCode, plainAnswer := serveFuzz(plain, bindtest.Request("/v1/payments", "application/json", body, ""))
			if gotPlain.ran {
				t.Fatalf("the decoder accepts %q, Huma takes it as sent (%d) but refuses the body the handler got: %d %s (as sent: %s)", body, plainCode, code, answer, plainAnswer)
			}
			return
		}
		if code != http.StatusCreated {
			t.Fatalf("the decoder accepts %q, the middleware answered %d %s", body, code, answer)
		}
		wantHuma := humaPayment{Amount: want.Amount, Currency: want.Currency, To: want.To, Description: want.Description, Metadata: want.Metadata, ClientTimestamp: want.ClientTimestamp}
		if !reflect.DeepEqual(got.payment, wantHuma) {
			t.Fatalf("%q: Huma binds\n%+v, the fingerprint covers\n%+v", body, got.payment, wantHuma)
		}
	})
}

func FuzzBindForm(f *testing.F) {
	for _, s := range bindtest.FormSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	guarded, got := fuzzAPI(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Charge(body)
		if !ok {
			return
		}
		code, answer := serveFuzz(guarded, bindtest.Request("/v1/charges", "application/x-www-form-urlencoded", body, oracle.Key()))
		if code != http.StatusCreated || !got.ran {
			t.Fatalf("the decoder accepts %q, the middleware answered %d %s", body, code, answer)
		}
		if got.formErr != nil {
			t.Fatalf("the decoder accepts %q, net/url refuses the body the handler got: %v", body, got.formErr)
		}
		if amount, err := strconv.ParseInt(got.form.Get("amount"), 10, 64); err != nil || amount != want.Amount || got.form.Get("currency") != want.Currency {
			t.Fatalf("%q: net/url reads amount %q currency %q, the fingerprint covers %d %q", body, got.form.Get("amount"), got.form.Get("currency"), want.Amount, want.Currency)
		}
		if d, ok := got.form["description"]; ok != (want.Description != nil) || ok && d[0] != *want.Description {
			t.Fatalf("%q: net/url reads description %q, the fingerprint covers %v", body, d, want.Description)
		}
		meta := map[string]string{}
		for k, v := range got.form {
			if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") {
				meta[strings.TrimSuffix(name, "]")] = v[0]
			}
		}
		wantMeta := map[string]string{}
		if want.Metadata != nil && !want.Metadata.Unset {
			wantMeta = want.Metadata.Value
		}
		if !reflect.DeepEqual(meta, wantMeta) {
			t.Fatalf("%q: net/url gives metadata %v, the fingerprint covers %v", body, meta, wantMeta)
		}
	})
}
