package runtime

import (
	"io"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkReplay is the runtime's own cost of a replay (HTTP layer, decoder, fingerprint, the
// atomic machine) over the in-memory store, so that no database time hides it: with tracing
// off (a no-op TracerProvider; the global one before any is set, where the runtime starts no
// span) and with every span recorded by the SDK. Logs go to a handler at Info, as in
// production, where a replay logs nothing. Compare allocations per operation between revisions (bench/README.md).
func BenchmarkReplay(b *testing.B) {
	for _, tc := range []struct {
		name   string
		tracer func(*Config)
	}{
		{"untraced", func(c *Config) { c.TracerProvider = noop.NewTracerProvider() }},
		{"global", func(c *Config) {}},
		{"traced", func(c *Config) {
			c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newMemEnv(b, func(c *Config) {
				tc.tracer(c)
				c.Observer = NopObserver{}
				c.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})
			h := e.atomicHandler(payOp())
			if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 {
				b.Fatalf("first: %d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			for b.Loop() {
				if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" {
					b.Fatalf("replay: %d %v", w.Code, w.Header())
				}
			}
		})
	}
}
