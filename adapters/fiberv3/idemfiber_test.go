package idemfiber_test

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/google/uuid"

	idemfiber "github.com/idemgen/idemgen/adapters/fiberv3"
)

const payment = `{"amount": 90, "currency": "EUR", "to": "acc_1"}`

// Each documented way to mount the adapter (on the route, on a group, with Use) guards
// POST /v1/payments over fasthttp: a new key runs once and is replayed with its status, body
// and Location; 20 parallel duplicates of a new key make one payment; the service's own error,
// rendered by the app's ErrorHandler, is stored and replayed; a plain error is a 500 that frees
// the key; a missing key and a missing tenant are refused before the handler runs.
func TestMountings(t *testing.T) {
	e := newEnv(t)
	idem := e.idem(idemfiber.Options{})
	for _, tc := range []struct {
		name  string
		build func(app *fiber.App)
	}{
		{"route", func(app *fiber.App) {
			app.Use(auth)
			app.Post("/v1/payments", idem, e.createPayment)
		}},
		{"group", func(app *fiber.App) {
			app.Use(auth)
			v1 := app.Group("/v1", idem)
			v1.Post("/payments", e.createPayment)
		}},
		{"use", func(app *fiber.App) {
			app.Use(auth, idem)
			app.Post("/v1/payments", e.createPayment)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp()
			tc.build(app)
			base := serve(t, app)
			tenant := "t-fiber-" + tc.name
			e.calls.Store(0)

			first := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-first-"+tc.name, payment)
			again := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-first-"+tc.name, payment)
			if first.status != http.StatusCreated || first.header.Get("Location") == "" {
				t.Fatalf("first: %s", first)
			}
			if !again.replayed() || again.body != first.body || again.header.Get("Location") != first.header.Get("Location") || e.calls.Load() != 1 {
				t.Errorf("retry: %s after %d runs, want the replay", again, e.calls.Load())
			}

			statuses := parallel(t, 20, base, "/v1/payments", tenant, "k-fiber-parallel-"+tc.name, payment)
			for _, s := range statuses {
				if s != "201 " && s != "409 in-flight" {
					t.Errorf("a parallel duplicate: %s, want 201 or 409 in-flight", s)
				}
			}
			if n := e.count("payments", tenant); n != 2 {
				t.Errorf("%d payments after the first key and 20 parallel duplicates, want 2", n)
			}

			before := e.calls.Load()
			decline := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-decline-"+tc.name, payment, "X-Answer", "decline")
			declineAgain := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-decline-"+tc.name, payment, "X-Answer", "decline")
			if decline.status != http.StatusPaymentRequired || decline.problem() != "service-error" || !declineAgain.replayed() || declineAgain.body != decline.body || e.calls.Load() != before+1 {
				t.Errorf("decline: %s then %s, want the service's 402 stored and replayed", decline, declineAgain)
			}

			before = e.calls.Load()
			for range 2 {
				if got := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-error-"+tc.name, payment, "X-Answer", "error"); got.status != http.StatusInternalServerError || got.replayed() {
					t.Errorf("error: %s, want 500, not stored", got)
				}
			}
			if e.calls.Load() != before+2 {
				t.Errorf("the failed request ran %d times for 2 attempts, want 2 (the key was released)", e.calls.Load()-before)
			}

			before = e.calls.Load()
			if got := send(t, base, "POST", "/v1/payments", tenant, "", payment); got.status != http.StatusBadRequest || got.problem() != "key-missing" {
				t.Errorf("no key: %s", got)
			}
			if got := send(t, base, "POST", "/v1/payments", "", "k-fiber-no-tenant-"+tc.name, payment); got.status != http.StatusUnauthorized || got.problem() != "unauthenticated" {
				t.Errorf("no tenant: %s", got)
			}
			if got := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-mismatch-"+tc.name, `{"amount": 91, "currency": "EUR", "to": "acc_1"}`); got.status != http.StatusCreated {
				t.Errorf("new key: %s", got)
			}
			if got := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-mismatch-"+tc.name, payment); got.status != http.StatusUnprocessableEntity {
				t.Errorf("same key, other body: %s, want 422", got)
			}
			if e.calls.Load() != before+1 {
				t.Errorf("refused requests ran the handler: %d runs, want 1", e.calls.Load()-before)
			}
		})
	}
}

// Mounted with Use, the adapter claims what fiber routes to the operation (fiber folds letter
// case and ignores a trailing slash by default) and stores only the operation's answer: a
// path fiber answers 404 is delivered and never stored.
func TestUseClaimsWhatFiberRoutes(t *testing.T) {
	e := newEnv(t)
	app := newApp()
	app.Use(auth, e.idem(idemfiber.Options{}))
	app.Post("/v1/payments", e.createPayment)
	base := serve(t, app)
	const tenant = "t-fiber-use-routing"
	key := "k-fiber-routing-" + uuid.NewString()[:8]
	first := send(t, base, "POST", "/V1/Payments/", tenant, key, payment)
	again := send(t, base, "POST", "/v1/payments", tenant, key, payment)
	if first.status != http.StatusCreated || !again.replayed() || e.calls.Load() != 1 {
		t.Errorf("a path fiber folds: %s, then %s after %d runs; want 201 and its replay", first, again, e.calls.Load())
	}
	before := e.records()
	for range 2 {
		if got := send(t, base, "POST", "/v1/payments/x", tenant, "k-fiber-notfound-00001", payment); got.status != http.StatusNotFound {
			t.Errorf("no such route: %s, want fiber's 404", got)
		}
	}
	if n := e.records() - before; n != 0 {
		t.Errorf("%d records for fiber's 404, want none", n)
	}
}

// A Use prefix that is an operation's path (app.Use("/v1/payments", idem)) is not that
// operation's route: the adapter matches the request's path as fiber routes it, and stores only
// an answer of a route of the operation. Fiber's 404 (no POST route at the path), or its 405,
// reached from the middleware's own Use route, is delivered and never stored; a longer path
// under the prefix is another operation's or none.
func TestUsePrefixEqualToAnOperationPath(t *testing.T) {
	e := newEnv(t)
	idem := e.idem(idemfiber.Options{})
	const tenant = "t-fiber-use-prefix"

	app := newApp()
	app.Use("/v1/payments", auth, idem)
	app.Get("/v1/payments", func(c fiber.Ctx) error { return c.SendString("list") }) // no POST route
	base := serve(t, app)
	before := e.records()
	for range 2 {
		if got := send(t, base, "POST", "/v1/payments", tenant, "k-fiber-use-prefix-404", payment); got.status != http.StatusMethodNotAllowed && got.status != http.StatusNotFound || got.replayed() {
			t.Errorf("no POST route under the Use prefix: %s, want fiber's 404 or 405, not stored", got)
		}
	}
	if n := e.records() - before; n != 0 {
		t.Errorf("%d records for fiber's own answer, want none", n)
	}

	app = newApp()
	app.Use("/v1/payments", auth, idem)
	app.Post("/v1/payments", e.createPayment)
	app.Post("/v1/payments/:id/capture", func(c fiber.Ctx) error { return c.SendStatus(http.StatusAccepted) }) // not marked
	base = serve(t, app)
	key := "k-fiber-use-prefix-ok-" + uuid.NewString()[:8]
	first := send(t, base, "POST", "/v1/payments", tenant, key, payment)
	again := send(t, base, "POST", "/v1/payments", tenant, key, payment)
	if first.status != http.StatusCreated || !again.replayed() || e.count("payments", tenant) != 1 {
		t.Errorf("the operation's route under a Use prefix: %s then %s, want 201 and its replay", first, again)
	}
	before = e.records()
	if got := send(t, base, "POST", "/v1/payments/pay_1/capture", tenant, "k-fiber-use-prefix-other", payment); got.status != http.StatusAccepted || got.replayed() {
		t.Errorf("an unmarked route under the prefix: %s", got)
	}
	if n := e.records() - before; n != 0 {
		t.Errorf("%d records for an unmarked route under the prefix, want none", n)
	}
}
