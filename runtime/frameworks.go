package runtime

import (
	"log/slog"
	"net/http"
	"reflect"
	"strings"
)

// Web frameworks that route requests and render their handlers' errors on their own cannot be
// guarded by Middleware, a net/http middleware, without losing the contract:
//
//   - inside the framework's handler chain (echo.WrapMiddleware(runtime.Middleware(...)), a gin
//     shim that calls c.Next() from the wrapped handler) the framework renders a handler's
//     returned error after the middleware has finished (echo), or the handlers write to the
//     framework's own writer rather than the one the middleware records (gin): the middleware
//     would see no response, or another one than the client got;
//   - around the framework's whole engine (runtime.Middleware(...)(e), (...)(r) for a gin
//     Engine) the middleware matches paths by the operations' templates while the framework
//     routes by its own rules (echo routes on the escaped path, gin redirects a trailing slash
//     with a 307), so it would guard requests the framework does not route to the operation
//     and store the framework's 404 or redirect.
//
// Middleware refuses such a setup loudly, where it can tell: every request to a marked
// operation is answered 500 problem `internal` before anything runs or is stored, and logged
// with the adapter to use instead (github.com/idemgen/idemgen/adapters/echo, .../adapters/gin),
// which routes and renders the framework's own way. The frameworks are recognised by their
// types' package paths, so the runtime does not import them.

const (
	echoPackage = "github.com/labstack/echo/"
	ginPackage  = "github.com/gin-gonic/gin"
)

// engineMisuse says why Middleware cannot wrap next, a framework's whole engine; "" for any
// other handler.
func engineMisuse(next http.Handler) string {
	pkg, name := typeName(next)
	switch {
	case strings.HasPrefix(pkg, echoPackage) && name == "Echo":
		return "runtime.Middleware wraps an *echo.Echo, which routes requests by its own rules: mount idemecho.Middleware (github.com/idemgen/idemgen/adapters/echo) on the routes or groups of the marked operations instead"
	case pkg == ginPackage && name == "Engine":
		return "runtime.Middleware wraps a *gin.Engine, which routes requests by its own rules: mount idemgin.Middleware (github.com/idemgen/idemgen/adapters/gin) on the routes or groups of the marked operations instead"
	}
	return ""
}

// writerMisuse says why Middleware cannot serve a request whose ResponseWriter is a framework's
// own (the middleware runs inside the framework's handler chain); "" for any other writer.
func writerMisuse(w http.ResponseWriter) string {
	pkg, _ := typeName(w)
	switch {
	case strings.HasPrefix(pkg, echoPackage):
		return "runtime.Middleware runs inside echo's handler chain (echo.WrapMiddleware), where echo renders a handler's error after the middleware has finished: mount idemecho.Middleware (github.com/idemgen/idemgen/adapters/echo) instead"
	case pkg == ginPackage:
		return "runtime.Middleware runs inside gin's handler chain, where the handlers write to gin's own writer rather than the one the middleware records: mount idemgin.Middleware (github.com/idemgen/idemgen/adapters/gin) instead"
	}
	return ""
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

// refuseMisuse answers a request to op that Middleware cannot guard (engineMisuse,
// writerMisuse): 500 problem `internal` (answer), nothing run or stored, the reason logged as
// an error. The request was never read, so its log line names only the operation and why.
func (rt *Runtime) refuseMisuse(w http.ResponseWriter, r *http.Request, op *Operation, why string) {
	a := answer(&exchange{rt: rt, op: op, r: r}, &result{ending: endMisuse})
	rt.obs.Outcome(op.ID, op.Mode, a.outcome)
	rt.log.LogAttrs(r.Context(), a.level, a.msg, slog.String("operation", op.ID), slog.String("reason", why))
	rt.problemWriter(rt.profileOf(op))(w, r, a.problem)
}
