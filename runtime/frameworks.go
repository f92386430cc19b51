package runtime

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
)

// Web frameworks that route requests and render their handlers' errors on their own cannot be
// guarded by Middleware, a net/http middleware, without losing the contract:
//
//   - inside the framework's handler chain, through the framework's generic net/http bridge,
//     the handler does not answer into the writer the middleware hands on, or not while the
//     middleware waits: echo.WrapMiddleware renders a handler's returned error after the
//     middleware has finished; a gin shim that calls c.Next() from the wrapped handler writes
//     to gin's own writer, straight to the client; fiber's adaptor.HTTPMiddleware runs the
//     fiber handler only after the middleware returned;
//   - around the framework's whole engine (runtime.Middleware(...)(e), (...)(r) for a gin
//     Engine) the middleware matches paths by the operations' templates while the framework
//     routes by its own rules (echo routes on the escaped path, gin redirects a trailing slash
//     with a 307), so it would guard requests the framework does not route to the operation
//     and store the framework's 404 or redirect.
//
// Middleware refuses such a setup loudly: every request to a marked operation is answered 500
// problem `internal` before anything runs or is stored, and logged with the adapter to use
// instead (github.com/idemgen/idemgen/adapters/echo, .../adapters/gin, .../adapters/fiber,
// .../adapters/fiberv3), which routes and renders the framework's own way. It finds the setup two ways:
//
//   - by behaviour, whatever wraps the writer or the request (otelhttp, a logging middleware):
//     the wrapped handler wrote to the client's writer rather than to the one it was handed,
//     wrote to the one it was handed after it had returned, asked for the transaction or
//     lease after it had returned, or answered a success (2xx) without taking either while no
//     router named the operation's route (fiber's adaptor.FiberApp: a fiber app behind the
//     middleware, whose handlers never see the request's context). The request that shows it is failed (rolled back, the key
//     released, 500, logged), and so is every later request through that mounting, before
//     anything runs: the mounting has shown it cannot keep the contract.
//   - before the first request, where the framework is in sight: the wrapped handler is a
//     framework's engine, or the writer (unwrapped as http.ResponseController unwraps it) or
//     the request's context is a framework's own. The frameworks are recognised by their
//     types' package paths, so the runtime does not import them.

const (
	echoPackage     = "github.com/labstack/echo/"
	ginPackage      = "github.com/gin-gonic/gin"
	fasthttpPackage = "github.com/valyala/fasthttp"

	useEcho  = "mount idemecho.Middleware (github.com/idemgen/idemgen/adapters/echo) on the routes or groups of the marked operations instead"
	useGin   = "mount idemgin.Middleware (github.com/idemgen/idemgen/adapters/gin) on the routes or groups of the marked operations instead"
	useFiber = "mount idemfiber.Middleware (github.com/idemgen/idemgen/adapters/fiber for fiber v2, .../adapters/fiberv3 for fiber v3) on the routes, groups or app of the marked operations instead"
	useAny   = "mount the framework's adapter instead: idemecho.Middleware (github.com/idemgen/idemgen/adapters/echo), idemgin.Middleware (.../adapters/gin) or idemfiber.Middleware (.../adapters/fiber, .../adapters/fiberv3); docs/integrate.md shows each framework's way"
)

// mount is Middleware mounted in front of one handler: what it knows about its place.
type mount struct {
	rt *Runtime
	// engine is why next, a framework's whole engine, cannot be guarded (engineMisuse).
	engine string
	// learned is the misuse a request through the Middleware showed: every later request to a
	// marked operation is refused with it before anything runs. It is the Middleware's, shared
	// by its mountings: a framework's shim builds a mounting per request.
	learned *atomic.Pointer[string]
}

func newMount(rt *Runtime, next http.Handler, learned *atomic.Pointer[string]) *mount {
	return &mount{rt: rt, engine: engineMisuse(next), learned: learned}
}

// refusal says why a request to a marked operation cannot be guarded here; "" when it can.
func (m *mount) refusal(w http.ResponseWriter, r *http.Request) string {
	if m.engine != "" {
		return m.engine
	}
	if p := m.learned.Load(); p != nil {
		return *p
	}
	return cmp.Or(writerMisuse(w, &m.rt.fields), contextMisuse(r.Context(), &m.rt.fields))
}

// learn records the misuse a request to op showed (once per mounting, logged as an error):
// from then on every request to a marked operation is refused before anything runs.
func (m *mount) learn(ctx context.Context, op *Operation, why string) {
	if m.learned.CompareAndSwap(nil, &why) {
		m.rt.log.LogAttrs(ctx, slog.LevelError, logMisuse, slog.String("operation", op.ID), slog.String("reason", why))
	}
}

// Behaviour that shows the misuse, named with the adapter to use (adapterFor) when the
// framework is in sight.
const (
	misuseWroteOutside = "the wrapped handler wrote to the client's response writer instead of the one the idempotency middleware handed it (a framework's bridge, such as a gin shim calling c.Next(), writes to its own writer): its answer reached the client outside the guard"
	misuseWroteLate    = "the wrapped handler wrote its answer after the idempotency middleware had returned (echo.WrapMiddleware renders a handler's error only then): the answer cannot be the one stored"
	misuseTookLate     = "the handler asked for its transaction or lease after the idempotency middleware had returned (fiber's adaptor.HTTPMiddleware runs the handler only then): it ran outside the guard"
	misuseUntaken      = "the wrapped handler answered a success without taking its transaction or lease, and no router named the operation's route: its writes cannot commit with the stored answer, and a retry would run it again (a bridge to another server, such as fiber's adaptor.FiberApp, whose handlers never see the request's context; or a handler writing through its own pool: take runtime.TxFrom or LeaseFrom from the request's context)"
)

// adapterFor names the adapter to use for a request whose writer or context shows its
// framework; useAny when neither does.
func adapterFor(w http.ResponseWriter, ctx context.Context) string {
	switch framework(w, ctx, nil) {
	case "echo":
		return useEcho
	case "gin":
		return useGin
	case "fiber":
		return useFiber
	}
	return useAny
}

// framework is the framework whose writer or request context w and ctx are, seen through
// wrappers: "echo", "gin", "fiber" (fasthttp), or "".
func framework(w http.ResponseWriter, ctx context.Context, fields *typeFields) string {
	switch pkg := writerPackage(w, fields); {
	case strings.HasPrefix(pkg, echoPackage):
		return "echo"
	case pkg == ginPackage:
		return "gin"
	case strings.HasPrefix(pkg, fasthttpPackage):
		return "fiber"
	}
	if fasthttpContext(ctx, fields) {
		return "fiber"
	}
	return ""
}

var writerType = reflect.TypeFor[http.ResponseWriter]()

// writerPackage returns the package path of the first framework writer under w (echo's, gin's,
// fasthttp's), or "". It unwraps as http.ResponseController does (Unwrap() http.ResponseWriter,
// otelhttp's writer among others), and through a wrapper that keeps the writer it wraps in a
// field of type http.ResponseWriter (a logging middleware's status recorder, embedded or not).
// fields, when not nil, keeps that field of each struct type (writerField).
func writerPackage(w http.ResponseWriter, fields *typeFields) string {
	v := reflect.ValueOf(w)
	for range 16 {
		for v.Kind() == reflect.Interface {
			v = v.Elem()
		}
		if !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
			return ""
		}
		t := v.Type()
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		pkg := t.PkgPath()
		if strings.HasPrefix(pkg, echoPackage) || pkg == ginPackage || strings.HasPrefix(pkg, fasthttpPackage) {
			return pkg
		}
		if v.CanInterface() {
			if u, ok := v.Interface().(interface{ Unwrap() http.ResponseWriter }); ok {
				v = reflect.ValueOf(u.Unwrap())
				continue
			}
		}
		s := v
		if s.Kind() == reflect.Pointer {
			s = s.Elem()
		}
		if s.Kind() != reflect.Struct {
			return ""
		}
		next := writerField(s, fields)
		if !next.IsValid() {
			return ""
		}
		v = next
	}
	return ""
}

// engineMisuse says why Middleware cannot wrap next, a framework's whole engine; "" for any
// other handler.
func engineMisuse(next http.Handler) string {
	pkg, name := typeName(next)
	switch {
	case strings.HasPrefix(pkg, echoPackage) && name == "Echo":
		return "runtime.Middleware wraps an *echo.Echo, which routes requests by its own rules: " + useEcho
	case pkg == ginPackage && name == "Engine":
		return "runtime.Middleware wraps a *gin.Engine, which routes requests by its own rules: " + useGin
	}
	return ""
}

// writerMisuse says why Middleware cannot serve a request whose ResponseWriter is a framework's
// own, directly or under wrappers that unwrap (Unwrap() http.ResponseWriter, as otelhttp's):
// the middleware runs inside the framework's handler chain. "" for any other writer.
func writerMisuse(w http.ResponseWriter, fields *typeFields) string {
	switch framework(w, context.Background(), fields) {
	case "echo":
		return "runtime.Middleware runs inside echo's handler chain (echo.WrapMiddleware), where echo renders a handler's error after the middleware has finished: " + useEcho
	case "gin":
		return "runtime.Middleware runs inside gin's handler chain, where the handlers write to gin's own writer rather than the one the middleware records: " + useGin
	case "fiber":
		return "runtime.Middleware runs inside fiber's handler chain (adaptor.HTTPMiddleware), which runs the fiber handler only after the middleware has returned: " + useFiber
	}
	return ""
}

// contextMisuse says why Middleware cannot serve a request whose context is a fasthttp request
// (fiber's adaptor hands the net/http middleware the fasthttp.RequestCtx as the request's
// context), under any contexts derived from it; "" otherwise.
func contextMisuse(ctx context.Context, fields *typeFields) string {
	if fasthttpContext(ctx, fields) {
		return "runtime.Middleware runs inside fiber's handler chain (adaptor.HTTPMiddleware), which runs the fiber handler only after the middleware has returned: " + useFiber
	}
	return ""
}

// fasthttpContext reports whether ctx is, or derives from, a fasthttp.RequestCtx. Contexts
// derived with the context package keep their parent in a field named Context, which is
// followed (as fiber's own adaptor.CopyContextToFiberContext follows it). fields, when not nil,
// keeps each struct type's Context field (contextField): Middleware asks for every request.
func fasthttpContext(ctx context.Context, fields *typeFields) bool {
	v := reflect.ValueOf(ctx)
	for range 64 {
		for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return false
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return false
		}
		t := v.Type()
		if strings.HasPrefix(t.PkgPath(), fasthttpPackage) {
			return true
		}
		f := contextField(v, fields)
		if !f.IsValid() || f.Kind() != reflect.Interface {
			return false
		}
		v = f
	}
	return false
}

// writerField returns the first field of the struct s whose type is http.ResponseWriter,
// invalid when it has none. With fields, the field's index is found once per type: the search
// reads every field's type, which for net/http's own writer took some 7,000 instructions a
// request.
func writerField(s reflect.Value, fields *typeFields) reflect.Value {
	find := func(t reflect.Type) int {
		for i := range t.NumField() {
			if t.Field(i).Type == writerType {
				return i
			}
		}
		return -1
	}
	t := s.Type()
	var index int
	if fields == nil {
		index = find(t)
	} else if i, ok := fields.writer.Load(t); ok {
		index = i.(int)
	} else {
		index = find(t)
		fields.writer.Store(t, index)
	}
	if index < 0 {
		return reflect.Value{}
	}
	return s.Field(index)
}

// typeFields keeps, per struct type met in requests' context chains and response writers, the
// index of its Context field (context) and of its wrapped writer (writer): found once per type
// rather than by reflection on every request (Runtime.fields).
type typeFields struct {
	context, writer sync.Map // reflect.Type → int
}

// contextField returns v's field named Context (a struct's), invalid when it has none. With
// fields, the field's index is found once per type: reflect's FieldByName allocates on every
// call, five objects for a request's context chain.
func contextField(v reflect.Value, fields *typeFields) reflect.Value {
	if fields == nil {
		return v.FieldByName("Context")
	}
	t := v.Type()
	i, ok := fields.context.Load(t)
	if !ok {
		index := -1
		if sf, found := t.FieldByName("Context"); found && len(sf.Index) == 1 {
			index = sf.Index[0]
		} else if found {
			index = -2 // promoted from an embedded struct: looked up by name each time
		}
		fields.context.Store(t, index)
		i = index
	}
	switch index := i.(int); {
	case index >= 0:
		return v.Field(index)
	case index == -2:
		return v.FieldByName("Context")
	}
	return reflect.Value{}
}

// typeName returns the package path and name of v's type, through one pointer.
func typeName(v any) (pkg, name string) {
	t := reflect.TypeOf(v)
	if t == nil {
		return "", ""
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath(), t.Name()
}

// refuseMisuse answers a request to op that Middleware cannot guard (mount.refusal): 500
// problem `internal` (answer), nothing run or stored, the reason logged as an error. The
// request was never read, so its log line names only the operation and why.
func (rt *Runtime) refuseMisuse(w http.ResponseWriter, r *http.Request, op *Operation, why string) {
	a := answer(&exchange{rt: rt, op: op, r: r}, &result{ending: endMisuse})
	rt.obs.Outcome(op.ID, op.Mode, a.outcome)
	rt.log.LogAttrs(r.Context(), a.level, a.msg, slog.String("operation", op.ID), slog.String("reason", why))
	rt.problemWriter(rt.profileOf(op))(w, r, a.problem)
}

// clientWriter is the client's writer as Middleware answers through it: sealed once the
// wrapped handler has written to the client outside the guard, so that the runtime's answer is
// not appended to the handler's.
type clientWriter struct {
	http.ResponseWriter
	sealed bool
}

func (c *clientWriter) WriteHeader(status int) {
	if !c.sealed {
		c.ResponseWriter.WriteHeader(status)
	}
}

func (c *clientWriter) Write(b []byte) (int, error) {
	if c.sealed {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

func (c *clientWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// headerMark is what the client's header map looks like before the wrapped handler runs: a
// handler that answers the client directly sets headers in it (Content-Type at the least, for
// any framework's rendering).
type headerMark struct {
	n           int
	contentType string
}

func markHeader(h http.Header) headerMark {
	m := headerMark{n: len(h)}
	if v := h["Content-Type"]; len(v) > 0 {
		m.contentType = v[0]
	}
	return m
}
