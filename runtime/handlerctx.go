package runtime

import "context"

// What a handler can learn and say about the idempotent request it serves, through the context
// the runtime gives it (the generated handler's ctx, or r.Context() behind Middleware and
// Guard).

// IdempotencyKey returns the idempotency key of the request that ctx belongs to, in the form its
// record is stored under (an RFC 8941 quoted key without its quotes, unless key.quoted is
// literal), and true; "" and false outside an idempotent request, and for a request that runs
// unguarded (key.required false and no usable key). A handler that must keep the key with its
// own rows uses it: the Agentic Commerce Protocol's delegate-payment RFC (section 4) echoes it
// in its answer's metadata.idempotency_key.
func IdempotencyKey(ctx context.Context) (string, bool) {
	if id, _ := ctx.Value(logIdentityKey{}).(*logIdentity); id != nil && id.x.key != "" {
		return id.x.key, true
	}
	return "", false
}

// NotFinal marks the answer of the request that ctx belongs to as not final, whatever its
// status: it is sent to the client but not stored, the handler's writes in the transaction are
// rolled back (atomic mode) as for any answer that is not final, and the key is released, so
// that the client's corrected retry with the same key runs. It is for refusals the client can
// fix without a new key and that replay.statuses cannot tell apart from final answers of the
// same status: an API-Version the server does not support (the Agentic Commerce Protocol answers
// it 400, agentic-checkout RFC section 2.1), a failed precondition. It does nothing outside an
// idempotent request. Call it before the handler returns (behind Middleware, before the wrapped
// handler returns).
func NotFinal(ctx context.Context) {
	if id, _ := ctx.Value(logIdentityKey{}).(*logIdentity); id != nil {
		id.x.notFinal.Store(true)
	}
}
