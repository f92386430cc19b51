package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the graceful shutdown of a Runtime (a rolling restart's SIGTERM): what it stops
// taking, what it lets finish, and what it hands over at its deadline, so that a retry on
// another replica proceeds at once instead of meeting a claim this process can no longer
// complete (a lease-mode key would answer 409 for the rest of its lease).

// ErrShuttingDown is the cause (context.Cause) of a handler's context that Runtime.Shutdown
// canceled at its deadline: the process is leaving, and what the request holds was handed
// over (a lease ended, so that the retry takes it over) or is rolled back with the handler's
// transaction. The handler should return.
var ErrShuttingDown = errors.New("runtime: the process is shutting down")

// drain is a Runtime's record of the requests it runs, for Shutdown. The zero value is
// ready to use.
type drain struct {
	mu sync.Mutex
	// closing: Shutdown has begun; no new key is claimed.
	closing bool
	running map[*flight]struct{}
	// idle, while Shutdown waits, is closed when running becomes empty.
	idle chan struct{}
}

// flight is one request to a marked operation that the runtime is running. It lives in the
// request's exchange, so that tracking a request costs no allocation: a replay or a refusal
// pays for none of what follows, which only a request that runs a handler needs.
type flight struct {
	// cancels are the cancel functions of the contexts the request's handler runs under
	// (cancelable): the handler phases of its mode, attached to the client or detached from it
	// (exchange.detach). Shutdown's deadline cancels them. Guarded by drain.mu; cancelBuf backs
	// the first two (a lease-mode request's call and completion phases).
	cancels   []context.CancelCauseFunc
	cancelBuf [2]context.CancelCauseFunc
	// handover, while set, gives back what the request holds in the store that its canceled
	// handler might not (a lease-mode call phase: the lease ends now). It is called at most
	// once, under drain.mu's protection of the field.
	handover func(context.Context) error
	// shut: Shutdown's deadline canceled the request's handler (a store call it cut short
	// answers endDraining: nothing ran).
	shut atomic.Bool
}

// enter records f, a request that starts to run, until leave. A handler it runs gets a context
// from cancelable, which Shutdown's deadline cancels with ErrShuttingDown.
func (d *drain) enter(f *flight) {
	f.cancels = f.cancelBuf[:0]
	d.mu.Lock()
	if d.running == nil {
		d.running = make(map[*flight]struct{})
	}
	d.running[f] = struct{}{}
	d.mu.Unlock()
}

// cancelable returns ctx canceled with ErrShuttingDown when Shutdown's deadline passes, for a
// handler of f to run under. A handler detached from its client (execution.detach) gets it too:
// an operation that finishes what it accepted outlives its client, not the process. ctx alone
// for a request the drain does not track (f nil).
func (d *drain) cancelable(f *flight, ctx context.Context) context.Context {
	if f == nil {
		return ctx
	}
	ctx, cancel := context.WithCancelCause(ctx)
	d.mu.Lock()
	f.cancels = append(f.cancels, cancel)
	d.mu.Unlock()
	if f.shut.Load() {
		cancel(ErrShuttingDown) // handed over while it was being made
	}
	return ctx
}

// leave records that f has ended.
func (d *drain) leave(f *flight) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cancel := range f.cancels {
		cancel(nil)
	}
	f.cancels = nil
	delete(d.running, f)
	if len(d.running) == 0 && d.idle != nil {
		close(d.idle)
		d.idle = nil
	}
}

// refusing reports whether Shutdown has begun: a request that would claim a new key (or run
// a handler without one) is refused.
func (d *drain) refusing() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closing
}

// holding sets (fn) or clears (nil) what f hands over at the deadline.
func (d *drain) holding(f *flight, fn func(context.Context) error) {
	if f == nil {
		return
	}
	d.mu.Lock()
	f.handover = fn
	d.mu.Unlock()
}

// Shutdown drains rt for a process that is leaving (SIGTERM in a rolling restart); call it when
// the server stops accepting connections (ShutdownServer does both). From the call on, a request
// whose key has no live record, or that has no key, is refused before anything runs: 503
// store-unavailable ("this server is shutting down; not processed") with Retry-After and
// Connection: close, so that its retry goes to another replica; a key with a record is still
// answered (replay, 422, 409). The requests already running go on until ctx ends. Then each is
// handed over: a lease-mode request in its call phase has its lease ended at once (the store's
// Extend to zero), so that the retry of the same request takes it over on another replica
// without waiting for the lease to run out (the provider deduplicates the call on ProviderKey;
// another request under the key still gets 422); and every running handler's context is
// canceled with cause ErrShuttingDown, so that an atomic-mode transaction rolls back and frees
// its key. Shutdown then waits up to Config.StoreTimeout for those requests to end.
//
// It returns nil when no request was running at ctx's end, or an error naming how many were
// handed over (wrapping ctx's cause). A Runtime that has shut down keeps refusing new keys.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	d := &rt.drain
	d.mu.Lock()
	d.closing = true
	if len(d.running) == 0 {
		d.mu.Unlock()
		return nil
	}
	if d.idle == nil {
		d.idle = make(chan struct{})
	}
	idle := d.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	d.mu.Lock()
	flights := make([]*flight, 0, len(d.running))
	for f := range d.running {
		flights = append(flights, f)
	}
	d.mu.Unlock()
	for _, f := range flights {
		rt.handOver(f)
	}
	timer := time.NewTimer(rt.cfg.StoreTimeout)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
	}
	return fmt.Errorf("runtime: shutdown: %d requests still running at the deadline were handed over: %w", len(flights), context.Cause(ctx))
}

// handOver gives back what f holds in the store, then cancels its handler.
func (rt *Runtime) handOver(f *flight) {
	rt.drain.mu.Lock()
	fn := f.handover
	f.handover = nil
	rt.drain.mu.Unlock()
	if fn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.StoreTimeout)
		if err := fn(ctx); err != nil {
			rt.log.LogAttrs(ctx, slog.LevelWarn, "shutdown: handing over a lease failed; it ends on its own", slog.Any("error", err))
		}
		cancel()
	}
	f.shut.Store(true)
	rt.drain.mu.Lock()
	cancels := append([]context.CancelCauseFunc(nil), f.cancels...)
	rt.drain.mu.Unlock()
	for _, cancel := range cancels {
		cancel(ErrShuttingDown)
	}
}

// ShutdownServer shuts srv and rt down together: srv stops accepting connections and rt stops
// taking new keys at once, the requests running go on until ctx ends, and then rt hands over
// what they hold (Runtime.Shutdown). It returns once both are done: srv.Shutdown's error, else
// rt.Shutdown's. Use it where the process would call srv.Shutdown on SIGTERM:
//
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
//	defer stop()
//	go srv.ListenAndServe()
//	<-ctx.Done()
//	drain, cancel := context.WithTimeout(context.Background(), 20*time.Second) // within the orchestrator's grace period
//	defer cancel()
//	err := rt.ShutdownServer(drain, srv)
func (rt *Runtime) ShutdownServer(ctx context.Context, srv *http.Server) error {
	drained := make(chan error, 1)
	go func() { drained <- rt.Shutdown(ctx) }()
	err := srv.Shutdown(ctx)
	derr := <-drained
	if derr != nil && (err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return derr // the deadline, said with what was handed over
	}
	return err
}
