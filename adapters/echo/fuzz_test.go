package idemecho_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	idemecho "github.com/idemgen/idemgen/adapters/echo"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/bindtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The differential fuzzers: for every body the strict decoder accepts, what echo's binders make
// of the body the adapter hands the handler is the value the fingerprint covers (the generated
// decoder's value, internal/testkit/bindtest). A binder that read another value (a member name that
// differs in case, a number spelling it refuses, a form field it splits otherwise) would let a
// retry with the same key replay an answer to another request, or charge what the fingerprint
// does not say. Short in CI (the seeds), 60 s each in `make fuzz`:
//
//	cd adapters/echo && go test -run '^$' -fuzz FuzzBindJSON -fuzztime 60s .   (or: make fuzz-adapters)

// teamPayment is a request struct a team writes without tags: encoding/json matches its
// field names case-insensitively.
type teamPayment struct {
	Amount      int64
	Currency    string
	To          string
	Description *string
}

// bound is what the handler's binders produced, or the error they returned.
type bound struct {
	ran      bool
	err      error
	payment  api.PaymentRequest
	team     teamPayment
	charge   chargeForm
	metadata map[string]string
}

// chargeForm is createCharge's flat fields as a team binds them with echo's form binder.
type chargeForm struct {
	Amount      int64  `form:"amount"`
	Currency    string `form:"currency"`
	Description string `form:"description"`
}

// fuzzServer is an echo server with the adapter on a runtime without database, whose handlers
// bind the body every way the test compares.
func fuzzServer(t testing.TB) (*echo.Echo, *bound) {
	rt := bindtest.NewRuntime(t)
	idem, err := idemecho.Middleware[pgstore.DBTX](rt, api.Routes(), idemecho.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := &bound{}
	e := echo.New()
	e.Use(idem)
	e.POST("/v1/payments", func(c echo.Context) error {
		*got = bound{ran: true}
		raw, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		for _, v := range []any{&got.payment, &got.team} {
			c.Request().Body = io.NopCloser(bytes.NewReader(raw))
			if err := c.Bind(v); err != nil && got.err == nil {
				got.err = err
			}
		}
		return c.NoContent(http.StatusCreated)
	})
	e.POST("/v1/charges", func(c echo.Context) error {
		*got = bound{ran: true}
		got.err = c.Bind(&got.charge)
		form, err := c.FormParams()
		if got.err == nil {
			got.err = err
		}
		got.metadata = map[string]string{}
		for k, v := range form {
			if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(v) > 0 {
				got.metadata[strings.TrimSuffix(name, "]")] = v[0]
			}
		}
		return c.NoContent(http.StatusCreated)
	})
	return e, got
}

func FuzzBindJSON(f *testing.F) {
	for _, s := range bindtest.JSONSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	e, got := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Payment(body)
		if !ok {
			return
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, bindtest.Request("/v1/payments", "application/json", body, oracle.Key()))
		if w.Code != http.StatusCreated || !got.ran {
			t.Fatalf("the decoder accepts %q, the adapter answered %d %s", body, w.Code, w.Body)
		}
		if got.err != nil {
			t.Fatalf("the decoder accepts %q, c.Bind refuses the body the handler got: %v", body, got.err)
		}
		want.Extra = nil
		if !reflect.DeepEqual(got.payment, want) {
			t.Fatalf("%q: c.Bind into the generated type gives\n%+v, the fingerprint covers\n%+v", body, got.payment, want)
		}
		team := teamPayment{Amount: want.Amount, Currency: want.Currency, To: want.To, Description: want.Description}
		if !reflect.DeepEqual(got.team, team) {
			t.Fatalf("%q: c.Bind into untagged fields gives\n%+v, the fingerprint covers\n%+v", body, got.team, team)
		}
	})
}

func FuzzBindForm(f *testing.F) {
	for _, s := range bindtest.FormSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	e, got := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Charge(body)
		if !ok {
			return
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, bindtest.Request("/v1/charges", "application/x-www-form-urlencoded", body, oracle.Key()))
		if w.Code != http.StatusCreated || !got.ran {
			t.Fatalf("the decoder accepts %q, the adapter answered %d %s", body, w.Code, w.Body)
		}
		if got.err != nil {
			t.Fatalf("the decoder accepts %q, echo's form binder refuses the body the handler got: %v", body, got.err)
		}
		flat := chargeForm{Amount: want.Amount, Currency: want.Currency}
		if want.Description != nil {
			flat.Description = *want.Description
		}
		if got.charge != flat {
			t.Fatalf("%q: c.Bind gives %+v, the fingerprint covers %+v", body, got.charge, flat)
		}
		meta := map[string]string{}
		if want.Metadata != nil && !want.Metadata.Unset {
			meta = want.Metadata.Value
		}
		if !reflect.DeepEqual(got.metadata, meta) {
			t.Fatalf("%q: c.FormParams gives metadata %v, the fingerprint covers %v", body, got.metadata, meta)
		}
	})
}
