package runtime

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The spans of a new key, a replay, a handler failure and a refusal, as an OpenTelemetry
// exporter sees them: names, parents, the attributes operators filter on, and never the key.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	e := newMemEnv(t, func(c *Config) { c.TracerProvider = tp })
	h := e.atomicHandler(payOp())

	spans := func(run func()) tracetest.SpanStubs {
		exp.Reset()
		run()
		return exp.GetSpans()
	}
	names := func(ss tracetest.SpanStubs) string {
		var n []string
		for _, s := range ss {
			n = append(n, s.Name)
		}
		return strings.Join(n, " ")
	}
	attrs := func(s tracetest.SpanStub) map[attribute.Key]string {
		m := map[attribute.Key]string{}
		for _, a := range s.Attributes {
			m[a.Key] = a.Value.Emit()
		}
		return m
	}
	root := func(t *testing.T, ss tracetest.SpanStubs) tracetest.SpanStub {
		t.Helper()
		r := ss[len(ss)-1]
		if r.Name != spanRequest {
			t.Fatalf("last span %q, want %q", r.Name, spanRequest)
		}
		for _, s := range ss[:len(ss)-1] {
			if s.Parent.SpanID() != r.SpanContext.SpanID() {
				t.Errorf("span %s is not a child of %s", s.Name, spanRequest)
			}
		}
		for _, s := range ss {
			for _, a := range s.Attributes {
				if strings.Contains(a.Value.Emit(), key1) {
					t.Errorf("span %s attribute %s holds the raw key", s.Name, a.Key)
				}
			}
		}
		return r
	}

	ss := spans(func() { serveReq(h, req("t1", key1, body100)) })
	if got := names(ss); got != "idempotency.lookup idempotency.handler idempotency.complete idempotency" {
		t.Errorf("new key spans: %s", got)
	}
	r := attrs(root(t, ss))
	if r[attrOperation] != "createPayment" || r[attrMode] != "atomic" || r[attrOutcome] != "executed" || r[attrKeyHash] != keyHash("t1", key1) {
		t.Errorf("request span attributes %v", r)
	}

	ss = spans(func() { serveReq(h, req("t1", key1, body100)) })
	if got := names(ss); got != "idempotency.lookup idempotency" || attrs(root(t, ss))[attrOutcome] != "replayed" {
		t.Errorf("replay spans: %s %v", got, attrs(ss[len(ss)-1]))
	}

	ss = spans(func() { serveReq(h, req("t1", "k-test-0002-bbbbbbbbbbbb", body100, "X-Fail", "panic")) })
	var handler tracetest.SpanStub
	for _, s := range ss {
		if s.Name == spanHandler {
			handler = s
		}
	}
	if handler.Status.Code != codes.Error || len(handler.Events) == 0 {
		t.Errorf("a panicking handler's span: status %v, events %v", handler.Status, handler.Events)
	}
	if rs := root(t, ss); rs.Status.Code != codes.Error || attrs(rs)[attrOutcome] != "released" {
		t.Errorf("failed request span: %v %v", rs.Status, attrs(rs))
	}

	ss = spans(func() { serveReq(h, req("t1", "short", body100)) })
	if got := names(ss); got != "idempotency" || attrs(root(t, ss))[attrOutcome] != "key_invalid" {
		t.Errorf("refused request spans: %s %v", got, attrs(ss[0]))
	}
}
