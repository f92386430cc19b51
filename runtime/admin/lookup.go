package admin

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/store"
)

// ErrNoInspector is returned by Lookup and Stats when the store cannot be inspected (it does not
// implement store.Inspector; runtime/pgstore does).
var ErrNoInspector = errors.New("admin: the store does not implement store.Inspector")

// ErrLookupInvalid is wrapped by the errors of a lookup that cannot name a record: an empty or
// malformed key, an empty operation.
var ErrLookupInvalid = errors.New("admin: invalid lookup")

// LookupOptions narrows a Lookup and says what it returns.
type LookupOptions struct {
	// Operation, when set, limits the lookup to the records of that operation ID: the key's
	// per-operation record (operations declared `scope: operation`) and a tenant-wide record
	// that this operation claimed.
	Operation string
	// Operations are the operations the service serves (the generated Operations()); a lookup
	// without Operation also looks for the key's per-operation record of each of them that is
	// declared `scope: operation`. Without them only tenant-wide records (the default scope) and
	// Operation's per-operation record are found.
	Operations []*runtime.Operation
	// Body asks for the stored response body; without it RecordInfo.Body is nil and only its
	// size is read.
	Body bool
	// Path is the request's URL path ("/checkout_sessions/cs_1"): an operation in Operations
	// declared `scope: path` (the Agentic Commerce Protocol's keys, per endpoint path) stores a
	// key under the values of its path parameters, found only with the path the request was
	// sent to.
	Path string
	// ScopeHeaders are the values of scope headers (runtime.Operation.ScopeHeaders, such as Stripe's
	// Stripe-Account) as the request carried them. An operation that declares scope headers
	// stores its records under the tenant and those values (runtime.Operation.RequestScope): they are
	// found only for the operations in Operations that declare them, with these values.
	ScopeHeaders http.Header
}

// RecordInfo is one idempotency record as support staff see it. Its JSON form is the admin API's
// (this package's handler) and `idemgen records get`'s. Times are the store's clock, in UTC.
type RecordInfo struct {
	// Tenant is the tenant (the ScopeFunc's); ScopeHeaders the values of the operation's scope
	// headers that are part of the record's scope, if it declares any; Key the key as the
	// client sent it; PerOperation reports a key of an operation declared `scope: operation`
	// (stored as "<operation> <key>") or `scope: path` (stored under the operation and the
	// path's parameter values).
	Tenant       string            `json:"tenant"`
	ScopeHeaders map[string]string `json:"scope_headers,omitempty"`
	Key          string            `json:"key"`
	PerOperation bool              `json:"per_operation,omitempty"`
	// Operation is the operation ID whose request claimed the key.
	Operation string `json:"operation"`
	// State is "completed", "running" (a lease-mode claim whose handler has not finished),
	// "uncertain" (running, and its outcome is uncertain: see Uncertain), "tombstone" (past
	// ExpiresAt, its response gone, but the key remembered until ForgetAt: a retry gets 410
	// result-expired and does not run again) or "expired" (the key counts as new; what is left
	// waits for the sweeper).
	State string `json:"state"`
	// StatusClass is a tombstone's stored status class (2 for a 2xx; its status itself is
	// gone with the response); ForgetAt is when the key stops being remembered (completed
	// records and tombstones of operations that keep tombstones). A tombstone's Fingerprint
	// holds the first 16 bytes of the request's fingerprint, the rest zero.
	StatusClass int        `json:"status_class,omitempty"`
	ForgetAt    *time.Time `json:"forget_at,omitempty"`
	// Uncertain says why a running record's outcome is uncertain (store.Uncertainty's names:
	// "lease_ended", "completion_failed", "outcome_unknown", "taken_over"): its call phase
	// recorded provider calls (Lease.ProviderCall) that may have reached the provider, and no
	// completion is known. UncertainSince is when the runtime or a takeover marked it (absent
	// for lease_ended: since LeaseUntil). docs/runtime.md, "Uncertain outcomes and
	// reconciliation".
	Uncertain      string     `json:"uncertain,omitempty"`
	UncertainSince *time.Time `json:"uncertain_since,omitempty"`
	// ProviderCalls are the calls its call phase recorded, in the order they started: the
	// label, the provider key the handler sent (search the provider's dashboard for it), and
	// the amount in minor units and currency when the handler gave them. No secret is shown:
	// Config.ProviderKeySecret never leaves the runtime.
	ProviderCalls []ProviderCallInfo `json:"provider_calls,omitempty"`
	// RecordRef is the store's own name of the record (runtime/pgstore: its key_id digest as a
	// UUID, docs/runtime.md); the listing of uncertain records (Uncertain) shows it
	// instead of the tenant and key, which the store does not keep.
	RecordRef string `json:"record_ref,omitempty"`
	// FingerprintVersion is the framing version of Fingerprint, the request's SHA-256
	// fingerprint in hex (runtime.Fingerprint recomputes it for a request).
	FingerprintVersion int    `json:"fingerprint_version"`
	Fingerprint        string `json:"fingerprint"`
	// FencingToken is the lease-mode fencing token (1, then one more per takeover), or the
	// claim id of an atomic-mode record.
	FencingToken int64 `json:"fencing_token"`
	// Status, Headers and Location are the stored final response (completed records); Headers
	// is the allow-listed set that replays repeat.
	Status   int                 `json:"status,omitempty"`
	Headers  map[string][]string `json:"headers,omitempty"`
	Location string              `json:"location,omitempty"`
	// BodyBytes is the stored body's length; BodyOmitted reports a body over the stored
	// response limit (delivered once, replayed empty). Body is the stored body itself, only
	// when asked for (base64 in JSON); BodyText is the same when it is valid UTF-8.
	BodyBytes   int64  `json:"body_bytes"`
	BodyOmitted bool   `json:"body_omitted,omitempty"`
	Body        []byte `json:"body,omitempty"`
	BodyText    string `json:"body_text,omitempty"`
	// CreatedAt is the claim; CompletedAt the stored response (nil while running); ExpiresAt
	// the end of replays.
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	ExpiresAt   time.Time  `json:"expires_at"`
	// LeaseUntil is a running claim's lease end; LeaseRunning reports that it has not passed
	// yet (a retry gets 409); once it has, a retry with the same request takes over.
	LeaseUntil   *time.Time `json:"lease_until,omitempty"`
	LeaseRunning bool       `json:"lease_running"`
	// ReadAt is the store's clock when the record was read.
	ReadAt time.Time `json:"read_at"`
	// TenantHash and KeyHash are what the runtime's log lines carry for this request
	// (tenant_hash, key_hash: see runtime.LogDigests).
	TenantHash string `json:"tenant_hash"`
	KeyHash    string `json:"key_hash"`
}

// ProviderCallInfo is one provider call of a record (RecordInfo.ProviderCalls).
type ProviderCallInfo struct {
	Label       string `json:"label"`
	ProviderKey string `json:"provider_key"`
	Amount      *int64 `json:"amount,omitempty"`
	Currency    string `json:"currency,omitempty"`
}

// Lookup finds the records that the idempotency key key names in tenant, reading through st's
// store.Inspector: the tenant-wide record of the key, and the per-operation records and the
// records of operations with scope headers that opts allows (see LookupOptions). key is the key as the client sent it; an RFC 8941 quoted
// form ("abc") is the key abc, as for requests. Records are returned tenant-wide first, then by
// operation; expired records that the sweeper has not deleted yet are included (State
// "expired"), and so are keys remembered by a tombstone after their record's retention (State
// "tombstone"). When nothing is found the slice is empty and the error nil. Errors: ErrNoInspector,
// ErrLookupInvalid (an empty or malformed key), or the store's error (wrapped).
func Lookup(ctx context.Context, st store.Store, tenant, key string, opts LookupOptions) ([]RecordInfo, error) {
	in, ok := st.(store.Inspector)
	if !ok {
		return nil, ErrNoInspector
	}
	k, err := normalizeLookupKey(key)
	if err != nil {
		return nil, err
	}
	tenantWide := (&runtime.Operation{}).RecordKey(k)
	// The stored keys to read, grouped by the scope they are stored under.
	type group struct {
		scope   string
		headers map[string]string
		keys    []string
	}
	var groups []*group
	add := func(scope string, headers map[string]string, sk string) {
		var g *group
		for _, have := range groups {
			if have.scope == scope {
				g = have
			}
		}
		if g == nil {
			g = &group{scope: scope, headers: headers}
			groups = append(groups, g)
		}
		if !slices.Contains(g.keys, sk) {
			g.keys = append(g.keys, sk)
		}
	}
	perOp := func(id string) string {
		return (&runtime.Operation{ID: id, Scope: runtime.ScopeOperation}).RecordKey(k)
	}
	add(tenant, nil, tenantWide)
	known := false
	for _, op := range opts.Operations {
		if op == nil || (opts.Operation != "" && op.ID != opts.Operation) {
			continue
		}
		known = known || op.ID == opts.Operation
		scope, headers := tenant, map[string]string(nil)
		if len(op.ScopeHeaders) > 0 {
			scope = op.RequestScope(tenant, opts.ScopeHeaders)
			headers = map[string]string{}
			for _, h := range op.ScopeHeaders {
				headers[http.CanonicalHeaderKey(h)] = opts.ScopeHeaders.Get(h)
			}
		}
		// The key tenant-wide, and the key as this operation serves it (RecordKey: the same
		// for scope tenant, operation-qualified for scope operation).
		add(scope, headers, tenantWide)
		add(scope, headers, op.RecordKey(k))
		if op.Scope == runtime.ScopePath && opts.Path != "" {
			if sk, ok := op.RecordKeyAt(k, opts.Path); ok {
				add(scope, headers, sk)
			}
		}
		if op.Key.Quoted == runtime.KeyQuotedLiteral {
			// Quotes are characters of this operation's keys: the key as pasted.
			add(scope, headers, op.RecordKey(strings.TrimSpace(key)))
		}
	}
	if opts.Operation != "" && !known {
		// An operation the caller did not describe: its key may be stored either way.
		add(tenant, nil, perOp(opts.Operation))
	}
	var out []RecordInfo
	for _, g := range groups {
		snaps, err := in.Inspect(ctx, g.scope, g.keys, opts.Body)
		if err != nil {
			return nil, fmt.Errorf("lookup: %w", err)
		}
		for i := range snaps {
			if opts.Operation != "" && snaps[i].Operation != opts.Operation {
				continue
			}
			out = append(out, recordInfo(&snaps[i], tenant, g.headers, k, tenantWide))
		}
	}
	if out == nil {
		out = []RecordInfo{}
	}
	return out, nil
}

// LookupOperation finds the record of key for one operation in tenant: Lookup with
// LookupOptions.Operation set, and the stored body when body is true. found is false when there
// is none. Errors are Lookup's, and ErrLookupInvalid for an empty operation.
func LookupOperation(ctx context.Context, st store.Store, tenant, operation, key string, body bool) (rec RecordInfo, found bool, err error) {
	if operation == "" {
		return RecordInfo{}, false, fmt.Errorf("%w: the operation is empty", ErrLookupInvalid)
	}
	recs, err := Lookup(ctx, st, tenant, key, LookupOptions{Operation: operation, Body: body})
	if err != nil || len(recs) == 0 {
		return RecordInfo{}, false, err
	}
	return recs[0], true, nil
}

// Stats summarises st's records (store.Inspector.Stats: counts by state and operation, the
// oldest running claim, bytes stored, expired records not yet swept). It may read every record.
// Errors: ErrNoInspector, or the store's error (wrapped).
func Stats(ctx context.Context, st store.Store) (store.Stats, error) {
	in, ok := st.(store.Inspector)
	if !ok {
		return store.Stats{}, ErrNoInspector
	}
	s, err := in.Stats(ctx)
	if err != nil {
		return s, fmt.Errorf("stats: %w", err)
	}
	return s, nil
}

// UncertainOptions narrows Uncertain.
type UncertainOptions struct {
	// Since, when set, lists only records claimed at or after it.
	Since time.Time
	// Limit is the most records returned, oldest first; 0: all.
	Limit int
}

// Uncertain lists the uncertain records of st (store.Inspector.Uncertain): running lease-mode
// records whose call phase recorded provider calls and that were marked uncertain or whose lease
// ended (their process died in the call phase), oldest claim first. The store keeps digests, not
// tenants and keys: each RecordInfo carries RecordRef, its ProviderCalls and its state, with
// Tenant and Key empty (and the log digests, which need them). Errors: ErrNoInspector, or the
// store's error (wrapped).
func Uncertain(ctx context.Context, st store.Store, opts UncertainOptions) ([]RecordInfo, error) {
	in, ok := st.(store.Inspector)
	if !ok {
		return nil, ErrNoInspector
	}
	snaps, err := in.Uncertain(ctx, opts.Since, opts.Limit)
	if err != nil {
		return nil, fmt.Errorf("uncertain records: %w", err)
	}
	out := make([]RecordInfo, 0, len(snaps))
	for i := range snaps {
		r := recordInfo(&snaps[i], "", nil, "", "")
		r.TenantHash, r.KeyHash, r.PerOperation = "", "", false
		out = append(out, r)
	}
	return out, nil
}

// normalizeLookupKey turns a key as support staff paste it into the key the runtime serves it
// under: surrounding whitespace dropped (HTTP drops it from a header too), then
// runtime.UnquoteKey (an RFC 8941 quoted string is its content), as the serving path reads it
// under the default key.quoted. A key may hold spaces and commas (key.characters: opaque).
func normalizeLookupKey(key string) (string, error) {
	k := strings.TrimSpace(key)
	if k == "" {
		return "", fmt.Errorf("%w: the key is empty", ErrLookupInvalid)
	}
	k, err := runtime.UnquoteKey(k)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrLookupInvalid, err)
	}
	return k, nil
}

// recordInfo describes the record of sn; stored is the record key of key under scope tenant
// (Operation.RecordKey), which a per-operation record's differs from.
func recordInfo(sn *store.Snapshot, tenant string, scopeHeaders map[string]string, key, stored string) RecordInfo {
	r := RecordInfo{
		Tenant:             tenant,
		ScopeHeaders:       scopeHeaders,
		Key:                key,
		PerOperation:       sn.ID.Key != stored,
		Operation:          sn.Operation,
		FingerprintVersion: int(sn.Fingerprint.Version),
		Fingerprint:        hex.EncodeToString(sn.Fingerprint.Sum[:]),
		FencingToken:       sn.Token,
		BodyBytes:          sn.BodySize,
		BodyOmitted:        sn.Response.BodyOmitted,
		Body:               sn.Response.Body,
		CreatedAt:          sn.CreatedAt.UTC(),
		ExpiresAt:          sn.ExpiresAt.UTC(),
		ReadAt:             sn.ReadAt.UTC(),
	}
	// The log lines' digests, as runtime.LogDigests documents them: the tenant's, and the
	// key's under the scope the record is stored in (the tenant, with any scope headers).
	r.TenantHash, _ = runtime.LogDigests(tenant, "")
	_, r.KeyHash = runtime.LogDigests(sn.ID.Scope, key)
	r.RecordRef = sn.Ref
	if !sn.ForgetAt.IsZero() {
		t := sn.ForgetAt.UTC()
		r.ForgetAt = &t
	}
	switch {
	case !sn.Live:
		r.State = "expired"
	case sn.State == store.Expired:
		r.State, r.StatusClass = "tombstone", sn.StatusClass
		if !sn.CompletedAt.IsZero() {
			t := sn.CompletedAt.UTC()
			r.CompletedAt = &t
		}
	case sn.State == store.Running && sn.Uncertain != store.NotUncertain:
		r.State = "uncertain"
		r.Uncertain = sn.Uncertain.String()
		if !sn.UncertainSince.IsZero() {
			t := sn.UncertainSince.UTC()
			r.UncertainSince = &t
		}
	case sn.State == store.Running:
		r.State = "running"
	default:
		r.State = "completed"
	}
	for _, c := range sn.Calls {
		ci := ProviderCallInfo{Label: c.Label, ProviderKey: c.ProviderKey, Currency: c.Currency}
		if c.Currency != "" {
			a := c.Amount
			ci.Amount = &a
		}
		r.ProviderCalls = append(r.ProviderCalls, ci)
	}
	if sn.State == store.Completed {
		r.Status = sn.Response.Status
		t := sn.CompletedAt.UTC()
		if !sn.CompletedAt.IsZero() {
			r.CompletedAt = &t
		}
	}
	if len(sn.Response.Header) > 0 {
		var h map[string][]string
		if json.Unmarshal(sn.Response.Header, &h) == nil {
			r.Headers = h
			if l := h["Location"]; len(l) > 0 {
				r.Location = l[0]
			}
		}
	}
	if !sn.LockedUntil.IsZero() && sn.State == store.Running {
		t := sn.LockedUntil.UTC()
		r.LeaseUntil = &t
		r.LeaseRunning = sn.LeaseLeft > 0
	}
	if r.Body != nil && utf8.Valid(r.Body) {
		r.BodyText = string(r.Body)
	}
	return r
}
