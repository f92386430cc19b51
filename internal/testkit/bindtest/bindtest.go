// Package bindtest is the oracle of the differential fuzzers of the framework adapters
// (adapters/echo, adapters/gin): for a request body, the value the fingerprint covers, as the
// generated decoder of the conformance spec read it (golden/conformance: createPayment for
// JSON, createCharge for a form), to compare with what a framework's binders produce from the
// body the adapter hands its handler. It also gives the fuzzers a runtime with no database (an
// in-memory store shaped like pgstore's, runtime/store/memstore underneath): the fuzzers test
// decoders and binders, pure logic; the adapters' own tests run on PostgreSQL.
package bindtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// Tenant is the scope of every request the package builds.
const Tenant = "t-bind"

// NewRuntime returns a runtime over a fresh in-memory store whose handlers get a nil
// pgstore.DBTX (they must not write), scoped by the bearer token.
func NewRuntime(tb testing.TB) *runtime.Runtime {
	tb.Helper()
	rt, err := runtime.New(runtime.Config{Store: pgShaped{memstore.New(time.Now)}, Scope: func(r *http.Request) (string, error) {
		t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || t == "" {
			return "", fmt.Errorf("no bearer token")
		}
		return t, nil
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return rt
}

// Oracle decodes request bodies with the generated decoders, through the generated handlers.
type Oracle struct {
	pay, charge http.Handler
	// got is the last decoded body of each handler.
	payment api.CreatePaymentBody
	form    api.CreateChargeBody
	keys    atomic.Int64
}

// NewOracle returns an Oracle on a runtime of its own.
func NewOracle(tb testing.TB) *Oracle {
	o := &Oracle{}
	rt := NewRuntime(tb)
	o.pay = api.CreatePaymentHandler(rt, func(_ context.Context, _ pgstore.DBTX, _ api.CreatePaymentParams, b api.CreatePaymentBody) (runtime.Response, error) {
		o.payment = b
		return runtime.Response{Status: http.StatusCreated}, nil
	})
	o.charge = api.CreateChargeHandler(rt, func(_ context.Context, _ pgstore.DBTX, _ api.CreateChargeParams, b api.CreateChargeBody) (runtime.Response, error) {
		o.form = b
		return runtime.Response{Status: http.StatusCreated}, nil
	})
	return o
}

// Payment returns the createPayment body the generated decoder reads from body, or false when
// it refuses body (a 400 or 415: the request never reaches a handler).
func (o *Oracle) Payment(body []byte) (api.CreatePaymentBody, bool) {
	o.payment = api.CreatePaymentBody{}
	w := httptest.NewRecorder()
	o.pay.ServeHTTP(w, Request("/v1/payments", "application/json", body, o.Key()))
	return o.payment, w.Code == http.StatusCreated
}

// Charge returns the createCharge form body the generated decoder reads from body, or false
// when it refuses body.
func (o *Oracle) Charge(body []byte) (api.CreateChargeBody, bool) {
	o.form = api.CreateChargeBody{}
	w := httptest.NewRecorder()
	o.charge.ServeHTTP(w, Request("/v1/charges", "application/x-www-form-urlencoded", body, o.Key()))
	return o.form, w.Code == http.StatusCreated
}

// Key returns a new idempotency key.
func (o *Oracle) Key() string { return fmt.Sprintf("k-bindtest-%012d", o.keys.Add(1)) }

// Request is a POST of body to path with its media type, the tenant and key.
func Request(path, mediaType string, body []byte, key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
	r.Header.Set("Content-Type", mediaType)
	r.Header.Set("Authorization", "Bearer "+Tenant)
	r.Header.Set("Idempotency-Key", key)
	return r
}

// JSONSeeds are createPayment bodies for the JSON fuzzers: every JSON body of the shared cases
// sent to /v1/payments, and bodies that decoders read differently (member names up to case,
// number spellings, escapes, duplicates, undeclared members, out-of-range numbers).
func JSONSeeds(tb testing.TB, root string) [][]byte {
	seeds := [][]byte{
		[]byte(`{"amount":5,"currency":"EUR","to":"acc_1"}`),
		[]byte(`{"amount":5,"Amount":600,"currency":"EUR","to":"acc_1"}`),
		[]byte(`{"Amount":600,"amount":5,"currency":"EUR","to":"acc_1"}`),
		[]byte(`{"AMOUNT":600,"amount":5,"currency":"EUR","to":"acc_1","TO":"acc_2"}`),
		[]byte(`{"amount":1.5e3,"currency":"EUR","to":"acc_1"}`),
		[]byte(`{"amount":1e3,"currency":"EUR","to":"acc_1"}`),
		[]byte(`{"amount":1000.0,"currency":"EUR","to":"acc_1"}`),
		[]byte(`{"amount":9007199254740993,"currency":"EUR","to":"acc_1"}`),
		[]byte(`{"amount":5,"currency":"\u0045UR","to":"acc_\u00e9","description":"caf\u00e9 \/ \"x\""}`),
		[]byte(`{"amount":5,"currency":"EUR","to":"acc_1","metadata":{"a":"1","A":"2"},"client_timestamp":"2026-01-01T00:00:00Z"}`),
		[]byte(`{"amount":5,"currency":"EUR","to":"acc_1","description":null}`),
		[]byte(`{"amount":5,"currency":"EUR","to":"acc_1","zz":[1,{"b":2}],"am\u006funt":7}`),
		[]byte(`{"amount":5,"currency":"EUR","to":"acc_1","amount":6}`),
		// ſ (U+017F, long s) folds to s for encoding/json: "deſcription" is "description" to it.
		[]byte(`{"amount":5,"currency":"EUR","to":"acc_1","de\u017fcription":"x"}`),
		[]byte("{\"amount\":5,\"currency\":\"EUR\",\"to\":\"acc_1\",\"de\u017fcription\":\"x\"}"),
	}
	list, err := cases.LoadDir(filepath.Join(root, "testdata", "cases"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, c := range list {
		for _, s := range c.Steps {
			if s.Request.Path == "/v1/payments" && s.Request.Body != nil {
				seeds = append(seeds, s.Request.Body)
			}
		}
	}
	return seeds
}

// FormSeeds are createCharge bodies for the form fuzzers: every form body of the shared cases
// and bodies that parsers read differently (semicolons, percent-encoded brackets and names,
// repeated fields, empty values, '+').
func FormSeeds(tb testing.TB, root string) [][]byte {
	seeds := [][]byte{
		[]byte(`amount=2500&currency=usd&description=Order+42`),
		[]byte(`amount=2500&currency=usd&description=a;b=c`),
		[]byte(`amount=2500;currency=usd`),
		[]byte(`amount=2500&currency=usd&amount=3000`),
		[]byte(`amount=2500&currency=usd&%61mount=3000`),
		[]byte(`amount=2500&currency=usd&metadata%5Bk%5D=v&metadata[k2]=%2B`),
		[]byte(`amount=2500&currency=usd&metadata=`),
		[]byte(`amount=2500&currency=usd&description=&metadata[a]=1&metadata[A]=2`),
		[]byte(`amount=2500&currency=usd&description=%ZZ`),
		[]byte(`amount=+2500&currency=usd`),
		[]byte(`amount=2500&currency=usd&Description=x`),
		[]byte(`amount=2500&currency=usd&items[0][price]=p&items[0][quantity]=2`),
	}
	for _, dir := range []string{"testdata/cases"} {
		list, err := cases.LoadDir(filepath.Join(root, dir))
		if err != nil {
			tb.Fatal(err)
		}
		for _, c := range list {
			for _, s := range c.Steps {
				if s.Request.Path == "/v1/charges" && s.Request.Body != nil {
					seeds = append(seeds, s.Request.Body)
				}
			}
		}
	}
	return seeds
}

// pgShaped is a memstore whose transactions hand the handler a nil pgstore.DBTX, so that code
// generated for PostgreSQL runs on it without a database.
type pgShaped struct{ *memstore.Store }

func (s pgShaped) BeginAtomic(ctx context.Context, c store.Claim) (store.Tx[pgstore.DBTX], *store.Record, error) {
	tx, rec, err := s.Store.BeginAtomic(ctx, c)
	if tx == nil {
		return nil, rec, err
	}
	return pgTx{tx}, rec, err
}

func (s pgShaped) BeginCompletion(ctx context.Context, c store.Claim, token int64) (store.Tx[pgstore.DBTX], error) {
	tx, err := s.Store.BeginCompletion(ctx, c, token)
	if tx == nil {
		return nil, err
	}
	return pgTx{tx}, err
}

func (s pgShaped) BeginPlain(ctx context.Context) (store.Tx[pgstore.DBTX], error) {
	tx, err := s.Store.BeginPlain(ctx)
	if tx == nil {
		return nil, err
	}
	return pgTx{tx}, err
}

type pgTx struct{ store.Tx[*memstore.DB] }

func (pgTx) DB() pgstore.DBTX { return nil }
