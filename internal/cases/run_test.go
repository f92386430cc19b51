package cases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func write(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run parses src and runs it against handler; it returns the runner's error.
func run(t *testing.T, handler http.Handler, src string) error {
	t.Helper()
	c, err := Parse("case.yaml", "042-case", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	return (&Runner{BaseURL: srv.URL}).Run(context.Background(), c)
}

// fixed answers every request with one response.
func fixed(status int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

const one = "steps:\n  - request: {method: POST, path: /x}\n    expect: "

// TestExpectations runs one-step cases against fixed responses: each row proves that a kind of
// expectation passes when it holds and fails, with a message saying what came back, when not.
func TestExpectations(t *testing.T) {
	problem := map[string]string{"Content-Type": "application/problem+json; charset=utf-8"}
	tests := []struct {
		name    string
		h       http.Handler
		expect  string
		wantErr string // "" means the case must pass
	}{
		{"status ok", fixed(201, nil, ""), "{status: 201}", ""},
		{"status wrong", fixed(500, nil, "boom"), "{status: 201}", "status: want 201, got 500"},
		{"header present", fixed(201, map[string]string{"Location": "/x/1"}, ""), "{headers: {location: present}}", ""},
		{"header present missing", fixed(201, nil, ""), "{headers: {Location: present}}", "header Location: want present, got absent"},
		{"header absent", fixed(201, nil, ""), "{headers: {Idempotent-Replayed: absent}}", ""},
		{"header absent but there", fixed(201, map[string]string{"Idempotent-Replayed": "true"}, ""), "{headers: {Idempotent-Replayed: absent}}", `want absent, got "true"`},
		{"header value exact", fixed(201, map[string]string{"Idempotent-Replayed": "true"}, ""), `{headers: {IDEMPOTENT-REPLAYED: "true"}}`, ""},
		{"header value differs", fixed(201, map[string]string{"Idempotent-Replayed": "TRUE"}, ""), `{headers: {Idempotent-Replayed: "true"}}`, `want "true", got "TRUE"`},
		{"content type without params", fixed(422, problem, ""), "{headers: {Content-Type: application/problem+json}}", ""},
		{"content type differs", fixed(422, map[string]string{"Content-Type": "application/json"}, ""), "{headers: {Content-Type: application/problem+json}}", `want media type "application/problem+json", got "application/json"`},
		{"body subset", fixed(201, nil, `{"amount":1500,"currency":"EUR","id":"p1","nested":{"a":[1,{"b":2}]}}`), "{body: {amount: 1500, nested: {a: [1, {b: 2}]}}}", ""},
		{"body number spelling", fixed(201, nil, `{"price":10.50}`), "{body: {price: 1.05e1}}", ""},
		{"body big integer exact", fixed(201, nil, `{"n":9007199254740993}`), "{body: {n: 9007199254740992}}", "body/n: want 9007199254740992, got 9007199254740993"},
		{"body member missing", fixed(201, nil, `{"amount":1500}`), "{body: {currency: EUR}}", "body/currency: missing"},
		{"body value differs", fixed(201, nil, `{"amount":"1500"}`), "{body: {amount: 1500}}", `body/amount: want 1500, got "1500"`},
		{"body array length", fixed(201, nil, `{"a":[1,2,3]}`), "{body: {a: [1, 2]}}", "body/a: want [1,2]"},
		{"body not json", fixed(201, nil, `oops`), "{body: {a: 1}}", "got no JSON"},
		{"problem ok", fixed(422, problem, `{"type":"https://idemgen.dev/problems/payload-mismatch","status":422}`), "{status: 422, problem: payload-mismatch}", ""},
		{"problem other name", fixed(422, problem, `{"type":"https://idemgen.dev/problems/in-flight"}`), "{problem: payload-mismatch}", `want type ending in "payload-mismatch"`},
		{"problem needs boundary", fixed(422, problem, `{"type":"https://x/not-payload-mismatch"}`), "{problem: payload-mismatch}", `want type ending in "payload-mismatch"`},
		{"problem wrong media type", fixed(422, map[string]string{"Content-Type": "application/json"}, `{"type":"/payload-mismatch"}`), "{problem: payload-mismatch}", "want Content-Type application/problem+json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t, tc.h, one+tc.expect+"\n")
			checkErr(t, err, tc.wantErr)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("want pass, got %v", err)
		}
		return
	}
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("want a *Failure containing %q, got %v", want, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("failure %q\ndoes not contain %q", err, want)
	}
}

func TestFailureNamesCaseStepAndResponse(t *testing.T) {
	src := "steps:\n  - request: {method: POST, path: /a}\n    expect: {status: 200}\n" +
		"  - request: {method: POST, path: /b}\n    expect: {status: 201, headers: {Location: present}}\n"
	err := run(t, fixed(200, map[string]string{"X-Seen": "yes"}, `{"ok":true}`), src)
	for _, want := range []string{"case 042-case (case.yaml:4) failed at step 1, POST /b", "status: want 201, got 200", "header Location: want present", "X-Seen: yes", `{"ok":true}`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("failure %v\ndoes not contain %q", err, want)
		}
	}
}

// The request side: list header values go out as separate lines, empty values are sent,
// bodies are sent byte for byte, and ${N.field} reaches path, header and body.
func TestRequestsAreSentAsWritten(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	var bodies []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen, bodies = append(seen, r), append(bodies, string(b))
		mu.Unlock()
		io.WriteString(w, `{"id":"pay_7","n":12,"obj":{"k":"v"}}`)
	})
	src := `
steps:
  - request:
      method: POST
      path: /v1/p
      headers: {Idempotency-Key: [first-key-aaaaaaa, second-key-bbbbbbb], X-Empty: "", X-Num: 500}
      body_base64: /w==
    expect: {status: 200}
  - request:
      method: PUT
      path: /v1/p/${0.id}/r
      headers: {X-Ref: "${0.n}", X-Obj: "${0.obj.k}"}
      body: '{"p": "${0.id}"}'
    expect: {status: 200}
`
	if err := run(t, h, src); err != nil {
		t.Fatal(err)
	}
	if got := seen[0].Header.Values("Idempotency-Key"); len(got) != 2 || got[0] != "first-key-aaaaaaa" || got[1] != "second-key-bbbbbbb" {
		t.Errorf("key lines = %q, want two lines", got)
	}
	if v, ok := seen[0].Header["X-Empty"]; !ok || len(v) != 1 || v[0] != "" {
		t.Errorf("X-Empty = %q, %v; want one empty line", v, ok)
	}
	if seen[0].Header.Get("X-Num") != "500" || bodies[0] != "\xff" {
		t.Errorf("X-Num = %q, body %q", seen[0].Header.Get("X-Num"), bodies[0])
	}
	r1 := seen[1]
	if r1.Method != "PUT" || r1.URL.Path != "/v1/p/pay_7/r" || r1.Header.Get("X-Ref") != "12" || r1.Header.Get("X-Obj") != "v" || bodies[1] != `{"p": "pay_7"}` {
		t.Errorf("step 1 sent %s %s X-Ref=%q X-Obj=%q body %q", r1.Method, r1.URL.Path, r1.Header.Get("X-Ref"), r1.Header.Get("X-Obj"), bodies[1])
	}
}

func TestUnresolvableReferenceFails(t *testing.T) {
	src := "steps:\n  - request: {method: POST, path: /a}\n    expect: {status: 200}\n" +
		"  - request: {method: POST, path: '/b/${0.id}'}\n    expect: {status: 200}\n"
	err := run(t, fixed(200, nil, `{"other":1}`), src)
	checkErr(t, err, "${0.id}: step 0's body has no id")
}

func TestSameAs(t *testing.T) {
	n := 0
	var mu sync.Mutex
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		switch r.URL.Path {
		case "/same":
			w.WriteHeader(201)
			io.WriteString(w, `{"id":"a"}`)
		case "/other-status":
			w.WriteHeader(200)
			io.WriteString(w, `{"id":"a"}`)
		default: // same JSON value, different bytes: same_as compares bytes
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"id": "a"}%s`, strings.Repeat(" ", i%2))
		}
	})
	base := "steps:\n  - request: {method: POST, path: /same}\n    expect: {status: 201}\n  - request: {method: POST, path: %s}\n    expect: {same_as: 0}\n"
	checkErr(t, run(t, h, fmt.Sprintf(base, "/same")), "")
	checkErr(t, run(t, h, fmt.Sprintf(base, "/other-status")), "same_as 0: status 200, step 0 had 201")
	checkErr(t, run(t, h, fmt.Sprintf(base, "/bytes")), "same_as 0: body differs")
}

// fakeParallel answers copies of one request: the first gets 201, then replays or 409s as
// the test configures, like an idempotent endpoint under a storm of duplicates.
func fakeParallel(later func(i int, w http.ResponseWriter)) http.Handler {
	var mu sync.Mutex
	n := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		if i == 0 {
			w.WriteHeader(201)
			return
		}
		later(i, w)
	})
}

func conflict(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(409)
	io.WriteString(w, `{"type":"https://idemgen.dev/problems/in-flight"}`)
}

func replay(w http.ResponseWriter) {
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(201)
}

func TestParallelCounts(t *testing.T) {
	storm := "steps:\n  - request: {method: POST, path: /x}\n    parallel: 10\n    expect:\n      %s\n"
	mixed := func() http.Handler {
		return fakeParallel(func(i int, w http.ResponseWriter) {
			if i%2 == 0 {
				replay(w)
			} else {
				conflict(w)
			}
		})
	}
	only := func(later func(int, http.ResponseWriter)) func() http.Handler {
		return func() http.Handler { return fakeParallel(later) }
	}
	tests := []struct {
		name    string
		h       func() http.Handler
		expect  string
		wantErr string
	}{
		{"one new, rest conflict or replay", mixed, `statuses: {201: 1, "409|replayed": rest}`, ""},
		{"replays are not counted as 201", only(func(_ int, w http.ResponseWriter) { w.WriteHeader(201) }), `statuses: {201: 1, "409|replayed": rest}`, `statuses 201: want 1, got 10`},
		{"replay under its code fails", only(func(_ int, w http.ResponseWriter) { replay(w) }), `statuses: {201: 1, 409: rest}`, "statuses: 9 responses counted by no entry"},
		{"exact counts", only(func(_ int, w http.ResponseWriter) { conflict(w) }), `statuses: {201: 1, 409: 9}`, ""},
		{"exact counts wrong", mixed, `statuses: {201: 1, 409: 9}`, "statuses 409: want 9, got 5"},
		{"distribution shown", mixed, `statuses: {201: 2, "409|replayed": rest}`, "got: 201 x1, 409 x5, replayed 201 x4"},
		{"each holds", mixed, `statuses: {201: 1, "409|replayed": rest}` + "\n      each: {409: {problem: in-flight, headers: {Retry-After: present}}}", ""},
		{"each fails", only(func(_ int, w http.ResponseWriter) { w.WriteHeader(409) }), `statuses: {201: 1, 409: rest}` + "\n      each: {409: {headers: {Retry-After: present}}}", "(each 409): header Retry-After: want present"},
		{"each ignores other classes", mixed, "each: {replayed: {headers: {Idempotent-Replayed: \"true\"}}, 201: {headers: {Idempotent-Replayed: absent}}}", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, run(t, tc.h(), fmt.Sprintf(storm, tc.expect)), tc.wantErr)
		})
	}
}

// The parallel copies really are in flight together: a server that holds each request until
// all ten arrived would deadlock a runner that sends them one by one.
func TestParallelCopiesAreConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			w.WriteHeader(201)
		case <-time.After(10 * time.Second):
			w.WriteHeader(504)
		}
	})
	src := "steps:\n  - request: {method: POST, path: /x}\n    parallel: 10\n    expect: {statuses: {201: 10}}\n"
	checkErr(t, run(t, h, src), "")
}

func TestWaitPausesBeforeTheStep(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
	})
	src := "steps:\n  - request: {method: GET, path: /x}\n    expect: {status: 200}\n  - request: {method: GET, path: /x}\n    wait: 300ms\n    expect: {status: 200}\n"
	checkErr(t, run(t, h, src), "")
	if d := at[1].Sub(at[0]); d < 300*time.Millisecond {
		t.Errorf("second request %v after the first, want at least the 300ms wait", d)
	}
}

// effectsService counts POSTs per Authorization value and serves them on GET /_effects.
type effectsService struct {
	mu      sync.Mutex
	counts  map[string]int64
	tenants []string
}

func (s *effectsService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.URL.Path == "/_effects" {
		json.NewEncoder(w).Encode(map[string]int64{"payments": s.counts[tenant], "refunds": 0})
		return
	}
	s.counts[tenant]++
	s.tenants = append(s.tenants, tenant)
	w.WriteHeader(201)
}

func TestFreshTenantsAndEffects(t *testing.T) {
	src := `
steps:
  - request: {method: POST, path: /p, headers: {Authorization: Bearer t1}}
    expect: {status: 201}
  - request: {method: POST, path: /p, headers: {authorization: Bearer t2}}
    expect: {status: 201}
  - request: {method: POST, path: /p, headers: {Authorization: Bearer t2}}
    expect: {status: 201}
effects: {payments: 1, refunds: 0}
effects_by_tenant: {t2: {payments: 2}}
`
	svc := &effectsService{counts: map[string]int64{"t1": 5}} // data already in the database
	checkErr(t, run(t, svc, src), "")
	if len(svc.tenants) != 3 || svc.tenants[0] == "t1" || !strings.HasSuffix(svc.tenants[0], "-t1") || svc.tenants[1] == svc.tenants[0] {
		t.Fatalf("tenants sent = %q, want fresh names for t1 and t2", svc.tenants)
	}
	first := svc.tenants[0]
	// A second run of the same case gets new tenants, so it passes again.
	checkErr(t, run(t, svc, src), "")
	if svc.tenants[3] == first {
		t.Errorf("second run reused tenant %q", first)
	}

	bad := strings.Replace(src, "effects: {payments: 1, refunds: 0}", "effects: {payments: 2, charges: 0}", 1)
	err := run(t, svc, bad)
	checkErr(t, err, "failed at effects")
	for _, want := range []string{"t1.payments: want 2, got 1", "t1.charges: want 0, the service reports no such counter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("failure %q does not contain %q", err, want)
		}
	}
}

func TestUnreachableServiceIsAFailure(t *testing.T) {
	c, err := Parse("case.yaml", "001-x", []byte(one+"{status: 201}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	err = (&Runner{BaseURL: srv.URL}).Run(context.Background(), c)
	checkErr(t, err, "send:")
}
