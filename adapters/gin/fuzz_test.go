package idemgin_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/gin-gonic/gin"

	idemgin "github.com/idemgen/idemgen/adapters/gin"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/bindtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The differential fuzzers: for every body the strict decoder accepts, what gin's binders make
// of the body the adapter hands the handler is the value the fingerprint covers (the generated
// decoder's value, internal/testkit/bindtest). A binder that read another value (a member name that
// differs in case, a number spelling it refuses, a form field it splits otherwise) would let a
// retry with the same key replay an answer to another request, or charge what the fingerprint
// does not say. Short in CI (the seeds), 60 s each in `make fuzz`:
//
//	cd adapters/gin && go test -run '^$' -fuzz FuzzBindJSON -fuzztime 60s .   (or: make fuzz-adapters)

// teamPayment is a request struct a team writes without json tags: encoding/json, under
// gin's JSON binder, matches its field names case-insensitively.
type teamPayment struct {
	Amount      int64
	Currency    string
	To          string
	Description *string
}

// chargeForm is createCharge's flat fields as a team binds them with gin's form binder.
type chargeForm struct {
	Amount      int64   `form:"amount"`
	Currency    string  `form:"currency"`
	Description *string `form:"description"`
}

// bound is what the handler's binders produced, or the first error they returned.
type bound struct {
	ran      bool
	err      error
	payment  api.PaymentRequest
	team     teamPayment
	charge   chargeForm
	metadata map[string]string
}

// fuzzServer is a gin engine with the adapter on a runtime without database, whose handlers
// bind the body every way the test compares.
func fuzzServer(t testing.TB) (*gin.Engine, *bound) {
	rt := bindtest.NewRuntime(t)
	idem, err := idemgin.Middleware[pgstore.DBTX](rt, api.Routes(), idemgin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := &bound{}
	r := gin.New()
	r.Use(idem)
	r.POST("/v1/payments", func(c *gin.Context) {
		*got = bound{ran: true}
		raw, err := io.ReadAll(c.Request.Body)
		if err != nil {
			got.err = err
		}
		for _, v := range []any{&got.payment, &got.team} {
			c.Request.Body = io.NopCloser(bytes.NewReader(raw))
			if err := c.ShouldBindJSON(v); err != nil && got.err == nil {
				got.err = err
			}
		}
		c.Status(http.StatusCreated)
	})
	r.POST("/v1/charges", func(c *gin.Context) {
		*got = bound{ran: true}
		got.err = c.ShouldBind(&got.charge)
		got.metadata = c.PostFormMap("metadata")
		c.Status(http.StatusCreated)
	})
	return r, got
}

func FuzzBindJSON(f *testing.F) {
	for _, s := range bindtest.JSONSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	r, got := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Payment(body)
		if !ok {
			return
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, bindtest.Request("/v1/payments", "application/json", body, oracle.Key()))
		if w.Code != http.StatusCreated || !got.ran {
			t.Fatalf("the decoder accepts %q, the adapter answered %d %s", body, w.Code, w.Body)
		}
		if got.err != nil {
			t.Fatalf("the decoder accepts %q, c.ShouldBindJSON refuses the body the handler got: %v", body, got.err)
		}
		want.Extra = nil
		if !reflect.DeepEqual(got.payment, want) {
			t.Fatalf("%q: c.ShouldBindJSON into the generated type gives\n%+v, the fingerprint covers\n%+v", body, got.payment, want)
		}
		team := teamPayment{Amount: want.Amount, Currency: want.Currency, To: want.To, Description: want.Description}
		if !reflect.DeepEqual(got.team, team) {
			t.Fatalf("%q: c.ShouldBindJSON into untagged fields gives\n%+v, the fingerprint covers\n%+v", body, got.team, team)
		}
	})
}

func FuzzBindForm(f *testing.F) {
	for _, s := range bindtest.FormSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	r, got := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Charge(body)
		if !ok {
			return
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, bindtest.Request("/v1/charges", "application/x-www-form-urlencoded", body, oracle.Key()))
		if w.Code != http.StatusCreated || !got.ran {
			t.Fatalf("the decoder accepts %q, the adapter answered %d %s", body, w.Code, w.Body)
		}
		if got.err != nil {
			t.Fatalf("the decoder accepts %q, gin's form binder refuses the body the handler got: %v", body, got.err)
		}
		if flat := (chargeForm{Amount: want.Amount, Currency: want.Currency, Description: want.Description}); !reflect.DeepEqual(got.charge, flat) {
			t.Fatalf("%q: c.ShouldBind gives %+v, the fingerprint covers %+v", body, got.charge, flat)
		}
		meta := map[string]string{}
		if want.Metadata != nil && !want.Metadata.Unset {
			meta = want.Metadata.Value
		}
		if !reflect.DeepEqual(got.metadata, meta) {
			t.Fatalf("%q: c.PostFormMap gives metadata %v, the fingerprint covers %v", body, got.metadata, meta)
		}
	})
}
