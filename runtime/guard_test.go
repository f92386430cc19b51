package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// A router's route pattern and an operation's template are compared by shape: parameter
// segments in any router's syntax are one, names do not matter, catch-alls and trailing
// slashes are not parameters.
func TestRouteShape(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"/v1/payments/:id/refunds", "/v1/payments/{payment_id}/refunds"},
		{"/v1/payments/{id:pay_[0-9]+}/refunds", "/v1/payments/{payment_id}/refunds"},
		{"/v1/ops/:name", "/v1/ops/{id}:cancel"},
		{"/files/:f", "/files/{sid}.json"},
	} {
		if routeShape(tc.a) != routeShape(tc.b) {
			t.Errorf("%s and %s: shapes %s and %s, want the same", tc.a, tc.b, routeShape(tc.a), routeShape(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"/v1/payments/", "/v1/payments"},
		{"/v1/files/*path", "/v1/files/{path}"},
		{"/v1/files/{path...}", "/v1/files/{path}"},
		{"/V1/payments", "/v1/payments"},
	} {
		if routeShape(tc.a) == routeShape(tc.b) {
			t.Errorf("%s and %s have one shape %s, want different ones", tc.a, tc.b, routeShape(tc.a))
		}
	}
}

// guardOps are operations with path parameters through a Guard over memstore; the handler
// answers with the value the fingerprint framed for each parameter.
func guardOps() []Route {
	op := func(id, path string) Route {
		o := payOp()
		o.ID, o.Path = id, path
		return Route{Operation: o, Decode: func(in *gen.Input) error {
			_, err := decodePay(in)
			var vals []string
			for _, seg := range strings.Split(path, "/") {
				for _, name := range paramNames(seg) {
					vals = append(vals, name+"="+in.PathValue(name))
				}
			}
			in.Request.Header.Set("X-Framed", strings.Join(vals, ","))
			return err
		}}
	}
	return []Route{
		op("cancel", "/v1/ops/{id}:cancel"),
		op("undelete", "/v1/ops/{id}:undelete"),
		op("refund", "/v1/payments/{payment_id}/refunds"),
		op("pair", "/v1/pairs/{a}-{b}"),
	}
}

func paramNames(seg string) []string {
	var names []string
	for {
		open := strings.IndexByte(seg, '{')
		end := strings.IndexByte(seg, '}')
		if open < 0 || end < open {
			return names
		}
		names = append(names, seg[open+1:end])
		seg = seg[end+1:]
	}
}

// The Guard finds the operation of a route by shape, picks among operations of one shape by
// the literal text of the router's values, frames the values as the router decoded them, and
// answers 404 for values that fit no template of the route.
func TestGuardRoutesByShapeAndRouterValues(t *testing.T) {
	e := newMemEnv(t, nil)
	g, err := NewGuard[*memstore.DB](e.rt, guardOps())
	if err != nil {
		t.Fatal(err)
	}
	if g.Route("POST", "/v1/ops/:x") == nil || g.Route("GET", "/v1/ops/:x") != nil || g.Route("POST", "/v1/ops/*rest") != nil || g.Route("POST", "/v1/ops/:x/") != nil {
		t.Fatal("Route: want the ops route for POST /v1/ops/:x only")
	}
	serve := func(pattern, path, key string, params ...string) (*http.Request, int, string) {
		r := req("t1", key, body100)
		r.URL.Path = path
		route := g.Route("POST", pattern)
		if route == nil {
			t.Fatalf("no route for %s", pattern)
		}
		var ran string
		w := serveReqFunc(func(w http.ResponseWriter, r0 *http.Request) {
			g.Serve(w, r0, route, params, func(w http.ResponseWriter, r *http.Request) error {
				ran = r.Header.Get("X-Framed")
				w.WriteHeader(http.StatusCreated)
				return nil
			})
		}, r)
		return r, w.Code, ran
	}
	for _, tc := range []struct {
		pattern, path string
		params        []string
		status        int
		framed        string
	}{
		{"/v1/ops/:x", "/v1/ops/op1:cancel", []string{"op1:cancel"}, 201, "id=op1"},
		{"/v1/ops/:x", "/v1/ops/op1:undelete", []string{"op1:undelete"}, 201, "id=op1"},
		{"/v1/ops/:x", "/v1/ops/op1:explode", []string{"op1:explode"}, 404, ""},
		// The router's value, not the path's: a router that decoded "%5F" hands "_".
		{"/v1/payments/:id/refunds", "/v1/payments/pay%5F1/refunds", []string{"pay_1"}, 201, "payment_id=pay_1"},
		{"/v1/payments/:id/refunds", "/v1/payments/a/b/refunds", []string{"a/b"}, 201, "payment_id=a/b"},
		{"/v1/pairs/:p", "/v1/pairs/x-y-z", []string{"x-y-z"}, 201, "a=x,b=y-z"},
		{"/v1/payments/:id/refunds", "/v1/payments//refunds", []string{""}, 404, ""},
	} {
		_, status, framed := serve(tc.pattern, tc.path, fmt.Sprintf("k-guard-%s-%d", strings.ReplaceAll(tc.path, "/", ""), len(tc.params)), tc.params...)
		if status != tc.status || framed != tc.framed {
			t.Errorf("%s as %s %v: %d framed %q, want %d %q", tc.path, tc.pattern, tc.params, status, framed, tc.status, tc.framed)
		}
	}
}

// Exec's answers: nothing written is never stored (500, the key free), an error is a handler
// failure (500, the key free), an explicit status with no body is a response.
func TestGuardExecOutcomes(t *testing.T) {
	e := newMemEnv(t, nil)
	g, err := NewGuard[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay)})
	if err != nil {
		t.Fatal(err)
	}
	route := g.RouteByID("createPayment")
	runs := 0
	do := func(key string, exec Exec) int {
		return serveReqFunc(func(w http.ResponseWriter, r *http.Request) {
			g.Serve(w, r, route, nil, func(w http.ResponseWriter, r *http.Request) error {
				runs++
				return exec(w, r)
			})
		}, req("t1", key, body100)).Code
	}
	nothing := func(http.ResponseWriter, *http.Request) error { return nil }
	failing := func(http.ResponseWriter, *http.Request) error { return errors.New("render failed") }
	status := func(w http.ResponseWriter, _ *http.Request) error { w.WriteHeader(http.StatusNoContent); return nil }
	for _, tc := range []struct {
		name          string
		exec          Exec
		first, second int
	}{
		{"nothing written", nothing, 500, 204},
		{"error", failing, 500, 204},
	} {
		key := "k-guard-exec-" + strings.ReplaceAll(tc.name, " ", "-")
		if got := do(key, tc.exec); got != tc.first {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.first)
		}
		if got := do(key, status); got != tc.second {
			t.Errorf("%s, retry: %d, want %d (the key was free)", tc.name, got, tc.second)
		}
	}
	if got := do("k-guard-exec-status-only", status); got != 204 {
		t.Errorf("explicit status: %d, want 204", got)
	}
	before := runs
	if got := do("k-guard-exec-status-only", nothing); got != 204 || runs != before {
		t.Errorf("retry of the 204: %d after %d runs, want the replay without running", got, runs-before)
	}
	if !strings.Contains(e.logs.String(), ErrNoResponse.Error()) {
		t.Errorf("the log does not say the handler wrote nothing:\n%s", e.logs.String())
	}
}

func serveReqFunc(f http.HandlerFunc, r *http.Request) *httptest.ResponseRecorder {
	return serveReq(f, r)
}

// Do is the value-level way in: the chain's answer comes back as a Response and the answer to
// send goes out as one (the chain's response, a replay, or a problem), with nothing written
// anywhere; the chain gets the request as fingerprinted, with its transaction; the transaction
// is no longer the handler's once the chain has returned; a nested Do runs the chain directly.
func TestGuardDo(t *testing.T) {
	e := newMemEnv(t, nil)
	g, err := NewGuard[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay)})
	if err != nil {
		t.Fatal(err)
	}
	route := g.RouteByID("createPayment")
	runs := 0
	var kept *http.Request
	next := func(r *http.Request) (Response, error) {
		runs++
		kept = r
		db, ok := TxFrom[*memstore.DB](r.Context())
		if !ok {
			return Response{}, errors.New("no transaction")
		}
		var p payReq
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			return Response{}, err
		}
		p.Tenant = "t1"
		id := e.pay(db, &p)
		// A nested guard (an adapter mounted twice) runs the chain directly.
		inner := g.Do(r, route, nil, func(*http.Request) (Response, error) {
			return Response{Status: http.StatusCreated, Header: http.Header{"Location": {fmt.Sprint("/p/", id)}}, Body: []byte(fmt.Sprintf(`{"id":%d}`, id))}, nil
		})
		return inner, nil
	}
	first := g.Do(req("t1", key1, body100), route, nil, next)
	if first.Status != http.StatusCreated || string(first.Body) != `{"id":1}` || first.Header.Get("Location") != "/p/1" {
		t.Fatalf("first: %+v", first)
	}
	if _, ok := TxFrom[*memstore.DB](kept.Context()); ok {
		t.Error("TxFrom after the chain returned: the transaction is still handed out")
	}
	again := g.Do(req("t1", key1, body100), route, nil, next)
	if again.Status != http.StatusCreated || string(again.Body) != `{"id":1}` || again.Header.Get(HeaderReplayed) != "true" || runs != 1 {
		t.Errorf("retry: %+v after %d runs, want the replay without running", again, runs)
	}
	if got := g.Do(req("t1", "", body100), route, nil, next); got.Status != http.StatusBadRequest ||
		!strings.HasPrefix(got.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(string(got.Body), ProblemKeyMissing) {
		t.Errorf("no key: %d %v %s, want the 400 key-missing problem", got.Status, got.Header, got.Body)
	}
	nothing := func(*http.Request) (Response, error) {
		return Response{}, fmt.Errorf("rendered nothing: %w", ErrNoResponse)
	}
	if got := g.Do(req("t1", "k-guard-do-nothing-1", body100), route, nil, nothing); got.Status != http.StatusInternalServerError {
		t.Errorf("nothing answered: %d, want 500", got.Status)
	}
	if _, found := e.record("t1", "k-guard-do-nothing-1"); found || e.payments("t1") != 1 {
		t.Errorf("nothing answered: a record kept (%v) or payments %d, want none and 1", found, e.payments("t1"))
	}
}
