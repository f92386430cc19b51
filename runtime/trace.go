package runtime

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
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

// storeCall runs one store call f under its own span and bounded by Config.StoreTimeout plus
// extra (a claim may also wait for a concurrent one). name == spanLookup also reports the claim
// latency to the Observer.
func (x *exchange) storeCall(ctx context.Context, name string, extra time.Duration, f func(context.Context) error) error {
	ctx, span := x.rt.tracer.Start(ctx, name, internalSpan...)
	ctx, cancel := context.WithTimeout(ctx, x.rt.cfg.StoreTimeout+extra)
	start := time.Now()
	err := f(ctx)
	cancel()
	if name == spanLookup {
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
