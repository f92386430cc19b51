package runtime

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/store/memstore"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
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

// OpenTelemetry's default global provider is told apart by its type (isOTelDefault): this
// test process never sets a global provider, so otel.GetTracerProvider() is that default. It
// fails when an otel release renames or moves the type, when the runtime would trace through
// the default again.
func TestOTelDefaultProvider(t *testing.T) {
	if !isOTelDefault(otel.GetTracerProvider()) {
		t.Errorf("otel.GetTracerProvider() is %T: not recognised as OpenTelemetry's default", otel.GetTracerProvider())
	}
	if otel.GetTracerProvider() != otel.GetTracerProvider() {
		t.Error("otel.GetTracerProvider() returns a new value on each call: a set provider cannot be told from the default")
	}
	for _, tp := range []trace.TracerProvider{noop.NewTracerProvider(), sdktrace.NewTracerProvider(), nil} {
		if isOTelDefault(tp) {
			t.Errorf("%T taken for OpenTelemetry's default", tp)
		}
	}
}

// With no Config.TracerProvider and no global provider set, a request starts no span: the
// handler's context carries the caller's span itself, and a replay allocates no more than with
// a no-op provider. A provider set explicitly, even OpenTelemetry's default, is used as given.
func TestNoSpansWithoutGlobalProvider(t *testing.T) {
	quiet := func(c *Config) {
		c.Observer = NopObserver{}
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// handlerSpan serves a new key under a recording parent span (of a provider of the test's
	// own, not the global one) and returns the parent and the span the handler's context holds.
	handlerSpan := func(t *testing.T, tweak func(*Config)) (parent, inHandler trace.Span) {
		e := newMemEnv(t, tweak)
		h := AtomicHandler(e.rt, payOp(), BindAtomic(decodePay, func(ctx context.Context, db *memstore.DB, req *payReq) (Response, error) {
			inHandler = trace.SpanFromContext(ctx)
			return e.answer(ctx, req, e.pay(db, req))
		}))
		ctx, parent := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "caller")
		defer parent.End()
		if w := serveReq(h, req("t1", key1, body100).WithContext(ctx)); w.Code != 201 {
			t.Fatalf("first: %d %s", w.Code, w.Body)
		}
		return parent, inHandler
	}
	if parent, got := handlerSpan(t, quiet); got != parent {
		t.Errorf("global provider unset: the handler's context holds %T, not the caller's span: the runtime started one", got)
	}
	if parent, got := handlerSpan(t, func(c *Config) { quiet(c); c.TracerProvider = otel.GetTracerProvider() }); got == parent {
		t.Error("OpenTelemetry's default set as Config.TracerProvider: the runtime started no span through it")
	}

	replayAllocs := func(tweak func(*Config)) float64 {
		e := newMemEnv(t, tweak)
		h := e.atomicHandler(payOp())
		if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 {
			t.Fatalf("first: %d %s", w.Code, w.Body)
		}
		return testing.AllocsPerRun(200, func() {
			if w := serveReq(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
				t.Fatalf("not a replay: %d %v", w.Code, w.Header())
			}
		})
	}
	e := newMemEnv(t, quiet)
	if n := testing.AllocsPerRun(100, func() { e.rt.tracer.Start(context.Background(), spanLookup, internalSpan...) }); n != 0 {
		t.Errorf("with the global provider unset, starting no span allocates %v times", n)
	}
	global := replayAllocs(quiet)
	untraced := replayAllocs(func(c *Config) { quiet(c); c.TracerProvider = noop.NewTracerProvider() })
	if global > untraced {
		t.Errorf("a replay allocates %v times with the global provider unset, %v with a no-op provider", global, untraced)
	}
}

// envGlobalChild runs TestSpansGlobalProviderSetLater's body in a child process.
const envGlobalChild = "IDEMGEN_TRACE_GLOBAL_CHILD"

// A Runtime made before the application sets the global provider traces from that moment: the
// spans of a new key and of its replay, through OpenTelemetry's default, which forwards to the
// provider set. OpenTelemetry forwards only to the first provider ever set in a process, so the
// test runs in a child process of its own, where none was.
func TestSpansGlobalProviderSetLater(t *testing.T) {
	if os.Getenv(envGlobalChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpansGlobalProviderSetLater$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envGlobalChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSpansGlobalProviderSetLater") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	e := newMemEnv(t, nil)
	h := e.atomicHandler(payOp())
	if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 {
		t.Fatalf("before: %d %s", w.Code, w.Body)
	}

	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	const key2 = "k-test-0002-bbbbbbbbbbbb"
	for _, want := range []string{
		"idempotency.lookup idempotency.handler idempotency.complete idempotency",
		"idempotency.lookup idempotency",
	} {
		exp.Reset()
		serveReq(h, req("t1", key2, body100))
		var names []string
		for _, s := range exp.GetSpans() {
			names = append(names, s.Name)
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("spans %q, want %q", got, want)
		}
	}
}
