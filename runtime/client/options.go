package client

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// Defaults of a Transport built without options. They keep a default client's whole retry budget
// (two minutes) far inside the default server retention (24 hours).
const (
	// DefaultHeader is the request header that carries the key
	// (draft-ietf-httpapi-idempotency-key-header section 2): the server's default key.header
	// (runtime/defaults).
	DefaultHeader = defaults.KeyHeader
	// DefaultMaxAttempts counts every attempt, the first included.
	DefaultMaxAttempts = 5
	// DefaultBaseDelay is the backoff bound of the first retry; it doubles for each later one.
	DefaultBaseDelay = 250 * time.Millisecond
	// DefaultMaxDelay caps one backoff wait, and is the longest Retry-After the Transport will
	// wait for.
	DefaultMaxDelay = 30 * time.Second
	// DefaultMaxElapsed bounds the time from the first attempt to the start of the last one.
	DefaultMaxElapsed = 2 * time.Minute
	// DefaultRetention is the server's retention: idemgen's default retention, 24h
	// (runtime/defaults).
	DefaultRetention = defaults.Retention
	// DefaultMaxBodyBytes caps a request body the Transport buffers for replay (1 MiB, the same
	// as the server's default limits.body).
	DefaultMaxBodyBytes = defaults.BodyLimit
)

// defaultMethods are the methods that get a key and retries: the unsafe, non-idempotent ones
// (RFC 9110 section 9.2). PUT and DELETE are idempotent by definition and are left alone.
var defaultMethods = []string{http.MethodPost, http.MethodPatch}

// Retry describes one failed attempt that is about to be retried; see WithOnRetry.
type Retry struct {
	// Key is the operation's idempotency key.
	Key string
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	// Status is its response status, 0 when it ended in a transport error.
	Status int
	// Err is its transport error, nil when a response arrived.
	Err error
	// Wait is how long the Transport sleeps before the next attempt.
	Wait time.Duration
}

// config is a Transport's resolved settings.
type config struct {
	header         string
	query          string // WithQueryKey: the key travels in this query parameter, not a header
	methods        map[string]bool
	maxAttempts    int
	baseDelay      time.Duration
	maxDelay       time.Duration
	maxElapsed     time.Duration
	attemptTimeout time.Duration
	retention      time.Duration
	margin         time.Duration
	marginSet      bool
	maxBody        int64
	keyFunc        func(*http.Request) (string, error)
	onRetry        func(Retry)
	clock          clock
	// jitter returns a uniform random duration in [0, n); n > 0.
	jitter func(n time.Duration) time.Duration
	// err is the first invalid option; every RoundTrip returns it.
	err error
}

func defaultConfig() config {
	c := config{
		header:      DefaultHeader,
		methods:     map[string]bool{},
		maxAttempts: DefaultMaxAttempts,
		baseDelay:   DefaultBaseDelay,
		maxDelay:    DefaultMaxDelay,
		maxElapsed:  DefaultMaxElapsed,
		retention:   DefaultRetention,
		maxBody:     DefaultMaxBodyBytes,
		keyFunc:     randomKey,
		clock:       realClock{},
		jitter:      func(n time.Duration) time.Duration { return rand.N(n) },
	}
	for _, m := range defaultMethods {
		c.methods[m] = true
	}
	return c
}

// safetyMargin returns the safety margin kept before the retention ends: the configured one, else a
// tenth of the retention but at most an hour (one hour for the 24h default).
func (c *config) safetyMargin() time.Duration {
	if c.marginSet {
		return c.margin
	}
	return min(time.Hour, c.retention/10)
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("client: "+format, args...)
	}
}

// Option changes one setting of a Transport. An invalid value does not panic: it makes
// Transport.Validate and every RoundTrip return an error naming the option.
type Option func(*config)

// WithHeader sets the request header that carries the key (default "Idempotency-Key"); use the
// header the API's contract names.
func WithHeader(name string) Option {
	return func(c *config) {
		if name == "" || strings.ContainsAny(name, " \t\r\n:") {
			c.fail("WithHeader(%q): not a header name", name)
			return
		}
		c.header, c.query = textproto.CanonicalMIMEHeaderKey(name), ""
	}
}

// WithQueryKey makes the Transport carry the key in the query parameter name instead of a header,
// for an API whose contract puts it in the URL (Google's AIP-155 request_id on methods whose body
// is the resource; an idemgen server marked with key.query). The key is the request URL's own
// value of name when it has one (two values fail before anything is sent), else the context's
// (WithKey), else KeyFunc's, added to the query of every attempt; no key header is sent. The
// last of WithHeader and WithQueryKey wins. name must not be empty.
func WithQueryKey(name string) Option {
	return func(c *config) {
		if name == "" {
			c.fail("WithQueryKey(%q): not a query parameter name", name)
			return
		}
		c.query = name
	}
}

// WithMethods replaces the set of methods that get a key and retries (default POST and PATCH).
// Methods are matched case-sensitively after upper-casing the given names; a request with any
// other method passes through to the base RoundTripper untouched.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		c.methods = map[string]bool{}
		for _, m := range methods {
			c.methods[strings.ToUpper(m)] = true
		}
	}
}

// WithMaxAttempts sets how many attempts one operation gets, the first included (default 5);
// n must be at least 1, and 1 turns retries off while still sending a key.
func WithMaxAttempts(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail("WithMaxAttempts(%d): must be at least 1", n)
			return
		}
		c.maxAttempts = n
	}
}

// WithBackoff sets the full-jitter backoff: the wait before retry n (from 1) is uniform in
// [0, min(maxDelay, base·2^(n-1))). Defaults: base 250ms, maxDelay 30s. base must be positive
// and maxDelay at least base. maxDelay also bounds Retry-After: a server asking for a longer
// wait ends the retries with ErrRetryAfterTooLong instead of being retried early.
func WithBackoff(base, maxDelay time.Duration) Option {
	return func(c *config) {
		if base <= 0 || maxDelay < base {
			c.fail("WithBackoff(%s, %s): want 0 < base <= maxDelay", base, maxDelay)
			return
		}
		c.baseDelay, c.maxDelay = base, maxDelay
	}
}

// WithMaxElapsed bounds the time from the start of the first attempt to the start of the last
// (default 2m); 0 removes the bound, leaving MaxAttempts and the retention. Negative is invalid.
func WithMaxElapsed(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("WithMaxElapsed(%s): must not be negative", d)
			return
		}
		c.maxElapsed = d
	}
}

// WithAttemptTimeout bounds each attempt until its response headers arrive (default 0: no
// per-attempt bound, only the request context and the base RoundTripper's own timeouts). An
// attempt that hits it counts as a timeout and is retried. Reading the final response's body is
// not bounded by it.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("WithAttemptTimeout(%s): must not be negative", d)
			return
		}
		c.attemptTimeout = d
	}
}

// WithRetention tells the Transport how long the server keeps a completed key (its `retention`
// setting; default 24h). The Transport never starts an attempt later than
// firstSent + retention − margin, where firstSent is the start of the first attempt (or the time
// given to WithKeySince) and margin defaults to min(1h, retention/10); past that point it returns
// a *ReconcileError. retention must be positive.
func WithRetention(retention time.Duration) Option {
	return func(c *config) {
		if retention <= 0 {
			c.fail("WithRetention(%s): must be positive", retention)
			return
		}
		c.retention = retention
	}
}

// WithRetentionMargin sets the safety margin kept before the retention ends (see WithRetention).
// It must be at least 0 and below the retention.
func WithRetentionMargin(margin time.Duration) Option {
	return func(c *config) {
		if margin < 0 {
			c.fail("WithRetentionMargin(%s): must not be negative", margin)
			return
		}
		c.margin, c.marginSet = margin, true
	}
}

// WithMaxBodyBytes caps, in bytes, a request body the Transport buffers for replay (default
// 1 MiB). A larger body fails with ErrBodyTooLarge before anything is sent. Bodies of requests
// with GetBody set (http.NewRequest sets it for *bytes.Buffer, *bytes.Reader and
// *strings.Reader) are never buffered and have no cap. n must not be negative.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("WithMaxBodyBytes(%d): must not be negative", n)
			return
		}
		c.maxBody = n
	}
}

// WithKeyFunc sets how a key is made for a request that carries none, neither in its header nor
// in its context (default: a random UUID v4). It is called once per operation, before the first
// attempt; an error fails the request before anything is sent. Use it to derive the key from a
// business identifier or to persist a new key before it is used.
func WithKeyFunc(f func(r *http.Request) (string, error)) Option {
	return func(c *config) {
		if f == nil {
			c.fail("WithKeyFunc(nil)")
			return
		}
		c.keyFunc = f
	}
}

// WithOnRetry sets a function called before every backoff wait, for logs and metrics. It runs on
// the requesting goroutine and must not block.
func WithOnRetry(f func(Retry)) Option {
	return func(c *config) { c.onRetry = f }
}
