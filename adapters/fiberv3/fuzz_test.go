package idemfiber_test

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v3"

	idemfiber "github.com/idemgen/idemgen/adapters/fiberv3"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/bindtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The differential fuzzers: for every body the strict decoder accepts, what fiber's binders
// make of the body the adapter hands the handler (c.BodyParser for JSON and forms, fasthttp's
// parsed form for bracketed fields) is the value the fingerprint covers (the generated
// decoder's value, internal/testkit/bindtest). The requests go through fiber's own fasthttp
// handling (app.Test). Short in CI (the seeds), 60 s each in `make fuzz-adapters`:
//
//	cd adapters/fiberv3 && go test -run '^$' -fuzz FuzzBindJSON -fuzztime 60s .

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

// chargeForm is createCharge's flat fields as a team binds them with fiber's form binder.
type chargeForm struct {
	Amount      int64  `form:"amount"`
	Currency    string `form:"currency"`
	Description string `form:"description"`
}

// fuzzServer is a fiber app with the adapter on a runtime without database, whose handlers
// bind the body every way the test compares.
func fuzzServer(t testing.TB) (*fiber.App, *bound) {
	rt := bindtest.NewRuntime(t)
	idem, err := idemfiber.Middleware[pgstore.DBTX](rt, api.Routes(), idemfiber.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := &bound{}
	app := fiber.New()
	app.Use(idem)
	app.Post("/v1/payments", func(c fiber.Ctx) error {
		*got = bound{ran: true}
		for _, v := range []any{&got.payment, &got.team} {
			if err := c.Bind().Body(v); err != nil && got.err == nil {
				got.err = err
			}
		}
		return c.SendStatus(http.StatusCreated)
	})
	app.Post("/v1/charges", func(c fiber.Ctx) error {
		*got = bound{ran: true}
		got.err = c.Bind().Body(&got.charge)
		got.metadata = map[string]string{}
		c.Request().PostArgs().VisitAll(func(k, v []byte) {
			if name, ok := strings.CutPrefix(string(k), "metadata["); ok && strings.HasSuffix(name, "]") {
				if _, seen := got.metadata[strings.TrimSuffix(name, "]")]; !seen {
					got.metadata[strings.TrimSuffix(name, "]")] = string(v)
				}
			}
		})
		return c.SendStatus(http.StatusCreated)
	})
	return app, got
}

func serveTest(t *testing.T, app *fiber.App, r *http.Request) (int, string) {
	resp, err := app.Test(r, fiber.TestConfig{Timeout: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func FuzzBindJSON(f *testing.F) {
	for _, s := range bindtest.JSONSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	app, got := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Payment(body)
		if !ok {
			return
		}
		code, answer := serveTest(t, app, bindtest.Request("/v1/payments", "application/json", body, oracle.Key()))
		if code != http.StatusCreated || !got.ran {
			t.Fatalf("the decoder accepts %q, the adapter answered %d %s", body, code, answer)
		}
		if got.err != nil {
			t.Fatalf("the decoder accepts %q, c.BodyParser refuses the body the handler got: %v", body, got.err)
		}
		want.Extra = nil
		if !reflect.DeepEqual(got.payment, want) {
			t.Fatalf("%q: c.BodyParser into the generated type gives\n%+v, the fingerprint covers\n%+v", body, got.payment, want)
		}
		team := teamPayment{Amount: want.Amount, Currency: want.Currency, To: want.To, Description: want.Description}
		if !reflect.DeepEqual(got.team, team) {
			t.Fatalf("%q: c.BodyParser into untagged fields gives\n%+v, the fingerprint covers\n%+v", body, got.team, team)
		}
	})
}

func FuzzBindForm(f *testing.F) {
	for _, s := range bindtest.FormSeeds(f, "../..") {
		f.Add(s)
	}
	oracle := bindtest.NewOracle(f)
	app, got := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		want, ok := oracle.Charge(body)
		if !ok {
			return
		}
		code, answer := serveTest(t, app, bindtest.Request("/v1/charges", "application/x-www-form-urlencoded", body, oracle.Key()))
		if code != http.StatusCreated || !got.ran {
			t.Fatalf("the decoder accepts %q, the adapter answered %d %s", body, code, answer)
		}
		if got.err != nil {
			t.Fatalf("the decoder accepts %q, fiber's form binder refuses the body the handler got: %v", body, got.err)
		}
		flat := chargeForm{Amount: want.Amount, Currency: want.Currency}
		if want.Description != nil {
			flat.Description = *want.Description
		}
		if got.charge != flat {
			t.Fatalf("%q: c.BodyParser gives %+v, the fingerprint covers %+v", body, got.charge, flat)
		}
		meta := map[string]string{}
		if want.Metadata != nil && !want.Metadata.Unset {
			meta = want.Metadata.Value
		}
		if !reflect.DeepEqual(got.metadata, meta) {
			t.Fatalf("%q: fasthttp's form gives metadata %v, the fingerprint covers %v", body, got.metadata, meta)
		}
	})
}
