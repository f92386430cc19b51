package spec

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// Keys under names --infer does not know. Vendors carry an idempotency key under names of their
// own (LINE's X-Line-Retry-Key, a deduplicationKey, an externalId or transaction_id the API
// deduplicates on) and say so only in words. --infer never takes such a field (its name alone
// does not make it this request's key), but an operation that carries one and is left unmarked
// is a silent miss: check warns (described-idempotency-key) with the config entry that marks it.

// idLike reports whether a normalized field name names an identifier or a key: only such a
// field can be a request's key ("description" that mentions duplicates is not one). Names with
// "idempot" are the other detectors' (detect, possibleKey).
func idLike(norm string) bool {
	if strings.Contains(norm, maybeKeyPart) {
		return false
	}
	for _, s := range []string{"id", "key", "token", "uuid", "reference", "ref", "nonce"} {
		if strings.HasSuffix(norm, s) {
			return true
		}
	}
	return false
}

// retryKeyName reports whether a header's normalized name says by itself that it is a retry or
// deduplication key (X-Line-Retry-Key, X-Dedup-Key, X-Deduplication-Id).
func retryKeyName(norm string) bool {
	for _, w := range []string{"retrykey", "retrytoken", "retryid", "dedupkey", "dedupid", "deduplicationkey", "deduplicationid", "dedupekey"} {
		if strings.Contains(norm, w) {
			return true
		}
	}
	return false
}

// keyWording finds a description that says a field makes the request idempotent or
// deduplicated: "idempotent", "deduplicate", a retry with "the same" value, "at most once",
// "processed twice", "prevent duplicate …". Each is a phrase that, on an identifier field,
// speaks of this request's repetition; a bare "duplicate" or "retry" is not enough (a field
// that names a resource to duplicate, a retry policy).
var keyWording = regexp.MustCompile(`(?i)idempot|\bde-?dup|\bdedupe|deduplicat|` +
	`\bretr(?:y|ies|ied|ying)\b[^.;]{0,80}\bsame\b|\bsame\b[^.;]{0,80}\bretr(?:y|ies|ied|ying)\b|` +
	`\bat most once\b|\bexactly once\b|\bonly (?:be )?(?:processed|executed|applied|sent|created) once\b|` +
	`\b(?:processed|executed|applied|created|charged|sent)\s+(?:more than once|multiple times|twice)\b|` +
	`\b(?:prevent|avoid|detect|ignore|reject|skip)s?\w*\s+(?:the\s+|any\s+)?duplicat|` +
	`\bduplicate (?:request|submission|transaction|payment|event|message|charge|order|operation|call|delivery|deliveries)s?\b`)

// wordingIn returns the phrase of text that says it is a key (a short excerpt), "" for none.
func wordingIn(text string) string {
	loc := keyWording.FindStringIndex(text)
	if loc == nil {
		return ""
	}
	from, to := loc[0], loc[1]
	// Widen to the clause, at most about 60 characters on each side.
	for from > 0 && loc[0]-from < 60 && !strings.ContainsRune(".;\n", rune(text[from-1])) {
		from--
	}
	for to < len(text) && to-loc[1] < 60 && !strings.ContainsRune(".;\n", rune(text[to])) {
		to++
	}
	return strings.Join(strings.Fields(text[from:to]), " ")
}

// describedKey is a header, query parameter or body field that reads as the operation's
// idempotency key from what the spec says about it.
type describedKey struct {
	what     string // "header X-Line-Retry-Key", "body field /event/transaction_id"
	field    string // the key setting that carries it: header, query or body
	value    string
	required bool
	why      string // the wording (or the name) that says so
	loc      diag.Loc
}

// findDescribedKey looks, in order, at header and query parameters, then at the string fields
// of JSON, form and multipart bodies (four objects deep), for an identifier whose own
// description says it makes the request idempotent or deduplicated, or a header whose name says
// it is a retry key; else at an identifier the operation's own description names beside such
// wording ("events with the same transaction_id are deduplicated").
func (b *builder) findDescribedKey(o *opSource) *describedKey {
	opText := o.m.Summary + ". " + o.m.Description
	opWording := wordingIn(opText)
	var named *describedKey // an identifier the operation's wording names
	for _, p := range o.m.Params {
		if p.In != model.InHeader && p.In != model.InQuery {
			continue
		}
		if ks := o.kinParam[p]; ks.ref != nil && ks.ref.Value != nil && !ks.ref.Value.Type.IsEmpty() && !isStringSchema(ks.ref) {
			continue
		}
		norm := normalizeField(p.Name)
		k := &describedKey{what: string(p.In) + " " + p.Name, field: string(p.In), value: p.Name, required: p.Required, loc: p.Loc}
		switch {
		case p.In == model.InHeader && retryKeyName(norm):
			k.why = "its name says it is a retry key"
			if w := wordingIn(o.paramDoc[p]); w != "" {
				k.why = fmt.Sprintf("its description says %q", w)
			}
			return k
		case !idLike(norm) || namesAnotherRequest(o, p.Name):
			continue
		case wordingIn(o.paramDoc[p]) != "":
			k.why = fmt.Sprintf("its description says %q", wordingIn(o.paramDoc[p]))
			return k
		case named == nil && opWording != "" && mentions(opText, p.Name):
			k.why = fmt.Sprintf("the operation's description names it and says %q", opWording)
			named = k
		}
	}
	if o.m.Body != nil {
		for _, c := range o.m.Body.Contents {
			if c.Kind != model.ContentJSON && c.Kind != model.ContentForm && c.Kind != model.ContentMultipart {
				continue
			}
			depth := maxKeyDepth
			if c.Kind == model.ContentForm {
				depth = 1
			}
			var found *describedKey
			searchFields(o.kinBody[c].ref, depth, func(path []string, ref *openapi3.SchemaRef) bool {
				name := path[len(path)-1]
				if !idLike(normalizeField(name)) || !isStringSchema(ref) || namesAnotherRequest(o, name) {
					return false
				}
				k := &describedKey{what: "body field " + pointerOf(path), field: "body", value: pointerOf(path), loc: fieldLoc(o.kinBody[c], path, c.Loc)}
				if c.Kind == model.ContentForm {
					k.what, k.value = "form field "+name, name
				}
				_, k.required = findProperty(o.kinBody[c].ref, path)
				if w := wordingIn(ref.Value.Description + ". " + ref.Value.Title); w != "" {
					k.why = fmt.Sprintf("its description says %q", w)
					found = k
					return true
				}
				if named == nil && opWording != "" && mentions(opText, name) {
					k.why = fmt.Sprintf("the operation's description names it and says %q", opWording)
					named = k
				}
				return false
			})
			if found != nil {
				return found
			}
		}
	}
	return named
}

// fieldLoc locates the property at path below a body schema, following $refs on the way, or
// is fallback when the way goes through a composition (allOf, oneOf) or the place has no
// position.
func fieldLoc(root kinSchema, path []string, fallback diag.Loc) diag.Loc {
	cur, at := root.ref, root.at
	for i, tok := range path {
		if cur == nil || cur.Value == nil {
			return fallback
		}
		at = at.follow(cur.Ref)
		next, ok := cur.Value.Properties[tok]
		if !ok {
			return fallback
		}
		at = at.at("properties", tok)
		if i < len(path)-1 {
			cur = next
		}
	}
	if l := at.loc(); l.Line > 0 {
		return l
	}
	return fallback
}

// mentions reports whether text names field as a word of its own (transaction_id, externalId),
// ignoring case, or in words (card_nonce as "card nonce", externalId as "external id": Square's
// CreateCustomerCard says "calls with the same card nonce return the same card").
func mentions(text, field string) bool {
	return mentionsWord(text, field) || mentionsWord(text, spaced(field))
}

// spaced writes a field name in words: card_nonce, card-nonce and cardNonce are "card nonce".
func spaced(field string) string {
	var b strings.Builder
	for i, r := range field {
		switch {
		case r == '_' || r == '-' || r == '.':
			b.WriteByte(' ')
		case r >= 'A' && r <= 'Z' && i > 0 && field[i-1] >= 'a' && field[i-1] <= 'z':
			b.WriteByte(' ')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func mentionsWord(text, field string) bool {
	low, f := strings.ToLower(text), strings.ToLower(field)
	for i := 0; ; {
		j := strings.Index(low[i:], f)
		if j < 0 {
			return false
		}
		at := i + j
		before, after := at == 0 || !wordByte(low[at-1]), at+len(f) == len(low) || !wordByte(low[at+len(f)])
		if before && after {
			return true
		}
		i = at + 1
	}
}

func wordByte(c byte) bool {
	return c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
}

// warnDescribedKey reports an unmarked operation that carries a key under a name --infer does
// not know, with the idemgen.yaml entry (or overlay) that marks it.
func (b *builder) warnDescribedKey(o *opSource) bool {
	k := b.findDescribedKey(o)
	if k == nil {
		return false
	}
	selector := o.m.ID
	if o.m.IDDerived {
		selector = o.m.Method + " " + o.m.Path
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "described-idempotency-key", Loc: k.loc,
		Message: fmt.Sprintf("%s %s declares the %s, which reads as its idempotency key (%s), but --infer does not take that name and the operation is not marked",
			o.m.Method, o.m.Path, k.what, k.why),
		Hint: "if clients send the operation's idempotency key there, mark it in idemgen.yaml:\n" + configKeyEntry(selector, k.field, k.value, &k.required) +
			"\nor in the spec (an overlay for a spec you do not own):\n" + markOverlay(o.m, k.field, k.value, k.required)})
	return true
}

// itemKeys finds, in a JSON, form or multipart body, a collection whose items carry their own
// idempotency keys: a map whose description says its keys are idempotency keys (Square's bulk
// creates: "Each key is an idempotency key"), or an array or map of objects that declare a key
// field (Azure SMS's smsRecipients[].repeatabilityRequestId, the values of Square's bulk
// upserts with their idempotency_key). It returns where they are and how
// they are carried; "" when there is none.
func (b *builder) itemKeys(o *opSource) (where, how string, loc diag.Loc) {
	if o.m.Body == nil {
		return "", "", diag.Loc{}
	}
	for _, c := range o.m.Body.Contents {
		if c.Kind != model.ContentJSON && c.Kind != model.ContentForm && c.Kind != model.ContentMultipart {
			continue
		}
		searchFields(o.kinBody[c].ref, maxKeyDepth, func(path []string, ref *openapi3.SchemaRef) bool {
			if ref == nil || ref.Value == nil {
				return false
			}
			s := ref.Value
			// The members of an array, or the values of a map (Square's bulk upserts: a map of
			// upsert requests, each with its own idempotency_key).
			members, each := s.Items, "each item's "
			if !s.Type.Is(openapi3.TypeArray) {
				members, each = s.AdditionalProperties.Schema, "each value's "
			}
			if members != nil && members.Value != nil {
				for _, p := range commonProperties(members.Value) {
					n := normalizeField(p.name)
					if (n == keyField || n == normalizeField(repeatabilityRequestID)) && isStringSchema(p.ref) {
						where, how = pointerOf(path), each+p.name
						loc = fieldLoc(o.kinBody[c], path, c.Loc)
						return true
					}
				}
			}
			if s.AdditionalProperties.Schema != nil || (s.AdditionalProperties.Has != nil && *s.AdditionalProperties.Has) {
				if d := strings.ToLower(s.Description); strings.Contains(d, "idempotency key") || strings.Contains(d, "idempotency-key") || strings.Contains(d, "idempotency_key") {
					where, how = pointerOf(path), "the keys of the map"
					loc = fieldLoc(o.kinBody[c], path, c.Loc)
					return true
				}
			}
			return false
		})
		if where != "" {
			return where, how, loc
		}
	}
	return "", "", diag.Loc{}
}

// warnItemKeys reports an unmarked operation whose items carry idempotency keys of their own:
// idemgen guards a request by one key, so it neither takes nor checks these, and a retry of the
// whole request is guarded only when the operation is marked with a key of its own.
func (b *builder) warnItemKeys(o *opSource) bool {
	where, how, loc := b.itemKeys(o)
	if where == "" {
		return false
	}
	selector := o.m.ID
	if o.m.IDDerived {
		selector = o.m.Method + " " + o.m.Path
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "item-idempotency-keys", Loc: loc,
		Message: fmt.Sprintf("%s %s carries an idempotency key per item (%s, in body field %s), which idemgen neither takes nor checks: it guards a request by one key, so the operation is not marked",
			o.m.Method, o.m.Path, how, where),
		Hint: "to guard the request as a whole (clients then send one key for it, in the Idempotency-Key header), mark it in idemgen.yaml:\n" +
			fmt.Sprintf("operations:\n  %q: {key: {required: false}}", selector)})
	return true
}

// markOverlay is the OpenAPI Overlay 1.0 document that marks an operation with a key carrier.
func markOverlay(op *model.Operation, field, value string, required bool) string {
	opt := ""
	if !required {
		opt = ", required: false"
	}
	return fmt.Sprintf("  overlay: 1.0.0\n  info: {title: mark %s, version: 1.0.0}\n  actions:\n"+
		"    - target: $.paths['%s'].%s\n      update: {x-idempotent: {key: {%s: %q%s}}}",
		op.ID, strings.ReplaceAll(op.Path, "'", "\\'"), strings.ToLower(op.Method), field, value, opt)
}
