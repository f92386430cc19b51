package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
)

// Log lines of a request carry its tenant and key as digests, never raw (docs/runtime.md, "Logs"):
//
//	tenant_hash  12 hex digits of SHA-256 over "idemgen/tenant/v1", a zero byte and the tenant
//	key_hash     12 hex digits of SHA-256 over the scope, a zero byte and the key
//
// The tenant is what the ScopeFunc returned; the scope is the tenant with the values of the
// operation's ScopeHeaders (Operation.RequestScope), the same as the tenant for most operations.
//
// The tenant is a digest too because a scope is often a credential or a customer identifier
// (an API key, a bearer token's subject): logs travel to places an API key must not. The
// digests correlate lines; support tools (runtime/admin's Lookup and page, `idemgen records get`) print
// them next to a record, so an incident can be followed from a tenant and a key to the logs.

// LogDigests returns the tenant_hash and key_hash that the runtime's log lines carry for a
// request of tenant with the idempotency key key (as the client sent it, RFC 8941 quotes
// removed; not operation-qualified), for an operation without ScopeHeaders. Each is 12
// lowercase hex digits; neither gives back the tenant or the key. For an operation with
// ScopeHeaders the key_hash is LogDigests(op.RequestScope(tenant, h), key)'s.
func LogDigests(tenant, key string) (tenantHash, keyHashDigits string) {
	return tenantDigest(tenant), keyHash(tenant, key)
}

func tenantDigest(scope string) string {
	h := sha256.New()
	h.Write([]byte("idemgen/tenant/v1\x00"))
	h.Write([]byte(scope))
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// keyHash is what logs show instead of a key: 12 hex digits of SHA-256 over scope and key,
// enough to correlate log lines, useless to replay a request.
func keyHash(scope, key string) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// logAttrs are the attributes of every log line about this request: the operation, its mode,
// and, once known, the tenant and key digests.
func (x *exchange) logAttrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("operation", x.op.ID), slog.String("mode", x.op.Mode.String()))
	if x.scoped && !x.rt.cfg.SingleTenant {
		attrs = append(attrs, slog.String("tenant_hash", tenantDigest(x.tenant)))
	}
	if x.key != "" {
		attrs = append(attrs, slog.String("key_hash", keyHash(x.scope, x.key)))
	}
	return attrs
}

// logIdentityKey is the context key of a request's log attributes (see LogHandler).
type logIdentityKey struct{}

// logIdentity is the value under logIdentityKey: the request's log attributes, made on first use
// (most requests log nothing, and each digest is a SHA-256).
type logIdentity struct {
	x     *exchange
	once  sync.Once
	attrs []slog.Attr
}

// withIdentity returns ctx with the request's log identity under logIdentityKey, as
// context.WithValue would, in the exchange's own memory.
func (x *exchange) withIdentity(ctx context.Context) context.Context {
	x.ident.x = x
	x.hctx = identityCtx{Context: ctx, id: &x.ident}
	return &x.hctx
}

// identityCtx is a context with a request's log identity (exchange.withIdentity).
type identityCtx struct {
	context.Context
	id *logIdentity
}

func (c *identityCtx) Value(key any) any {
	if _, ok := key.(logIdentityKey); ok {
		return c.id
	}
	return c.Context.Value(key)
}

func (l *logIdentity) get() []slog.Attr {
	l.once.Do(func() { l.attrs = l.x.logAttrs() })
	return l.attrs[:len(l.attrs):len(l.attrs)] // an append by one caller copies, never races another

}

// LogAttrs returns the log attributes of the idempotent request that ctx belongs to (the
// operation, mode, tenant_hash and key_hash), or nil outside one. Handlers receive such a context.
func LogAttrs(ctx context.Context) []slog.Attr {
	if id, _ := ctx.Value(logIdentityKey{}).(*logIdentity); id != nil {
		return id.get()
	}
	return nil
}

// LogHandler wraps h so that every record logged with the context of an idempotent request
// (slog's ...Context forms, from a handler or anything it calls) carries that request's
// LogAttrs, unless the record already has them. The runtime's own lines carry them whether or
// not its Logger is wrapped.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ next slog.Handler }

func (l logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.next.Enabled(ctx, level)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	attrs := LogAttrs(ctx)
	if len(attrs) > 0 {
		has := false
		r.Attrs(func(a slog.Attr) bool {
			has = a.Key == "key_hash" || a.Key == "tenant_hash"
			return !has
		})
		if !has {
			r = r.Clone()
			r.AddAttrs(attrs...)
		}
	}
	return l.next.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.next.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.next.WithGroup(name)} }
