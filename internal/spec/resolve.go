package spec

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/gen"
)

// Defaults of docs/design.md section 2, from runtime/defaults (the runtime's and the
// generator's too).
const (
	defaultHeader    = defaults.KeyHeader
	defaultMinLength = defaults.KeyMinLength
	defaultMaxLength = defaults.KeyMaxLength
	defaultRetention = defaults.Retention
	defaultLease     = defaults.Lease
	defaultTombstone = defaults.Tombstone
	defaultExecLimit = defaults.ExecutionLimit
	defaultLimit     = defaults.BodyLimit // 1 MiB: limits.body, limits.response and limits.part
)

// keyLengthLimit is the longest key a rule may allow, in bytes: 8 KiB, the request header size
// a common proxy accepts by default (nginx's large_client_header_buffers, 8k; a longer key
// header never reaches the service behind it). Nothing idemgen keeps bounds a key's length:
// stores keep a digest of it, never the key, and the IETF draft
// (draft-ietf-httpapi-idempotency-key-header) sets no length. The default maximum stays 255
// (runtime/defaults), Stripe's.
const keyLengthLimit = 8192

// capHint says how to accept idemgen's cap on a key longer than it allows: set key.maxLength
// (keyLengthLimit, or less) in the operation's x-idempotent or in its idemgen.yaml entry;
// either silences the warning.
func capHint(id string, derived bool, method, path string) string {
	selector := id
	if derived {
		selector = method + " " + path
	}
	return fmt.Sprintf("to accept keys of at most %[1]d characters, set key.maxLength to %[1]d (or less) in the operation's x-idempotent:\n"+
		"  x-idempotent: {key: {maxLength: %[1]d}}\n"+
		"or in idemgen.yaml:\n"+
		"  operations:\n    %[2]q:\n      key: {maxLength: %[1]d}\n"+
		"and tell the API's clients", keyLengthLimit, selector)
}

// defaultStatuses is replay.statuses' default (defaults.Statuses): 2xx and 4xx are final except
// 408, 409, 425 and 429, which a client is expected to retry.
func defaultStatuses() []model.StatusRule {
	var out []model.StatusRule
	for _, r := range defaults.Statuses() {
		out = append(out, model.StatusRule(r))
	}
	return out
}

// mergeSettings merges settings layers; when the result names a profile, the profile's
// defaults come first, so that every layer that sets a field explicitly still wins.
func mergeSettings(lays []*layer) *layer {
	m := mergeLayers(lays)
	if m.profile == nil {
		return m
	}
	return mergeLayers(append([]*layer{profileDefaults(*m.profile)}, lays...))
}

// profileDefaults are the settings the contract table's row p implies (its key rule, scope,
// body settings and concurrency.wait); its scope headers are set by resolve. A name that is no
// row implies none (the settings decoder refused it).
func profileDefaults(p model.Profile) *layer {
	l := &layer{locs: map[string]diag.Loc{}}
	row, _ := defaults.ProfileNamed(string(p))
	if n := row.Key.MinLength; n != 0 {
		l.keyMin = &n
	}
	if n := row.Key.MaxLength; n != 0 {
		l.keyMax = &n
	}
	if c := row.Key.Characters; c != defaults.KeyVisible {
		s := c.String()
		l.keyChars = &s
	}
	if q := row.Key.Quoted; q != defaults.KeyQuotedAccepted {
		s := q.String()
		l.keyQuoted = &s
	}
	if row.Scope != "" {
		sc := model.Scope(row.Scope)
		l.scope = &sc
	}
	if row.Body.Nulls != "" {
		n := model.Nulls(row.Body.Nulls)
		l.bodyNulls = &n
	}
	if row.Body.Unknown != "" {
		u := model.Unknown(row.Body.Unknown)
		l.bodyUnknown = &u
	}
	if w := row.Wait; w != 0 {
		l.wait = &w
	}
	return l
}

// mergeLayers merges settings layers, later ones winning field by field. key.header, key.body
// and key.query choose the carrier together: a layer that sets one replaces all three.
func mergeLayers(lays []*layer) *layer {
	m := &layer{locs: map[string]diag.Loc{}}
	for _, l := range lays {
		if l.keyHeader != nil || l.keyBody != nil || l.keyQuery != nil {
			m.keyHeader, m.keyBody, m.keyQuery = l.keyHeader, l.keyBody, l.keyQuery
		}
		set(&m.keyRequired, l.keyRequired)
		set(&m.keyMin, l.keyMin)
		set(&m.keyMax, l.keyMax)
		set(&m.keyPattern, l.keyPattern)
		set(&m.keyChars, l.keyChars)
		set(&m.keyQuoted, l.keyQuoted)
		set(&m.keyEcho, l.keyEcho)
		set(&m.bodyNulls, l.bodyNulls)
		set(&m.bodyUnknown, l.bodyUnknown)
		set(&m.scope, l.scope)
		set(&m.mode, l.mode)
		set(&m.retention, l.retention)
		set(&m.lease, l.lease)
		set(&m.wait, l.wait)
		set(&m.tombstone, l.tombstone)
		set(&m.detach, l.detach)
		set(&m.execLimit, l.execLimit)
		set(&m.fpBody, l.fpBody)
		set(&m.bodyLimit, l.bodyLimit)
		set(&m.respLimit, l.respLimit)
		set(&m.partLimit, l.partLimit)
		set(&m.profile, l.profile)
		set(&m.errors, l.errors)
		if l.excludeSet {
			m.exclude, m.excludeSet = l.exclude, true
		}
		if l.fpHeadersSet {
			m.fpHeaders, m.fpHeadersSet = l.fpHeaders, true
		}
		if l.replayHeadersSet {
			m.replayHeaders, m.replayHeadersSet = l.replayHeaders, true
		}
		if l.statusesSet {
			m.statuses, m.statusesSet = l.statuses, true
		}
		maps.Copy(m.locs, l.locs)
	}
	return m
}

func set[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

// resolve turns merged settings into complete model settings for one operation, checking the
// key carrier and the fingerprint exclusions against the operation's request.
func (b *builder) resolve(o *opSource, m *layer, det *detection, markLoc diag.Loc) model.Settings {
	s := model.Settings{
		Scope: model.ScopeTenant, Retention: defaultRetention, Lease: defaultLease, Mode: model.ModeAtomic,
		Tombstone: defaultTombstone, Detach: true, ExecutionLimit: defaultExecLimit,
		Fingerprint:   model.FingerprintSettings{Body: model.BodyCanonical},
		Replay:        model.ReplaySettings{Statuses: defaultStatuses()},
		BodyLimit:     defaultLimit,
		ResponseLimit: defaultLimit,
		PartLimit:     defaultLimit,
		Loc:           markLoc,
	}
	if m.scope != nil {
		s.Scope = *m.scope
	}
	if m.mode != nil {
		s.Mode = *m.mode
	}
	if m.retention != nil {
		s.Retention = *m.retention
	}
	if m.lease != nil {
		s.Lease = *m.lease
	}
	if m.wait != nil {
		s.Wait = *m.wait
	}
	if m.tombstone != nil {
		s.Tombstone = *m.tombstone
	}
	if m.detach != nil {
		s.Detach = *m.detach
	}
	if m.execLimit != nil {
		s.ExecutionLimit = *m.execLimit
	}
	if m.bodyLimit != nil {
		s.BodyLimit = *m.bodyLimit
	}
	if m.respLimit != nil {
		s.ResponseLimit = *m.respLimit
	}
	if m.partLimit != nil {
		s.PartLimit = *m.partLimit
	}
	if m.profile != nil {
		s.Profile = *m.profile
		row, _ := defaults.ProfileNamed(string(s.Profile))
		for _, h := range row.ScopeHeaders {
			s.ScopeHeaders = append(s.ScopeHeaders, h.Name)
		}
	}
	if m.fpBody != nil {
		s.Fingerprint.Body = *m.fpBody
	}
	s.Body = model.BodySettings{Nulls: model.NullsSchema, Unknown: model.UnknownSchema}
	if m.bodyNulls != nil {
		s.Body.Nulls = *m.bodyNulls
	}
	if m.bodyUnknown != nil {
		s.Body.Unknown = *m.bodyUnknown
	}
	if m.fpHeadersSet {
		s.Fingerprint.Headers = m.fpHeaders
	}
	if m.replayHeadersSet {
		s.Replay.Headers = m.replayHeaders
	}
	if m.statusesSet {
		s.Replay.Statuses = m.statuses
	}
	at := func(path string) diag.Loc {
		if l, ok := m.locs[path]; ok {
			return l
		}
		return markLoc
	}
	if s.Fingerprint.Body == model.BodyRaw && o.m.Body != nil {
		for _, c := range o.m.Body.Contents {
			c.Kind = model.ContentRaw
		}
	}
	b.unstoredSuccesses(o, s.Replay.Statuses, at("replay/statuses"))
	switch {
	case s.Tombstone == 0 || s.Tombstone > s.Retention:
	case m.tombstone == nil:
		// A retention at least as long as the default tombstone leaves nothing for one to add.
		s.Tombstone = 0
	default:
		// A tombstone counts from completion, as the retention does: one that ends before the
		// response would keep nothing.
		b.d.Errorf(at("tombstone"), "bad-tombstone", "%s %s: tombstone %s must be longer than retention %s (both count from completion), or 0s to keep no tombstone",
			o.m.Method, o.m.Path, model.DurationText(s.Tombstone), model.DurationText(s.Retention))
	}
	b.resolveKey(o, m, det, &s, at)
	b.resolveExclude(o, m, &s, at)
	s.Errors = b.resolveErrors(o, m.errors)
	if m.errors == nil {
		if es := b.inferErrors(o, &s); es != nil {
			s.Errors = b.resolveErrors(o, es)
		}
	}
	if o.m.Body != nil && s.Fingerprint.Body != model.BodyRaw {
		for _, c := range o.m.Body.Contents {
			if c.Kind == model.ContentRaw && !sealedMediaType(c.MediaType) {
				b.d.Warnf(c.Loc, "raw-fingerprint", "%s %s: request media type %s is fingerprinted as raw bytes, so two requests that differ only in formatting count as different (README.md, fingerprint.body); set fingerprint.body: raw to accept this",
					o.m.Method, o.m.Path, c.MediaType)
			}
		}
	}
	return s
}

// sealedMediaType reports whether mt is a signed or encrypted form of a body (JOSE, RFC 7515 and
// 7516: application/jose, application/jose+jwe as open-banking APIs write it; a JWT, RFC 7519:
// application/jwt, application/*+jwt), whose bytes are the request: no re-encoding keeps the
// signature, so raw bytes are the only fingerprint it can have, and a client's retry resends
// them as they were.
func sealedMediaType(mt string) bool {
	return mt == "application/jwt" || mt == "application/jose" || strings.HasSuffix(mt, "+jwt") ||
		(strings.HasPrefix(mt, "application/jose+") && !strings.HasSuffix(mt, "+json"))
}

// declared is what the spec itself says about the key's parameter or property.
type declared struct {
	required          bool
	minLength, maxLen *int
	// maxOver is a declared maxLength above keyLengthLimit (0 when none).
	maxOver uint64
	pattern string
	loc     diag.Loc // the parameter, or the request body content
}

func (b *builder) declaredFrom(required bool, ks kinSchema, loc diag.Loc) *declared {
	d := &declared{required: required, loc: loc}
	ref := ks.ref
	if ref == nil || ref.Value == nil {
		return d
	}
	v := ref.Value
	if v.MinLength > 0 && v.MinLength <= keyLengthLimit {
		n := int(v.MinLength)
		d.minLength = &n
	}
	switch {
	case v.MaxLength != nil && *v.MaxLength > keyLengthLimit:
		d.maxOver = *v.MaxLength
	case v.MaxLength != nil && *v.MaxLength > 0:
		n := int(*v.MaxLength)
		d.maxLen = &n
	}
	d.pattern = v.Pattern
	return d
}

func (b *builder) resolveKey(o *opSource, m *layer, det *detection, s *model.Settings, at func(string) diag.Loc) {
	k := &s.Key
	var decl *declared
	carrierOK := true
	switch {
	case m.keyBody != nil:
		decl, carrierOK = b.bodyKey(o, *m.keyBody, k, at("key/body"))
	case m.keyQuery != nil:
		decl, carrierOK = b.queryKey(o, *m.keyQuery, k, at("key/query"))
	case m.keyHeader == nil && det != nil && det.carrier == model.CarrierQuery:
		decl, carrierOK = b.queryKey(o, det.query, k, det.loc)
	case m.keyHeader == nil && det != nil && det.carrier != model.CarrierHeader:
		decl, carrierOK = b.bodyKey(o, det.pointer, k, det.loc)
	}
	switch {
	case !carrierOK:
		// The error is reported; the key falls back to the default header so that the model
		// stays consistent and later stages (the generator's checks) still run on this
		// operation and report their own errors in the same run.
		*k = model.KeySettings{Carrier: model.CarrierHeader, Header: defaultHeader}
	case k.Carrier != "":
		// a body, form or query key, resolved above
	default:
		k.Carrier, k.Header = model.CarrierHeader, defaultHeader
		if m.keyHeader != nil {
			k.Header = *m.keyHeader
		} else if det != nil {
			k.Header = det.header
		}
		for _, p := range o.m.Params {
			if p.In == model.InHeader && strings.EqualFold(p.Name, k.Header) {
				p.IsKey = true
				decl = b.declaredFrom(p.Required, o.kinParam[p], p.Loc)
				break
			}
		}
		if decl == nil && m.keyHeader == nil {
			b.warnOtherCarrier(o, k.Header, at("key"))
		}
	}

	// Each rule comes from the settings, else from the key's declaration, else from the
	// default (docs/cli.md, key rules). Under --infer the declaration is the vendor's whole
	// rule: a length it does not bound is not bounded by idemgen's default minimum either
	// (minimum 1: an empty key is a missing key), so the server accepts every key the vendor
	// documents; the maximum stays within keyLengthLimit.
	vendor := o.m.Mark == model.MarkInfer && decl != nil
	src := &k.Sources
	k.Required, src.Required = true, model.RuleDefault
	if m.keyRequired != nil {
		k.Required, src.Required = *m.keyRequired, model.RuleSettings
	} else if decl != nil {
		k.Required, src.Required = decl.required, model.RuleSpec
	}
	k.MinLength, src.MinLength = defaultMinLength, model.RuleDefault
	k.MaxLength, src.MaxLength = defaultMaxLength, model.RuleDefault
	switch {
	case m.keyMin != nil:
		k.MinLength, src.MinLength = *m.keyMin, model.RuleSettings
	case decl != nil && decl.minLength != nil:
		k.MinLength, src.MinLength = *decl.minLength, model.RuleSpec
	case vendor:
		k.MinLength, src.MinLength = 1, model.RuleSpec
	}
	switch {
	case m.keyMax != nil:
		k.MaxLength, src.MaxLength = *m.keyMax, model.RuleSettings
	case decl != nil && decl.maxLen != nil:
		k.MaxLength, src.MaxLength = *decl.maxLen, model.RuleSpec
	case decl != nil && decl.maxOver > 0:
		k.MaxLength, src.MaxLength = keyLengthLimit, model.RuleSpec
		b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "key-length-capped", Loc: decl.loc,
			Message: fmt.Sprintf("%s %s: the idempotency key's declared maxLength %d is above idemgen's limit of %d, the request header size common proxies accept (nginx's default 8k buffers), so longer keys are refused (400 key-invalid); the store keeps only a digest of the key, so nothing else bounds it",
				o.m.Method, o.m.Path, decl.maxOver, keyLengthLimit),
			Hint: capHint(o.m.ID, o.m.IDDerived, o.m.Method, o.m.Path)})
	}
	if k.MinLength > k.MaxLength {
		switch {
		case src.MinLength != model.RuleDefault && src.MaxLength != model.RuleDefault:
			b.d.Errorf(at("key/minLength"), "bad-value", "key.minLength %d is greater than key.maxLength %d", k.MinLength, k.MaxLength)
		case src.MaxLength != model.RuleDefault:
			k.MinLength = 1 // the declared maximum is below the default minimum
		default:
			k.MaxLength, src.MaxLength = k.MinLength, src.MinLength
		}
	}
	src.Pattern = model.RuleDefault
	switch {
	case m.keyPattern != nil:
		// The settings replace the declared pattern, which is then not checked at all (a
		// pattern neither engine compiles is no error: reportProblems skips it).
		k.Pattern, src.Pattern = *m.keyPattern, model.RuleSettings
	case decl != nil && decl.pattern != "":
		src.Pattern = model.RuleSpec
		if _, err := gen.CheckPattern(decl.pattern); err == nil {
			k.Pattern = decl.pattern
		}
		// else: the schema converter reports the pattern where it is written, as the key's
		// (reportProblems), with key.pattern as the way out.
	}
	k.Characters, k.Quoted = defaults.KeyVisible.String(), defaults.KeyQuotedAccepted.String()
	if m.keyChars != nil {
		k.Characters = *m.keyChars
	}
	if m.keyQuoted != nil {
		k.Quoted = *m.keyQuoted
	}
	if m.keyEcho != nil {
		k.Echo = *m.keyEcho
		if k.Echo && k.Carrier != model.CarrierHeader {
			b.echoWithoutHeader(o, k, at("key/echo"))
			k.Echo = false
		}
	}
	k.Standard = keyStandard(k)
	if k.Standard == model.StandardRepeatable {
		for _, p := range o.m.Params {
			if p.In == model.InHeader && strings.EqualFold(p.Name, repeatabilityFirstSent) {
				k.FirstSent = p.Name
			}
		}
	}
	if decl != nil {
		b.warnSecondCarrier(o, k)
	}
}

// warnSecondCarrier reports a marked operation that declares its key in one place and a second
// recognised key carrier besides (Lob: an Idempotency-Key header and an idempotency_key query
// parameter, "provide … a header or … a query parameter"). idemgen reads the key from one place
// per operation; the other is an ordinary parameter or field, so a client that sends its key only
// there is not guarded, and saying which one is read is the only honest answer.
func (b *builder) warnSecondCarrier(o *opSource, k *model.KeySettings) {
	type place struct{ what, field, value string }
	var other place
	var loc diag.Loc
	for _, p := range o.m.Params {
		switch {
		case other.what != "":
		case k.Carrier != model.CarrierHeader && p.In == model.InHeader && isKeyHeader(p.Name):
			other, loc = place{"header " + p.Name, "header", p.Name}, p.Loc
		case k.Carrier != model.CarrierQuery && p.In == model.InQuery && normalizeField(p.Name) == keyField:
			other, loc = place{"query parameter " + p.Name, "query", p.Name}, p.Loc
		}
	}
	if other.what == "" && (k.Carrier == model.CarrierHeader || k.Carrier == model.CarrierQuery) {
		if d := b.bodyCarrier(o); d != nil && d.standard == model.StandardIdempotencyKey {
			other, loc = place{"body field " + d.pointer, "body", d.pointer}, d.loc
			if d.carrier == model.CarrierForm {
				other.what = "form field " + d.pointer
			}
		}
	}
	if other.what == "" {
		return
	}
	read := place{"the " + k.Header + " header", "header", k.Header}
	switch k.Carrier {
	case model.CarrierQuery:
		read = place{"the query parameter " + k.Query, "query", k.Query}
	case model.CarrierBody:
		read = place{"the body field " + k.Pointer, "body", k.Pointer}
	case model.CarrierForm:
		read = place{"the form field " + k.Field, "body", k.Field}
	}
	then := "runs unguarded (the key is optional)"
	if k.Required {
		then = "is refused (400 key-missing)"
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "second-key-carrier", Loc: loc,
		Message: fmt.Sprintf("%s %s reads its idempotency key from %s, and also declares the %s, which is not read as a key (idemgen reads one place per operation): a request that sends its key only there %s",
			o.m.Method, o.m.Path, read.what, other.what, then),
		Hint: fmt.Sprintf("tell clients to send the key in %s (the generated contract, idemgen_contract.md, says so), or read it from the %s instead: key: {%s: %q} in place of key: {%s: %q}",
			read.what, other.what, other.field, other.value, read.field, read.value)})
}

// echoWithoutHeader refuses key.echo on an operation whose key is not in a header. key.echo is
// ACP's rule (agentic-checkout RFC section 3.1: "Idempotency-Key — echo on all POST responses"):
// an answer repeats the key header. A key in the query or the body has no header to repeat, and
// no convention echoes one as a header (the IETF draft and AIP-155 echo nothing), so idemgen does
// not invent one: the setting would silently do nothing.
func (b *builder) echoWithoutHeader(o *opSource, k *model.KeySettings, loc diag.Loc) {
	where := "the query parameter " + k.Query
	switch k.Carrier {
	case model.CarrierBody:
		where = "the body field " + k.Pointer
	case model.CarrierForm:
		where = "the form field " + k.Field
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Error, Code: "key-echo-not-header", Loc: loc,
		Message: fmt.Sprintf("key.echo repeats the key header on every answer, but %s %s takes its key in %s: there is no header to repeat, and no convention echoes a query or body key as one",
			o.m.Method, o.m.Path, where),
		Hint: "remove key.echo, or set it to false for this operation where it comes from defaults (the client has the key: it sent it); key.echo is for a key in a header, as the Agentic Commerce Protocol's Idempotency-Key"})
}

// keyStandard is the convention a key follows, from where it travels: the OASIS
// Repeatability-Request-ID header, an AIP-155 request_id field or query parameter, else an
// idempotency key.
func keyStandard(k *model.KeySettings) model.Standard {
	switch {
	case k.Carrier == model.CarrierHeader && strings.EqualFold(k.Header, repeatabilityRequestID):
		return model.StandardRepeatable
	case k.Carrier == model.CarrierBody && len(k.PointerTokens) > 0 && normalizeField(k.PointerTokens[len(k.PointerTokens)-1]) == aip155Field:
		return model.StandardAIP155
	case k.Carrier == model.CarrierQuery && normalizeField(k.Query) == aip155Field:
		return model.StandardAIP155
	}
	return model.StandardIdempotencyKey
}

// queryKey resolves a query-carried key: the query parameter name, whose declaration (when the
// operation declares it) gives the key rules and must be a string; the parameter is then the
// key's, left out of the params struct and of the fingerprint. An undeclared parameter is
// read all the same (the runtime reads the key from the URL).
//
// ok is false after an error has been reported; k is then left for the caller to reset.
func (b *builder) queryKey(o *opSource, name string, k *model.KeySettings, loc diag.Loc) (decl *declared, ok bool) {
	k.Carrier, k.Query = model.CarrierQuery, name
	for _, p := range o.m.Params {
		if p.In != model.InQuery || p.Name != name {
			continue
		}
		ks := o.kinParam[p]
		if ks.ref != nil && ks.ref.Value != nil && !ks.ref.Value.Type.IsEmpty() && !isStringSchema(ks.ref) {
			b.d.Add(diag.Diagnostic{Severity: diag.Error, Code: "key-query-not-string", Loc: loc,
				Message: fmt.Sprintf("key.query %q: %s %s declares the query parameter %s as %s, and an idempotency key is a string", name, o.m.Method, o.m.Path, name, typesOf(ks.ref)),
				Hint:    "name a string query parameter in key.query, or give the parameter a string schema with an overlay"})
			return nil, false
		}
		p.IsKey = true
		return b.declaredFrom(p.Required, ks, p.Loc), true
	}
	return nil, true
}

// bodyKey resolves a body-carried key: a JSON pointer to a string property of every JSON
// request schema, or a form field of a form-only body.
//
// ok is false after an error has been reported; k is then left for the caller to reset.
func (b *builder) bodyKey(o *opSource, raw string, k *model.KeySettings, loc diag.Loc) (decl *declared, ok bool) {
	var jsonC, formC []*model.Content
	if o.m.Body != nil {
		for _, c := range o.m.Body.Contents {
			switch c.Kind {
			case model.ContentJSON, model.ContentMultipart: // a multipart body's parts are its members
				jsonC = append(jsonC, c)
			case model.ContentForm:
				formC = append(formC, c)
			}
		}
	}
	if len(jsonC) == 0 && len(formC) == 0 {
		b.d.Errorf(loc, "key-body-not-string", "key.body %q: %s %s has no JSON, form or multipart request body to carry the key", raw, o.m.Method, o.m.Path)
		return nil, false
	}
	if len(jsonC) == 0 {
		field := strings.TrimPrefix(raw, "/")
		k.Carrier, k.Field = model.CarrierForm, field
		for _, c := range formC {
			sref := o.kinBody[c].ref
			if sref == nil || sref.Value == nil || freeForm(sref.Value) {
				continue
			}
			got, req := findProperty(sref, []string{field})
			if got == nil || !isStringSchema(got) {
				b.d.Errorf(loc, "key-body-not-string", "key.body %q is not a string field of the %s request body of %s %s", raw, c.MediaType, o.m.Method, o.m.Path)
				return nil, false
			}
			if decl == nil {
				decl = b.declaredFrom(req, kinSchema{ref: got}, loc)
			}
		}
		return decl, true
	}
	toks, err := splitPointer(raw)
	if err != nil || len(toks) == 0 {
		b.d.Errorf(loc, "key-body-not-string", "key.body %q must be a JSON pointer to a string property, such as /idempotency_key", raw)
		return nil, false
	}
	k.Carrier, k.Pointer, k.PointerTokens = model.CarrierBody, raw, toks
	for _, c := range jsonC {
		got, req := findProperty(o.kinBody[c].ref, toks)
		switch {
		case got == nil:
			b.d.Errorf(loc, "key-body-not-string", "key.body %q names no property of the %s request schema of %s %s", raw, c.MediaType, o.m.Method, o.m.Path)
			return nil, false
		case !isStringSchema(got):
			b.d.Errorf(loc, "key-body-not-string", "key.body %q is not a string property (type %v) in the %s request schema of %s %s", raw, typesOf(got), c.MediaType, o.m.Method, o.m.Path)
			return nil, false
		}
		if decl == nil {
			decl = b.declaredFrom(req, kinSchema{ref: got}, loc)
		}
	}
	return decl, true
}

func typesOf(r *openapi3.SchemaRef) string {
	if r.Value == nil || r.Value.Type.IsEmpty() {
		return "unspecified"
	}
	return strings.Join(r.Value.Type.Slice(), "|")
}

// resolveExclude checks every fingerprint.exclude pointer against the request schemas: a pointer
// must be able to match something in at least one JSON or form body schema (docs/design.md section 2).
func (b *builder) resolveExclude(o *opSource, m *layer, s *model.Settings, at func(string) diag.Loc) {
	if !m.excludeSet {
		return
	}
	for i, raw := range m.exclude {
		if raw == "" {
			continue
		}
		loc := at("fingerprint/exclude/" + strconv.Itoa(i))
		p, ok := b.matchExclude(o, raw)
		if !ok {
			b.d.Errorf(loc, "exclude-matches-nothing", "fingerprint.exclude %q can match nothing in the request body of %s %s", raw, o.m.Method, o.m.Path)
			continue
		}
		s.Fingerprint.Exclude = append(s.Fingerprint.Exclude, p)
	}
}

func (b *builder) matchExclude(o *opSource, raw string) (model.Pointer, bool) {
	if o.m.Body == nil {
		return model.Pointer{}, false
	}
	for _, c := range o.m.Body.Contents {
		sref := o.kinBody[c].ref
		switch c.Kind {
		case model.ContentJSON, model.ContentMultipart:
			toks, err := splitPointer(raw)
			if err != nil || len(toks) == 0 {
				continue
			}
			if matchPointer(sref, toks) {
				return model.Pointer{Raw: raw, Tokens: toks}, true
			}
		case model.ContentForm:
			// A field by its name (client_ip, or a literal name such as metadata[order]); in a
			// form with bracketed fields also a member below one, as a JSON pointer
			// (/metadata/trace_id, /items/*/note) or by its bracketed name (metadata[trace_id]).
			field := strings.TrimPrefix(raw, "/")
			if !strings.Contains(field, "/") && matchPointer(sref, []string{field}) {
				return model.Pointer{Raw: raw, Tokens: []string{field}}, true
			}
			toks := bracketTokens(field)
			if strings.Contains(field, "/") {
				var err error
				if toks, err = splitPointer(raw); err != nil {
					continue
				}
			}
			if len(toks) > 1 && matchPointer(sref, toks) {
				return model.Pointer{Raw: raw, Tokens: toks}, true
			}
		}
	}
	return model.Pointer{}, false
}

// bracketTokens splits a bracketed form field name into its segments: metadata[trace_id] is
// metadata, trace_id; a name that is not base[seg]... is one token.
func bracketTokens(name string) []string {
	i := strings.IndexByte(name, '[')
	if i <= 0 || !strings.HasSuffix(name, "]") {
		return []string{name}
	}
	toks := []string{name[:i]}
	for rest := name[i:]; rest != ""; {
		j := strings.IndexByte(rest, ']')
		if rest[0] != '[' || j < 0 || strings.ContainsAny(rest[1:j], "[") {
			return []string{name}
		}
		toks = append(toks, rest[1:j])
		rest = rest[j+1:]
	}
	return toks
}

// warnOtherCarrier warns when an operation marked with the default key header declares a
// different idempotency-looking header or field instead: clients of that API send the key
// there, and the default would make every request look keyless.
func (b *builder) warnOtherCarrier(o *opSource, header string, loc diag.Loc) {
	det := b.detect(o)
	if det == nil {
		return
	}
	field, value := "header", det.header
	switch det.carrier {
	case model.CarrierQuery:
		field, value = "query", det.query
	case model.CarrierBody, model.CarrierForm:
		field, value = "body", det.pointer
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "key-not-declared", Loc: loc,
		Message: fmt.Sprintf("%s %s takes its key in the %s header, which it does not declare, but it declares the idempotency-looking %s %s", o.m.Method, o.m.Path, header, field, value),
		Hint:    fmt.Sprintf("if clients send the key there, set key: {%s: %q}", field, value)})
}

// unstoredSuccesses warns when the operation declares a success response (a 2xx code, or 2XX)
// that its replay.statuses do not store (defaults.Final): a retry of that success runs the
// operation again, as if it had never been made.
func (b *builder) unstoredSuccesses(o *opSource, rules []model.StatusRule, loc diag.Loc) {
	if o.op.Responses == nil {
		return
	}
	rs := make([]defaults.StatusRule, len(rules))
	for i, r := range rules {
		rs[i] = defaults.StatusRule(r)
	}
	var lost []string
	for _, code := range sortedKeys(o.op.Responses.Map()) {
		switch up := strings.ToUpper(code); {
		case up == "2XX" && len(defaults.FinalIn(rs, 2)) < 100:
			lost = append(lost, code)
		case len(code) == 3 && code[0] == '2':
			if n, err := strconv.Atoi(code); err == nil && !defaults.Final(rs, n) {
				lost = append(lost, code)
			}
		}
	}
	if len(lost) > 0 && len(defaults.FinalIn(rs, 2)) > 0 { // none stored at all is an error already
		b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "replay-unstored-success", Loc: loc,
			Message: fmt.Sprintf("%s %s declares the success %s, which its replay.statuses do not store (the last matching rule decides): a retry of that success runs the operation again", o.m.Method, o.m.Path, strings.Join(lost, ", ")),
			Hint:    "add the code (or \"2xx\") after the rules that exclude it"})
	}
}
