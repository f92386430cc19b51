package multipartnested

// Hand-written tests of files inside an array of objects (createExpectedPayment's documents, as
// Modern Treasury's spec declares them): Stainless's SDKs send documents[][document_type] and
// documents[][file] (empty brackets, in order), other clients documents[0][file]; both decode
// to one typed value with gen.File values and one fingerprint, and the served handler replays
// one spelling's retry sent in the other.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func expected(parts ...part) fptest.Request {
	return fptest.Request{Op: "createExpectedPayment", Target: "/api/expected_payments", MediaType: mt, Body: body(parts...),
		Header: []string{"Content-Type", mt + "; boundary=" + boundary}}
}

var (
	bound    = text("amount_upper_bound", "5000")
	invoice  = func(name string) part { return part{name, "invoice.pdf", "application/pdf", "%PDF-1.7 invoice"} }
	receipt  = func(name string) part { return part{name, "receipt.png", "image/png", "\x89PNG receipt"} }
	receipt2 = func(name string) part { return part{name, "receipt.png", "image/png", "\x89PNG another receipt"} }
)

var filesCorpus = []fptest.Request{
	// 0-2 two documents: empty brackets in order (Stainless), explicit indices, indices in
	// another body order: one request.
	expected(bound, text("documents[][document_type]", "invoice"), invoice("documents[][file]"),
		receipt("documents[][file]"), text("documents[][document_type]", "receipt")),
	expected(bound, invoice("documents[0][file]"), text("documents[0][document_type]", "invoice"),
		text("documents[1][document_type]", "receipt"), receipt("documents[1][file]")),
	expected(receipt("documents[1][file]"), text("documents[1][document_type]", "receipt"), bound,
		text("documents[0][document_type]", "invoice"), invoice("documents[0][file]")),
	// 3 another byte in the second file: another request.
	expected(bound, text("documents[][document_type]", "invoice"), invoice("documents[][file]"),
		receipt2("documents[][file]"), text("documents[][document_type]", "receipt")),
	// 4 the documents in the other order: another request (an array's order counts).
	expected(bound, receipt("documents[0][file]"), text("documents[0][document_type]", "receipt"),
		invoice("documents[1][file]"), text("documents[1][document_type]", "invoice")),
	// 5-7 refused: a document without its required file, a file given as JSON text, too many.
	expected(bound, text("documents[0][document_type]", "invoice")),
	expected(bound, part{"documents", "", "application/json", `[{"file":"%PDF-1.7"}]`}),
	expected(bound, invoice("documents[][file]"), invoice("documents[][file]"), invoice("documents[][file]"), invoice("documents[][file]"), invoice("documents[][file]")),
}

func TestNestedFileFingerprints(t *testing.T) {
	fp := fptest.Run(operationCreateExpectedPayment(), decodeCreateExpectedPayment)
	var got []string
	for i, c := range filesCorpus {
		f, err := fp(c, c.HTTP())
		if err != nil {
			got = append(got, "refused: "+err.Error())
		} else {
			got = append(got, f.String())
		}
		t.Logf("%d: %s", i, got[i])
	}
	for _, i := range []int{1, 2} {
		if got[i] != got[0] || strings.HasPrefix(got[0], "refused") {
			t.Errorf("request %d is request 0 spelled otherwise: %s, want %s", i, got[i], got[0])
		}
	}
	for _, i := range []int{3, 4} {
		if got[i] == got[0] || strings.HasPrefix(got[i], "refused") {
			t.Errorf("request %d is another request: %s", i, got[i])
		}
	}
	for i, why := range map[int]string{5: `/documents/0: in the nested parts of "documents": missing required member "file"`,
		6: "/documents/0/file (byte 19): in part \"documents\": is a file: send it as a file part of its own", 7: "must have at most 4 items"} {
		if !strings.Contains(got[i], why) {
			t.Errorf("request %d: %s, want a refusal naming %s", i, got[i], why)
		}
	}
}

// TestNestedFileDecoded: the handler gets each document's type and its file whole.
func TestNestedFileDecoded(t *testing.T) {
	for _, i := range []int{0, 1, 2} {
		c := filesCorpus[i]
		r, _, err := fptest.Decode(operationCreateExpectedPayment(), decodeCreateExpectedPayment, c.HTTP(), mt, []byte(c.Body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		d := r.Body.Documents
		if r.Body.AmountUpperBound != 5000 || len(d) != 2 ||
			d[0].DocumentType == nil || *d[0].DocumentType != "invoice" || d[0].File.Filename != "invoice.pdf" || d[0].File.ContentType != "application/pdf" || string(d[0].File.Data) != "%PDF-1.7 invoice" ||
			d[1].DocumentType == nil || *d[1].DocumentType != "receipt" || d[1].File.Filename != "receipt.png" || string(d[1].File.Data) != "\x89PNG receipt" {
			t.Errorf("request %d: %+v", i, r.Body)
		}
	}
}

// TestNestedFileServed: on PostgreSQL, the Stainless spelling runs once and its retry written
// with indices replays; behind runtime.Middleware the application's own handler reads the file
// parts as they were sent.
func TestNestedFileServed(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := 0
	mux := http.NewServeMux()
	err = Register(mux, rt, Handlers{
		CreateExpectedPayment: func(ctx context.Context, tx DBTX, _ CreateExpectedPaymentParams, b CreateExpectedPaymentBody) (runtime.Response, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			return runtime.Response{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}},
				Body: []byte(fmt.Sprintf("%d documents, first %s", len(b.Documents), b.Documents[0].File.Filename))}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("POST /app/expected_payments", http.StripPrefix("/app", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f := r.MultipartForm
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		fmt.Fprintf(w, "files=%d types=%q", len(f.File["documents[][file]"])+len(f.File["documents[0][file]"])+len(f.File["documents[1][file]"]), f.Value["documents[][document_type]"])
	}))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(path, key string, c fptest.Request) (int, string, string) {
		t.Helper()
		r, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(c.Body))
		r.Header.Set("Content-Type", mt+"; boundary="+boundary)
		r.Header.Set("Idempotency-Key", key)
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(runtime.HeaderReplayed), string(b)
	}
	if code, _, b := send("/api/expected_payments", "stainless-go-3f0c2a9e", filesCorpus[0]); code != 201 || b != "2 documents, first invoice.pdf" {
		t.Fatalf("first: %d %q", code, b)
	}
	if code, replayed, b := send("/api/expected_payments", "stainless-go-3f0c2a9e", filesCorpus[1]); code != 201 || replayed != "true" {
		t.Errorf("retry written with indices: %d replayed=%q %q", code, replayed, b)
	}
	if code, _, _ := send("/api/expected_payments", "stainless-go-3f0c2a9e", filesCorpus[3]); code != 422 {
		t.Errorf("retry with another file: %d, want 422", code)
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times", runs)
	}
	if code, _, b := send("/app/expected_payments", "stainless-go-77aa1c", filesCorpus[0]); code != 201 || b != `files=2 types=["invoice" "receipt"]` {
		t.Errorf("behind the middleware: %d %q", code, b)
	}
}
