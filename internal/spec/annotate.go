package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// Annotate writes the document of res as idemgen enforces it (docs/cli.md, idemgen spec), so
// that SDK generators and API docs know the contract the generated server keeps: for every
// marked operation
//   - x-idempotent with its resolved settings (so idemgen reads the same operations from the
//     output, without --infer or a config);
//   - the key header parameter with its rules (required, minLength, maxLength, pattern);
//   - the Idempotent-Replayed and Idempotency-Key-Expires response headers on every declared
//     response a replay can repeat;
//   - the responses the runtime answers itself, where the operation declares none for the
//     code: 400, 409 and 503 (with Retry-After), 410 (operations that keep tombstones), 412
//     (OASIS Repeatability-First-Sent only),
//     413, 415, 422 (400 under profile stripe), 429, with the error schema in use (RFC 9457
//     problem details, or Stripe's error envelope under profile stripe), or, under an errors
//     mapping, each problem at the status and in the schema the mapping answers it with;
//   - other tools' annotations: x-fern-idempotent and the document's
//     x-fern-idempotency-headers (header keys), and x-speakeasy-retries for 409 and 503 with
//     the backoff the client contract recommends (docs/client.md).
//
// format is "yaml" or "json". The document is the one kin-openapi resolved (overlays applied);
// its $refs are kept, so a split spec's output refers to its files by the same relative paths.
// res must be a Load result without errors.
func Annotate(res *Result, format string) ([]byte, error) {
	if res == nil || res.Doc == nil || res.src == nil || res.Diags.HasErrors() {
		return nil, fmt.Errorf("annotate: the document has errors")
	}
	if format != "yaml" && format != "json" {
		return nil, fmt.Errorf("annotate: format must be yaml or json, not %q", format)
	}
	doc := res.src.doc
	a := &annotator{doc: doc, schemas: map[string]string{}}
	for _, op := range res.Doc.Operations {
		pi := doc.Paths.Find(op.Path)
		if pi == nil {
			continue
		}
		if kop := pi.GetOperation(op.Method); kop != nil {
			a.operation(op, pi, kop)
		}
	}
	if len(a.fernHeaders) > 0 {
		var list []any
		for _, h := range a.fernHeaders {
			list = append(list, map[string]any{"header": h, "name": snakeName(h)})
		}
		if doc.Extensions == nil {
			doc.Extensions = map[string]any{}
		}
		doc.Extensions[extFernHeaders] = list
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("annotate: %w", err)
	}
	if format == "json" {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return nil, fmt.Errorf("annotate: %w", err)
		}
		b.WriteByte('\n')
		return b.Bytes(), nil
	}
	var n yaml.Node
	if err := yaml.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("annotate: %w", err)
	}
	clearStyle(&n)
	topOrder(&n)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s as idemgen enforces it (written by idemgen spec; docs/cli.md).\n", res.Doc.Source)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("annotate: %w", err)
	}
	return b.Bytes(), nil
}

// clearStyle drops the flow and quoted styles JSON input gives every node, so the YAML reads
// as people write it (the encoder still quotes a string that would read as another type).
func clearStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		clearStyle(c)
	}
}

// topOrder puts a document's top-level members in the order the OpenAPI specification lists
// them (encoding/json sorts them), the rest after.
func topOrder(n *yaml.Node) {
	top := n
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind != yaml.MappingNode {
		return
	}
	order := []string{"openapi", "info", "jsonSchemaDialect", "servers", "security", "tags", "externalDocs", "paths", "webhooks", "components"}
	rank := func(k string) int {
		if i := slices.Index(order, k); i >= 0 {
			return i
		}
		return len(order)
	}
	type pair struct{ k, v *yaml.Node }
	var pairs []pair
	for i := 0; i+1 < len(top.Content); i += 2 {
		pairs = append(pairs, pair{top.Content[i], top.Content[i+1]})
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return rank(a.k.Value) - rank(b.k.Value) })
	top.Content = top.Content[:0]
	for _, p := range pairs {
		top.Content = append(top.Content, p.k, p.v)
	}
}

type annotator struct {
	doc *openapi3.T
	// schemas are the component names of the error schemas added, by kind.
	schemas     map[string]string
	fernHeaders []string
}

// Header names of the contract (docs/runtime.md).
const (
	replayedHeader   = defaults.HeaderReplayed
	retryAfterHeader = "Retry-After"
)

func (a *annotator) operation(op *model.Operation, pi *openapi3.PathItem, kop *openapi3.Operation) {
	s := op.Settings
	if kop.Extensions == nil {
		kop.Extensions = map[string]any{}
	}
	delete(kop.Extensions, extXIdempotency)
	kop.Extensions["x-idempotent"] = settingsValue(s)
	if s.Key.Carrier == model.CarrierQuery {
		a.keyParam(op, pi, kop) // Fern's idempotency headers are headers: nothing to declare there
	}
	if s.Key.Carrier == model.CarrierHeader {
		a.keyParam(op, pi, kop)
		kop.Extensions[extFernIdempotent] = true
		if !slices.ContainsFunc(a.fernHeaders, func(h string) bool { return strings.EqualFold(h, s.Key.Header) }) {
			a.fernHeaders = append(a.fernHeaders, s.Key.Header)
		}
	}
	kop.Extensions[extSpeakeasyRetry] = speakeasyRetries(s)
	if kop.Responses == nil {
		kop.Responses = openapi3.NewResponses()
	}
	a.replayedHeaders(s, kop)
	a.problemResponses(op, kop)
}

// settingsValue is the x-idempotent object of resolved settings: every field, so that reading
// it back gives the same settings whatever marked the operation.
func settingsValue(s model.Settings) map[string]any {
	k := s.Key
	key := map[string]any{"required": k.Required, "minLength": k.MinLength, "maxLength": k.MaxLength}
	switch k.Carrier {
	case model.CarrierBody:
		key["body"] = k.Pointer
	case model.CarrierForm:
		key["body"] = k.Field
	case model.CarrierQuery:
		key["query"] = k.Query
	default:
		key["header"] = k.Header
	}
	if k.Pattern != "" {
		key["pattern"] = k.Pattern
	}
	if k.Characters != "" {
		key["characters"] = k.Characters
	}
	if k.Quoted != "" {
		key["quoted"] = k.Quoted
	}
	if k.Echo {
		key["echo"] = true
	}
	exclude := []string{}
	for _, p := range s.Fingerprint.Exclude {
		exclude = append(exclude, p.Raw)
	}
	var statuses []string
	for _, r := range s.Replay.Statuses {
		statuses = append(statuses, defaults.StatusRule(r).String())
	}
	out := map[string]any{
		"key":         key,
		"scope":       string(s.Scope),
		"mode":        string(s.Mode),
		"retention":   model.DurationText(s.Retention),
		"lease":       model.DurationText(s.Lease),
		"fingerprint": map[string]any{"exclude": exclude, "headers": nonNilStrings(s.Fingerprint.Headers), "body": string(s.Fingerprint.Body)},
		"replay":      map[string]any{"headers": nonNilStrings(s.Replay.Headers), "statuses": statuses},
		"tombstone":   model.DurationText(s.Tombstone),
		"concurrency": map[string]any{"wait": model.DurationText(s.Wait)},
		"execution":   map[string]any{"detach": s.Detach, "limit": model.DurationText(s.ExecutionLimit)},
		"limits":      map[string]any{"body": s.BodyLimit, "response": s.ResponseLimit, "part": s.PartLimit},
	}
	if s.Body.Nulls != "" || s.Body.Unknown != "" {
		out["body"] = map[string]any{"nulls": string(s.Body.Nulls), "unknown": string(s.Body.Unknown)}
	}
	if s.Profile != "" {
		out["profile"] = string(s.Profile)
	}
	return out
}

func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// keyParam declares the key header with the rules the runtime applies, replacing the
// operation's own declaration of it (a copy, never a shared component) or, for one declared on
// the path item, overriding it on the operation.
func (a *annotator) keyParam(op *model.Operation, pi *openapi3.PathItem, kop *openapi3.Operation) {
	k := op.Settings.Key
	schema, desc := keySchema(k)
	desc += fmt.Sprintf(". Send the same key on every retry of one request; it is remembered for %s, and a key reused with another request is refused.", model.DurationText(op.Settings.Retention))
	if !k.Required {
		desc += " Without a key the request runs unguarded."
	}
	if row, _ := defaults.ProfileNamed(string(op.Settings.Profile)); k.Carrier == model.CarrierHeader && (k.Echo || row.EchoKey) {
		desc += " Every answer repeats this header as the request sent it."
	}
	param := &openapi3.Parameter{Name: k.Header, In: openapi3.ParameterInHeader, Required: k.Required, Description: desc,
		Schema: &openapi3.SchemaRef{Value: schema}}
	same := func(p *openapi3.Parameter) bool {
		return p.In == openapi3.ParameterInHeader && strings.EqualFold(p.Name, k.Header)
	}
	if k.Carrier == model.CarrierQuery {
		// A query parameter's name is matched exactly.
		param.Name, param.In = k.Query, openapi3.ParameterInQuery
		same = func(p *openapi3.Parameter) bool { return p.In == openapi3.ParameterInQuery && p.Name == k.Query }
	}
	for i, r := range kop.Parameters {
		if r != nil && r.Value != nil && same(r.Value) {
			param.Name = r.Value.Name
			kop.Parameters[i] = &openapi3.ParameterRef{Value: param}
			return
		}
	}
	for _, r := range pi.Parameters {
		if r != nil && r.Value != nil && same(r.Value) {
			param.Name = r.Value.Name
		}
	}
	kop.Parameters = append(kop.Parameters, &openapi3.ParameterRef{Value: param})
}

// keySchema is the key header's schema and the start of its description, from the key rules:
// its length, characters (key.characters) and quoting (key.quoted). The schema's lengths and
// pattern are the key's, as x-idempotent writes them and the runtime checks them (the content
// of a quoted key); how the key is written in the field is the description's.
func keySchema(k model.KeySettings) (*openapi3.Schema, string) {
	min, max := uint64(k.MinLength), uint64(k.MaxLength)
	schema := &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeString}, MinLength: min, MaxLength: &max, Pattern: k.Pattern}
	chars := "visible ASCII characters other than a comma"
	if k.Characters == defaults.KeyOpaque.String() {
		chars = "characters of any kind but control characters (an opaque string: spaces and commas are part of the key)"
	}
	desc := fmt.Sprintf("Idempotency key (%s): %d to %d %s", keyStandardName(k.Standard), k.MinLength, k.MaxLength, chars)
	if k.Pattern != "" {
		desc += ", matching " + k.Pattern
	}
	switch k.Quoted {
	case defaults.KeyQuotedRequired.String():
		desc += `, sent as an RFC 8941 quoted string ("...", with \" and \\ escaped; section 3.3.3), as draft-ietf-httpapi-idempotency-key-header defines the field; a key sent bare is refused`
	case defaults.KeyQuotedLiteral.String():
		desc += `; a quote is a character of the key like any other ("abc" is not abc)`
	default:
		desc += `; the key may also be sent as an RFC 8941 quoted string ("abc" is the key abc), as a browser sends it`
	}
	return schema, desc
}

func keyStandardName(s model.Standard) string {
	switch s {
	case model.StandardRepeatable:
		return "OASIS Repeatable Requests 1.0"
	case model.StandardAIP155:
		return "Google AIP-155"
	}
	return "draft-ietf-httpapi-idempotency-key-header"
}

// replayedHeaders declares Idempotent-Replayed on every declared response whose status the
// operation stores (replay.statuses), on a copy of a shared response.
func (a *annotator) replayedHeaders(s model.Settings, kop *openapi3.Operation) {
	for code, r := range kop.Responses.Map() {
		if r == nil || r.Value == nil || !stored(code, s.Replay.Statuses) {
			continue
		}
		c := *r.Value
		c.Headers = openapi3.Headers{}
		for n, h := range r.Value.Headers {
			c.Headers[n] = h
		}
		c.Headers[replayedHeader] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "true when this response is the stored answer to an earlier request with the same idempotency key; the operation did not run again.",
			Schema:      &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeString}, Enum: []any{"true"}}}}}}
		c.Headers[defaults.KeyExpiresHeader] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: expiresDescription(s),
			Schema:      &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeString}, Format: "http-date"}}}}}
		kop.Responses.Set(code, &openapi3.ResponseRef{Value: &c})
	}
}

// expiresDescription describes Idempotency-Key-Expires for an operation's settings.
func expiresDescription(s model.Settings) string {
	d := fmt.Sprintf("On every stored answer and replay: until when (an HTTP date, IMF-fixdate) a retry with the same idempotency key gets this answer back, the end of its %s retention.", model.DurationText(s.Retention))
	if s.Tombstone > 0 {
		return d + fmt.Sprintf(" Afterwards, until %s after the request completed, a retry is refused with 410 (result-expired) rather than run again.", model.DurationText(s.Tombstone))
	}
	return d + " Afterwards the key is new again."
}

// stored reports whether a declared response code (201, 2XX) is one the operation stores and
// replays (defaults.Final): a code that is final, or a class with a final status in it.
func stored(code string, rules []model.StatusRule) bool {
	rs := make([]defaults.StatusRule, len(rules))
	for i, r := range rules {
		rs[i] = defaults.StatusRule(r)
	}
	if up := strings.ToUpper(code); len(up) == 3 && strings.HasSuffix(up, "XX") && up[0] >= '1' && up[0] <= '5' {
		return len(defaults.FinalIn(rs, int(up[0]-'0'))) > 0
	}
	n, err := strconv.Atoi(code)
	return err == nil && defaults.Final(rs, n) // "default" is no code
}

// problemResponses declares the answers the runtime writes itself, for each code the operation
// does not declare: in the operation's errors mapping when it has one (mappedResponses), else
// in RFC 9457 problem details or Stripe's envelope. Each code's answer is that of the problems
// runtime/defaults' table answers with it, described by problemMeanings, with Retry-After when
// one of them carries it.
func (a *annotator) problemResponses(op *model.Operation, kop *openapi3.Operation) {
	if op.Settings.Errors != nil {
		a.mappedResponses(op, kop)
		return
	}
	row := profileRow(op.Settings.Profile)
	byStatus := map[int][]defaults.Answer{}
	for _, p := range declaredProblems(op) {
		a := row.Answer(p.Name)
		byStatus[a.Status] = append(byStatus[a.Status], a)
	}
	for _, st := range slices.Sorted(maps.Keys(byStatus)) {
		code := strconv.Itoa(st)
		if kop.Responses.Value(code) != nil {
			continue
		}
		as := byStatus[st]
		desc := describeAnswers(row, as)
		mt, ref := a.errorSchema(row)
		resp := &openapi3.Response{Description: &desc, Content: openapi3.Content{mt: &openapi3.MediaType{Schema: &openapi3.SchemaRef{Ref: "#/components/schemas/" + ref}}}}
		if slices.ContainsFunc(as, func(a defaults.Answer) bool { return a.RetryAfter }) {
			resp.Headers = openapi3.Headers{retryAfterHeader: retryAfter()}
		}
		kop.Responses.Set(code, &openapi3.ResponseRef{Value: resp})
	}
}

// profileRow is the contract table's row of profile p; "" is the default row.
func profileRow(p model.Profile) defaults.Profile {
	if p == "" {
		p = defaults.ProfileDefault
	}
	row, _ := defaults.ProfileNamed(string(p))
	return row
}

// describeAnswers is the description of a response that answers as in row's words: each
// problem's meaning, named by its label in the row's envelope where that is not the problem's
// own name (Stripe's idempotency_error).
func describeAnswers(row defaults.Profile, as []defaults.Answer) string {
	var parts []string
	for _, a := range as {
		m := problemMeanings[a.Problem]
		if l := a.Label(); l != a.Problem {
			m = strings.Replace(m, "("+a.Problem+")", "("+l+")", 1)
		}
		parts = append(parts, m)
	}
	s := strings.Join(parts, "; ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// problemMeanings says, for each problem the annotated spec declares, what its answer means for
// a client; the problem's status and Retry-After are runtime/defaults' table. unauthenticated
// and internal are the application's own answers as much as the runtime's, and are not
// declared.
var problemMeanings = map[string]string{
	defaults.ProblemKeyMissing:           "the idempotency key is missing (key-missing)",
	defaults.ProblemKeyInvalid:           "the idempotency key is malformed (key-invalid)",
	defaults.ProblemBodyInvalid:          "the request does not match its schema (body-invalid); nothing ran and nothing was stored",
	defaults.ProblemInFlight:             "a request with this idempotency key is still running (in-flight): retry after Retry-After seconds with the same key",
	defaults.ProblemKeyExpired:           "the first attempt (Repeatability-First-Sent) is older than the server keeps requests for (key-expired): send a new request with a new key",
	defaults.ProblemResultExpired:        "a request with this idempotency key completed and its answer is no longer kept (result-expired): it does not run again; look up its outcome, and send a new request with a new key",
	defaults.ProblemBodyTooLarge:         "the body is larger than the operation accepts (body-too-large); nothing ran",
	defaults.ProblemMediaTypeUnsupported: "the Content-Type or Content-Encoding is not one the operation declares (media-type-unsupported); nothing ran",
	defaults.ProblemPayloadMismatch:      "the idempotency key was used with another request (payload-mismatch): nothing ran; send a new key for a new request",
	defaults.ProblemRateLimited:          "too many new idempotency keys from this client (rate-limited): retry after Retry-After seconds",
	defaults.ProblemStoreUnavailable:     "the idempotency store cannot be reached (store-unavailable): nothing ran; retry after Retry-After seconds with the same key",
}

// declaredProblems are the runtime/defaults entries of the problems whose answers op's
// annotated spec declares, in the order of their default statuses: those problemMeanings
// describes, key-expired only where Repeatability-First-Sent is checked, result-expired only
// where the operation keeps tombstones.
func declaredProblems(op *model.Operation) []defaults.Problem {
	var ps []defaults.Problem
	for _, p := range defaults.Problems() {
		if _, ok := problemMeanings[p.Name]; !ok || (p.Name == defaults.ProblemKeyExpired && op.Settings.Key.FirstSent == "") ||
			(p.Name == defaults.ProblemResultExpired && op.Settings.Tombstone == 0) {
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// describeProblems is the description of a response that answers the problems names: their
// meanings, in order, as one sentence.
func describeProblems(names []string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, problemMeanings[n])
	}
	s := strings.Join(parts, "; ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// mappedResponses declares the runtime's answers as the operation's errors mapping writes them
// (docs/cli.md, "Errors in the API's own schema"): each problem under the status the mapping
// answers it with, in the schema of its format, with the headers the mapping sets. A format
// whose schema is a $ref into the spec is that $ref, so idemgen reads the mapping back from the
// annotated spec unchanged; a schema written in the mapping itself (a spec that declares no
// error responses) is not copied into the spec, since the mapping picks a format by the
// response's $ref and would then find none: the response declares its media type only.
func (a *annotator) mappedResponses(op *model.Operation, kop *openapi3.Operation) {
	byStatus := map[int][]*model.ErrorDoc{}
	for _, p := range declaredProblems(op) {
		for _, d := range op.Settings.Errors.Docs {
			if d.Problem == p.Name {
				st := mappedStatus(d)
				byStatus[st] = append(byStatus[st], d)
			}
		}
	}
	for _, st := range slices.Sorted(maps.Keys(byStatus)) {
		code := strconv.Itoa(st)
		if kop.Responses.Value(code) != nil {
			continue
		}
		docs := byStatus[st]
		var names []string
		var refs []string
		headers := openapi3.Headers{}
		for _, d := range docs {
			names = append(names, d.Problem)
			if d.SchemaRef != "" && !slices.Contains(refs, d.SchemaRef) {
				refs = append(refs, d.SchemaRef)
			}
			if p, _ := defaults.ProblemNamed(d.Problem); p.RetryAfter {
				headers[retryAfterHeader] = retryAfter()
			}
			for _, h := range d.Headers {
				desc := fmt.Sprintf("%s for %s", h.Value, d.Problem)
				if old := headers[h.Name]; old != nil {
					desc = old.Value.Description + "; " + desc
				}
				headers[h.Name] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{Description: desc,
					Schema: &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeString}}}}}}
			}
		}
		desc := describeProblems(names)
		mt := &openapi3.MediaType{}
		switch len(refs) {
		case 0: // the schema the mapping writes itself
		case 1:
			mt.Schema = &openapi3.SchemaRef{Ref: refs[0]}
		default:
			one := &openapi3.Schema{}
			for _, r := range refs {
				one.OneOf = append(one.OneOf, &openapi3.SchemaRef{Ref: r})
			}
			mt.Schema = &openapi3.SchemaRef{Value: one}
		}
		resp := &openapi3.Response{Description: &desc, Content: openapi3.Content{op.Settings.Errors.ContentType: mt}}
		if len(headers) > 0 {
			resp.Headers = headers
		}
		kop.Responses.Set(code, &openapi3.ResponseRef{Value: resp})
	}
}

// mappedStatus is the status a problem is answered with under an errors mapping.
func mappedStatus(d *model.ErrorDoc) int {
	if d.Status != 0 {
		return d.Status
	}
	return defaults.ProblemStatus(d.Problem)
}

// retryAfter is the Retry-After header of an answer to retry later.
func retryAfter() *openapi3.HeaderRef {
	return &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
		Description: "Seconds to wait before retrying (RFC 9110 section 10.2.3).",
		Schema:      &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeInteger}}}}}}
}

// errorSchema adds (once) the component schema of row's error envelope (defaults.Envelope:
// RFC 9457 problem details, Stripe's error envelope, ...) and returns its media type and
// component name.
func (a *annotator) errorSchema(row defaults.Profile) (mediaType, name string) {
	env := row.Envelope
	if n, ok := a.schemas[env.SchemaName]; ok {
		return env.ContentType, n
	}
	if a.doc.Components == nil {
		a.doc.Components = &openapi3.Components{}
	}
	if a.doc.Components.Schemas == nil {
		a.doc.Components.Schemas = openapi3.Schemas{}
	}
	name = env.SchemaName
	for i := 2; a.doc.Components.Schemas[name] != nil; i++ {
		name = env.SchemaName + strconv.Itoa(i)
	}
	s := &openapi3.Schema{}
	if err := s.UnmarshalJSON([]byte(env.Schema)); err != nil {
		panic(fmt.Sprintf("the contract table's %s envelope schema: %v", row.Name, err)) // TestEnvelopeSchemas keeps them valid
	}
	a.doc.Components.Schemas[name] = &openapi3.SchemaRef{Value: s}
	a.schemas[env.SchemaName] = name
	return env.ContentType, name
}

// speakeasyRetries is the x-speakeasy-retries policy of the client contract (docs/client.md):
// retry 409 (in flight) and 503 (store unavailable), or the statuses an errors mapping answers
// them with, and connection errors with full-jitter
// exponential backoff from 250 ms, at most 30 s a wait, giving up well before the key's
// retention ends (half of it, at most an hour).
func speakeasyRetries(s model.Settings) map[string]any {
	elapsed := min(s.Retention/2, time.Hour)
	codes := []string{"409", "503"}
	if s.Errors != nil {
		// The statuses the errors mapping answers in-flight and store-unavailable with.
		codes = codes[:0]
		for _, d := range s.Errors.Docs {
			if c := strconv.Itoa(mappedStatus(d)); (d.Problem == defaults.ProblemInFlight || d.Problem == defaults.ProblemStoreUnavailable) && !slices.Contains(codes, c) {
				codes = append(codes, c)
			}
		}
		slices.Sort(codes)
	}
	return map[string]any{
		"strategy": "backoff",
		"backoff": map[string]any{
			"initialInterval": 250,
			"maxInterval":     30000,
			"maxElapsedTime":  elapsed.Milliseconds(),
			"exponent":        2,
		},
		"statusCodes":           codes,
		"retryConnectionErrors": true,
	}
}

// snakeName is a header's parameter name for Fern's SDKs: Idempotency-Key is idempotency_key.
func snakeName(header string) string {
	return strings.ToLower(strings.ReplaceAll(header, "-", "_"))
}
