package multipartnested

// Hand-written tests of a multipart body whose object, map and array members arrive as one text
// part per nested field, as Stainless-generated SDKs send them (metadata.order, metadata[order],
// line_items[0][amount]), or as one JSON part: the handler gets the typed values either way, the
// fingerprint is that of the values, and errors name the nested field. The served test runs the
// generated handlers on PostgreSQL (scripts/with-postgres.sh).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// part is one part of a test body: name, optional filename and content type, content.
type part struct{ name, filename, ctype, data string }

const boundary = "idemgen-test-boundary"

// body writes parts as a multipart/form-data body with boundary.
func body(parts ...part) string {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		panic(err)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name="%s"`, p.name)
		if p.filename != "" {
			cd += fmt.Sprintf(`; filename="%s"`, p.filename)
		}
		h.Set("Content-Disposition", cd)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		pw, _ := w.CreatePart(h)
		pw.Write([]byte(p.data))
	}
	w.Close()
	return b.String()
}

const mt = "multipart/form-data"

func req(parts ...part) fptest.Request {
	return fptest.Request{Op: "createPaymentOrder", Target: "/api/payment_orders", MediaType: mt, Body: body(parts...),
		Header: []string{"Content-Type", mt + "; boundary=" + boundary}}
}

func text(name, v string) part { return part{name: name, data: v} }

var (
	amount    = text("amount", "1000")
	direction = text("direction", "credit")
	doc       = part{"documents", "invoice.pdf", "application/pdf", "%PDF-1.7 ..."}
)

var corpus = []fptest.Request{
	// 0-3 one payment order written four ways: bracketed parts (newer SDKs), dotted parts
	// (older SDKs), JSON parts, and bracketed parts in another order: one request.
	req(amount, direction, text("metadata[order]", "42"), text("metadata[region]", "eu"), text("accounting[account_id]", "acc_1"),
		text("line_items[0][amount]", "600"), text("line_items[0][taxable]", "true"), text("line_items[1][amount]", "400"), text("line_items[1][description]", "fee"), doc),
	req(amount, direction, text("metadata.order", "42"), text("metadata.region", "eu"), text("accounting.account_id", "acc_1"),
		text("line_items.0.amount", "600"), text("line_items.0.taxable", "true"), text("line_items.1.amount", "400"), text("line_items.1.description", "fee"), doc),
	req(amount, direction, part{"metadata", "", "application/json", `{"region":"eu","order":"42"}`}, part{"accounting", "", "application/json", `{"account_id":"acc_1"}`},
		part{"line_items", "", "application/json", `[{"amount":600,"taxable":true},{"amount":400,"description":"fee"}]`}, doc),
	req(doc, text("line_items[1][description]", "fee"), text("metadata[region]", "eu"), text("line_items[1][amount]", "400"), direction, text("accounting[account_id]", "acc_1"),
		text("line_items[0][taxable]", "true"), text("metadata[order]", "42"), text("line_items[0][amount]", "600"), amount),
	// 4-5 another value of a nested field, and the line items in the other order: other requests.
	req(amount, direction, text("metadata[order]", "43"), text("metadata[region]", "eu"), text("accounting[account_id]", "acc_1"),
		text("line_items[0][amount]", "600"), text("line_items[0][taxable]", "true"), text("line_items[1][amount]", "400"), text("line_items[1][description]", "fee"), doc),
	req(amount, direction, text("metadata[order]", "42"), text("metadata[region]", "eu"), text("accounting[account_id]", "acc_1"),
		text("line_items[1][amount]", "600"), text("line_items[1][taxable]", "true"), text("line_items[0][amount]", "400"), text("line_items[0][description]", "fee"), doc),
	// 6-11 refused, naming the nested field: a field the closed object does not declare, a
	// number that is not one, a required member missing in an item, too many items, a boolean
	// that is not one, one member given as a JSON part and as nested parts.
	req(amount, direction, text("accounting[account_id]", "acc_1"), text("accounting[ledger]", "x")),
	req(amount, direction, text("line_items[0][amount]", "six")),
	req(amount, direction, text("line_items[0][description]", "fee")),
	req(amount, direction, text("line_items[0][amount]", "1"), text("line_items[1][amount]", "1"), text("line_items[2][amount]", "1"), text("line_items[3][amount]", "1"), text("line_items[4][amount]", "1"), text("line_items[5][amount]", "1")),
	req(amount, direction, text("line_items[0][amount]", "1"), text("line_items[0][taxable]", "yes")),
	req(amount, direction, part{"metadata", "", "application/json", `{"order":"42"}`}, text("metadata[region]", "eu")),
}

func TestNestedFingerprints(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.Run(operationCreatePaymentOrder(), decodeCreatePaymentOrder))
	for _, i := range []int{1, 2, 3} {
		if want[i] != want[0] {
			t.Errorf("request %d is request 0 written otherwise, with another fingerprint", i)
		}
	}
	for _, i := range []int{4, 5} {
		if want[i] == want[0] {
			t.Errorf("request %d is another request, with request 0's fingerprint", i)
		}
	}
}

// TestNestedDecoded: the handler's typed members are filled from nested parts, dotted or
// bracketed.
func TestNestedDecoded(t *testing.T) {
	for _, i := range []int{0, 1, 2} {
		c := corpus[i]
		r, _, err := fptest.Decode(operationCreatePaymentOrder(), decodeCreatePaymentOrder, c.HTTP(), mt, []byte(c.Body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b := r.Body
		if b.Amount != 1000 || b.Direction != CreatePaymentOrderBodyDirectionCredit || b.Metadata["order"] != "42" || b.Metadata["region"] != "eu" || len(b.Metadata) != 2 {
			t.Errorf("request %d: %+v", i, b)
		}
		if b.Accounting == nil || b.Accounting.AccountID == nil || *b.Accounting.AccountID != "acc_1" || b.Accounting.ClassID != nil {
			t.Errorf("request %d: accounting %+v", i, b.Accounting)
		}
		li := b.LineItems
		if len(li) != 2 || li[0].Amount != 600 || li[0].Taxable == nil || !*li[0].Taxable || li[1].Amount != 400 || li[1].Description == nil || *li[1].Description != "fee" {
			t.Errorf("request %d: line items %+v", i, li)
		}
		if len(b.Documents) != 1 || b.Documents[0].Filename != "invoice.pdf" {
			t.Errorf("request %d: documents %+v", i, b.Documents)
		}
	}
}

// TestNestedServed: the generated handler on PostgreSQL runs a payment order sent as bracketed
// parts once, replays the SDK's retry sent as dotted parts (an older SDK, the same key), and
// tells a retry with another nested value by a 422.
func TestNestedServed(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var runs []string
	mux := http.NewServeMux()
	err = Register(mux, rt, Handlers{
		CreatePaymentOrder: func(ctx context.Context, tx pgstore.DBTX, p CreatePaymentOrderParams, b CreatePaymentOrderBody) (runtime.Response, error) {
			got := fmt.Sprintf("%d order=%s items=%d", b.Amount, b.Metadata["order"], len(b.LineItems))
			mu.Lock()
			runs = append(runs, got)
			mu.Unlock()
			return runtime.Response{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(got)}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(c fptest.Request) (int, string, string) {
		t.Helper()
		r, _ := http.NewRequest("POST", srv.URL+c.Target, strings.NewReader(c.Body))
		r.Header.Set("Content-Type", mt+"; boundary="+boundary)
		r.Header.Set("Idempotency-Key", "stainless-go-0b9c3f5e")
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(runtime.HeaderReplayed), string(b)
	}
	if code, _, b := send(corpus[0]); code != 201 || b != "1000 order=42 items=2" {
		t.Fatalf("first: %d %q", code, b)
	}
	if code, replayed, b := send(corpus[1]); code != 201 || replayed != "true" || b != "1000 order=42 items=2" {
		t.Errorf("retry as dotted parts: %d replayed=%q %q", code, replayed, b)
	}
	if code, _, b := send(corpus[4]); code != 422 {
		t.Errorf("retry with metadata[order]=43: %d %q, want 422", code, b)
	}
	if code, _, b := send(corpus[7]); code != 400 || !strings.Contains(b, "/line_items/0/amount") {
		t.Errorf("a nested number that is not one: %d %q, want 400 naming /line_items/0/amount", code, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 1 {
		t.Errorf("the business function ran %d times: %q", len(runs), runs)
	}
}

// TestNestedBehindMiddleware: behind runtime.Middleware the application's own handler reads
// the nested parts as the SDK sent them (its ParseMultipartForm sees metadata[order], not a
// JSON part the decoder assembled), and the SDK's retry in the other spelling replays.
func TestNestedBehindMiddleware(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var runs []string
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f := r.MultipartForm
		got := fmt.Sprintf("order=%s region=%s account=%s item0=%s item1=%s/%s files=%d metadata=%q",
			f.Value["metadata[order]"], f.Value["metadata[region]"], f.Value["accounting[account_id]"],
			f.Value["line_items[0][amount]"], f.Value["line_items[1][amount]"], f.Value["line_items[1][description]"], len(f.File["documents"]), f.Value["metadata"])
		mu.Lock()
		runs = append(runs, got)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		w.Write([]byte(got))
	})
	mux := http.NewServeMux()
	mux.Handle("POST /api/payment_orders", mw(app))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(c fptest.Request) (int, string, string) {
		t.Helper()
		r, _ := http.NewRequest("POST", srv.URL+c.Target, strings.NewReader(c.Body))
		r.Header.Set("Content-Type", mt+"; boundary="+boundary)
		r.Header.Set("Idempotency-Key", "stainless-go-7d1e")
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(runtime.HeaderReplayed), string(b)
	}
	const seen = `order=[42] region=[eu] account=[acc_1] item0=[600] item1=[400]/[fee] files=1 metadata=[]`
	if code, _, b := send(corpus[0]); code != 201 || b != seen {
		t.Fatalf("first: %d %q, want %q", code, b, seen)
	}
	if code, replayed, b := send(corpus[3]); code != 201 || replayed != "true" || b != seen {
		t.Errorf("retry with the parts reordered: %d replayed=%q %q", code, replayed, b)
	}
	if code, _, b := send(corpus[4]); code != 422 {
		t.Errorf("retry with metadata[order]=43: %d %q, want 422", code, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 1 {
		t.Errorf("the handler ran %d times: %q", len(runs), runs)
	}
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:ea1e71a6ecd90708d7548e545c0e8a553df343f3501457a6f29637a2190d6b97",                                                                                                            // 0 createPaymentOrder
	"v2:ea1e71a6ecd90708d7548e545c0e8a553df343f3501457a6f29637a2190d6b97",                                                                                                            // 1 createPaymentOrder
	"v2:ea1e71a6ecd90708d7548e545c0e8a553df343f3501457a6f29637a2190d6b97",                                                                                                            // 2 createPaymentOrder
	"v2:ea1e71a6ecd90708d7548e545c0e8a553df343f3501457a6f29637a2190d6b97",                                                                                                            // 3 createPaymentOrder
	"v2:940b92347b483eabc9fe56a5f63857fd04600698ebfb1f5edc11c426ca265b61",                                                                                                            // 4 createPaymentOrder
	"v2:dccdf41b4473102d04bf8a08ac5e54f1812e3638c0b88bafcb896257c9930c6f",                                                                                                            // 5 createPaymentOrder
	"refused at \"/accounting/ledger\": invalid body at /accounting/ledger: in the nested parts of \"accounting\": member not allowed by the schema",                                 // 6 createPaymentOrder
	"refused at \"/line_items/0/amount\": invalid body at /line_items/0/amount: in the nested parts of \"line_items\": expected a number, found the text \"six\"",                    // 7 createPaymentOrder
	"refused at \"/line_items/0\": invalid body at /line_items/0: in the nested parts of \"line_items\": missing required member \"amount\"",                                         // 8 createPaymentOrder
	"refused at \"/line_items\": invalid body at /line_items: in the nested parts of \"line_items\": must have at most 5 items",                                                      // 9 createPaymentOrder
	"refused at \"/line_items/0/taxable\": invalid body at /line_items/0/taxable: in the nested parts of \"line_items\": expected a boolean (true or false), found the text \"yes\"", // 10 createPaymentOrder
	"refused at \"/metadata\": invalid body at /metadata: part given more than once",                                                                                                 // 11 createPaymentOrder
}
