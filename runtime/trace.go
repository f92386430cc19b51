package runtime

import (
	"context"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// Spans of one request (OpenTelemetry), children of the caller's span. They carry the
// operation, the mode and a hash of the key, never the key itself.
const (
	spanRequest  = "idempotency"          // the whole request through the runtime; its outcome
	spanLookup   = "idempotency.lookup"   // the key's record read, and the claim when the store makes both in one call
	spanClaim    = "idempotency.claim"    // a claim made apart from the lookup (a takeover, a confirmed claim)
	spanBegin    = "idempotency.begin"    // the transaction of a request without a key (unguarded)
	spanHandler  = "idempotency.handler"  // the handler (lease mode: its call phase)
	spanComplete = "idempotency.complete" // the response stored and committed, or the claim released
)

// Span attribute keys.
const (
	attrOperation = attribute.Key("idempotency.operation")
	attrMode      = attribute.Key("idempotency.mode")
	attrOutcome   = attribute.Key("idempotency.outcome")
	attrKeyHash   = attribute.Key("idempotency.key_hash")
)

// internalSpan are the start options of the runtime's child spans, shared by every call so
// that starting one allocates nothing of ours. Never modified.
var internalSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

// tracerName is the instrumentation scope of the runtime's spans.
const tracerName = "github.com/idemgen/idemgen/runtime"

// newTracer is the tracer of the runtime's spans: tp's, when Config.TracerProvider is set (given);
// otherwise the global provider's, which starts no span while that provider is still
// OpenTelemetry's default (see globalTracer).
func newTracer(tp trace.TracerProvider, given bool) trace.Tracer {
	if given || !isOTelDefault(tp) {
		return tp.Tracer(tracerName)
	}
	return &globalTracer{unset: tp, tracer: tp.Tracer(tracerName)}
}

// globalTracer starts the runtime's spans through OpenTelemetry's default global provider, the
// one otel.GetTracerProvider returns until the application calls otel.SetTracerProvider. That
// provider's tracers make a non-recording span and a new context for every span until then,
// which costs a request allocations for nothing: globalTracer starts none, and hands back the
// caller's context unchanged (a handler's context carries the caller's span). Once a provider is
// set, it starts every span through the default's tracer, which OpenTelemetry forwards to the
// first provider set in the process; an application that sets the default back gets no span.
type globalTracer struct {
	embedded.Tracer
	// unset is the default provider: while otel.GetTracerProvider still returns it, no
	// provider has been set. Its dynamic type is a pointer, so comparing it never panics.
	unset  trace.TracerProvider
	tracer trace.Tracer // unset's tracer
}

// noSpan is the span of a request that starts none: it records nothing, and ending it ends
// nothing of the caller's. Never modified.
var noSpan trace.Span = noop.Span{}

// Start starts a span through the provider set, or none while none is set. The check is an
// atomic load and a comparison: it allocates nothing.
func (t *globalTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if otel.GetTracerProvider() == t.unset {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, name, opts...)
}

// isOTelDefault reports whether tp is OpenTelemetry's default global provider, the one
// otel.GetTracerProvider returns before any otel.SetTracerProvider. OpenTelemetry documents no
// way to ask this: the default is the unexported tracerProvider of its internal/global package,
// so this is a type check by name. Should a release rename or move that type, it answers false
// and the runtime traces through the default as it did (each span's allocations, no span lost);
// TestOTelDefaultProvider fails then.
func isOTelDefault(tp trace.TracerProvider) bool {
	t := reflect.TypeOf(tp)
	return t != nil && t.Kind() == reflect.Pointer &&
		t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" && t.Elem().Name() == "tracerProvider"
}

// storeCall runs one store call f under its own span and bounded by Config.StoreTimeout plus
// extra (a claim may also wait for a concurrent one). name == spanLookup also reports the claim
// latency to the Observer, when there is one.
func (x *exchange) storeCall(ctx context.Context, name string, extra time.Duration, f func(context.Context) error) error {
	ctx, span := x.rt.tracer.Start(ctx, name, internalSpan...)
	ctx, cancel := context.WithTimeout(ctx, x.rt.cfg.StoreTimeout+extra)
	// The clock is read for the Observer only: without one (NopObserver) nothing is timed.
	timed := name == spanLookup && x.rt.observed
	var start time.Time
	if timed {
		start = time.Now()
	}
	err := f(ctx)
	cancel()
	if timed {
		x.rt.obs.ClaimLatency(x.op.ID, x.op.Mode, time.Since(start))
	}
	endSpan(span, err)
	return err
}

// endSpan ends span, marking it failed with err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "")
	}
	span.End()
}
