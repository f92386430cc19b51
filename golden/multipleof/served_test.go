package multipleof

// Hand-written test of the code generated for testdata/specs/multipleof.yaml, served on
// PostgreSQL (scripts/with-postgres.sh): a value that keeps multipleOf runs the handler (201)
// wherever it comes from, and one that breaks it is refused before the store is touched, as a
// 400 body-invalid at its pointer, exactly as a value above its maximum is.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// request is one request of the test: method POST, target, media type and body, and headers.
type request struct {
	name, target, ctype, body string
	header                    []string // name, value pairs
}

const check = "/batches/300/checks"

func jsonReq(name, target, body string, header ...string) request {
	return request{name, target, "application/json", body, header}
}

func formReq(name, body string) request {
	return request{name, "/letters", "application/x-www-form-urlencoded", body, nil}
}

// multipartReq is a createUpload request whose text parts are fields, name then value.
func multipartReq(name string, fields ...string) request {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		w.WriteField(fields[i], fields[i+1])
	}
	w.Close()
	return request{name, "/uploads", w.FormDataContentType(), b.String(), nil}
}

func TestMultipleOfServed(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	created := func() (runtime.Response, error) {
		runs.Add(1)
		return runtime.Response{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("created")}, nil
	}
	mux := http.NewServeMux()
	err = Register(mux, rt, Handlers{
		CreateCheck: func(context.Context, pgstore.DBTX, CreateCheckParams, CreateCheckBody) (runtime.Response, error) {
			return created()
		},
		CreateLetter: func(context.Context, pgstore.DBTX, CreateLetterParams, CreateLetterBody) (runtime.Response, error) {
			return created()
		},
		CreateUpload: func(context.Context, pgstore.DBTX, CreateUploadParams, CreateUploadBody) (runtime.Response, error) {
			return created()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	n := 0
	send := func(c request) (int, problem) {
		t.Helper()
		n++
		r, _ := http.NewRequest("POST", srv.URL+c.target, strings.NewReader(c.body))
		r.Header.Set("Content-Type", c.ctype)
		r.Header.Set("Idempotency-Key", fmt.Sprintf("multipleof-request-%04d", n))
		for i := 0; i+1 < len(c.header); i += 2 {
			r.Header.Set(c.header[i], c.header[i+1])
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var p problem
		if resp.StatusCode != 201 {
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatalf("%s: %d %q is no problem document", c.name, resp.StatusCode, b)
			}
		}
		return resp.StatusCode, p
	}

	for _, c := range []request{
		jsonReq("cents", check, `{"amount":19.99}`),
		jsonReq("cents at the maximum", check, `{"amount":999999.99}`),
		jsonReq("zero and negatives", check, `{"amount":-0.07,"serial":0,"lines":[-25,0,50]}`),
		jsonReq("exponent forms", check, `{"amount":1e2,"rate":3e-4,"lines":[1e2]}`),
		jsonReq("an even integer above 2^53", check, `{"amount":1,"serial":9007199254740994}`),
		jsonReq("every integer is a multiple of 0.5", check, `{"amount":1,"halves":7}`),
		jsonReq("parameters", "/batches/1200/checks?step=-30&copies=9", `{"amount":1}`, "X-Precision", "0.75"),
		jsonReq("the oneOf's other member", check+"?copies=none", `{"amount":1}`),
		formReq("form", "amount=19.99&sheets=4"),
		multipartReq("multipart", "amount", "0.30", "pages", "6"),
	} {
		if code, p := send(c); code != 201 {
			t.Errorf("%s: %d %+v, want 201", c.name, code, p)
		}
	}
	ran := runs.Load()
	if ran != 10 {
		t.Fatalf("the handlers ran %d times for 10 valid requests", ran)
	}

	// A maximum violation first: each multipleOf refusal below must look the same.
	const above = "must be at most 999999.99"
	for _, tt := range []struct {
		req              request
		pointer, because string
	}{
		{jsonReq("above the maximum", check, `{"amount":1000000}`), "/amount", above},
		{formReq("form above the maximum", "amount=1000000"), "/amount", above},
		{jsonReq("a tenth of a cent", check, `{"amount":19.999}`), "/amount", "must be a multiple of 0.01"},
		{jsonReq("0.1+0.2 as a double computes it", check, `{"amount":0.30000000000000004}`), "/amount", "must be a multiple of 0.01"},
		{jsonReq("an odd integer above 2^53", check, `{"amount":1,"serial":9007199254740993}`), "/serial", "must be a multiple of 2"},
		{jsonReq("an array item", check, `{"amount":1,"lines":[25,30]}`), "/lines/1", "must be a multiple of 25"},
		{jsonReq("a rate below its step", check, `{"amount":1,"rate":0.00005}`), "/rate", "must be a multiple of 0.0001"},
		{jsonReq("path parameter", "/batches/250/checks", `{"amount":1}`), "/path/batch", `path parameter "batch": must be a multiple of 100`},
		{jsonReq("query parameter", check+"?step=15", `{"amount":1}`), "/query/step", `query parameter "step": must be a multiple of 10`},
		{jsonReq("header parameter", check, `{"amount":1}`, "X-Precision", "0.1"), "/header/X-Precision", "must be a multiple of 0.25"},
		{jsonReq("oneOf member", check+"?copies=10", `{"amount":1}`), "/query/copies", "must be a multiple of 3; or must be one of"},
		{formReq("form field", "amount=19.995"), "/amount", "must be a multiple of 0.01"},
		{formReq("form integer", "amount=1&sheets=3"), "/sheets", "must be a multiple of 2"},
		{multipartReq("multipart part", "amount", "0.333"), "/amount", "must be a multiple of 0.01"},
		{multipartReq("multipart integer", "amount", "1", "pages", "5"), "/pages", "must be a multiple of 2"},
	} {
		code, p := send(tt.req)
		if code != 400 || !strings.HasSuffix(p.Type, "/"+runtime.ProblemBodyInvalid) || p.Status != 400 ||
			p.Pointer != tt.pointer || !strings.Contains(p.Detail, tt.because) {
			t.Errorf("%s: %d %+v, want 400 body-invalid at %s saying %q", tt.req.name, code, p, tt.pointer, tt.because)
		}
	}
	if got := runs.Load(); got != ran {
		t.Errorf("the handlers ran for %d refused requests", got-ran)
	}
	var records int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records").Scan(&records); err != nil {
		t.Fatal(err)
	}
	if records != int(ran) {
		t.Errorf("%d records for %d requests the handlers ran: a refused request was stored", records, ran)
	}
}

// problem is the default problem document (runtime.ProblemJSON).
type problem struct {
	Type    string `json:"type"`
	Status  int    `json:"status"`
	Detail  string `json:"detail"`
	Pointer string `json:"pointer"`
}
