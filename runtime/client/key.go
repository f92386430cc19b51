package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// NewKey returns a fresh random idempotency key: a UUID v4 in its 36-character text form, the
// kind Stripe and the IETF draft recommend. Call it when the key must be persisted before the
// first attempt, then pass it with WithKey or WithKeySince.
func NewKey() string { return uuid.NewString() }

// randomKey is the default KeyFunc.
func randomKey(*http.Request) (string, error) {
	k, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("client: new key: %w", err)
	}
	return k.String(), nil
}

type ctxKey struct{}

// suppliedKey is what WithKey and WithKeySince put in a context.
type suppliedKey struct {
	value     string
	firstSent time.Time
}

// WithKey returns a context that makes the Transport use key for the request sent with it, on
// every attempt. Use it to reuse a key across restarts or across redirects, which start a new
// RoundTrip. key must be a valid key (see ValidKey), else RoundTrip fails before sending.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, ctxKey{}, suppliedKey{value: key})
}

// WithKeySince is WithKey for a key that may already have been sent, at the earliest at
// firstSent (for a persisted key: the time it was created, recorded with it). The Transport
// counts the server's retention from firstSent, so after a restart it refuses with a
// *ReconcileError once the key could have expired on the server, instead of silently starting
// the operation again.
func WithKeySince(ctx context.Context, key string, firstSent time.Time) context.Context {
	return context.WithValue(ctx, ctxKey{}, suppliedKey{value: key, firstSent: firstSent})
}

// KeyFrom returns the key WithKey or WithKeySince put in ctx, and whether there is one.
func KeyFrom(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(ctxKey{}).(suppliedKey)
	return k.value, ok
}

// ValidKey reports whether key can be sent: not empty, and only visible ASCII characters
// (0x21–0x7E) other than the comma, as idemgen servers require (a comma would
// split the header into a list, RFC 9110 section 5.3). Length limits are the server's.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("client: empty idempotency key")
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e || c == ',' {
			return fmt.Errorf("client: idempotency key has byte 0x%02x at offset %d: want visible ASCII except ','", c, i)
		}
	}
	return nil
}

// Replayed reports whether resp is a replay of a stored response (header Idempotent-Replayed:
// true): the operation had already run, and this retry did not run it again.
func Replayed(resp *http.Response) bool {
	return resp != nil && resp.Header.Get("Idempotent-Replayed") == "true"
}
