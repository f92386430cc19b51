package generator

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// tkind is the Go shape a schema takes.
type tkind int

const (
	kStruct tkind = iota // object with declared properties (or closed)
	kMap                 // object with only additionalProperties (or a free-form object)
	kSlice               // array
	kEnum                // string enum: a named string type with constants
	kString
	kInt32
	kInt64
	kFloat
	kBool
	kRaw // any / oneOf / anyOf: canonical JSON bytes (json.RawMessage)
	// kUnset: a member of a bracketed form declared anyOf [X, enum ['']]:
	// canonical.Unsettable[X] (elem is X), "" meaning unset.
	kUnset
	kFile // a file part of a multipart body (string, format binary): gen.File
	// kNullable: an array element or map value whose schema allows null:
	// canonical.Nullable[X] (elem is X), so that null is never taken for X's zero value.
	kNullable
)

// tinfo is the planned Go type of one schema.
type tinfo struct {
	kind tkind
	s    *model.Schema
	// name is the declared type name for kStruct and kEnum.
	name string
	// elem is the element type of kSlice, the value type of kMap and the value of kUnset and
	// kNullable.
	elem *tinfo
	// fields of a kStruct, in spec order; extra is the name of the field that keeps undeclared
	// members ("" for closed objects).
	fields []*field
	extra  string
	// addl is the value type of an object that declares properties and a typed
	// additionalProperties: its undeclared members are decoded, checked and kept in the map
	// field named extra instead of as canonical JSON.
	addl *tinfo
	// consts are the enum constant names, parallel to s.Enum.
	consts []string
	// decodeFn is the name of the struct's JSON decode function (structs only); canonicalizer
	// names are per exclusion set (canonFor).
	decodeFn string
	// form marks a struct of a bracketed form body (formType): it has a FormTree decoder
	// instead of a JSON one. shared counts the other inline schemas of the same shape that use
	// it.
	form   bool
	shared int
	// multipart marks a struct planned for a multipart-only body with file parts
	// (multipartTypeOf): it has no JSON decoder; its canonicalizer writes files by content hash.
	multipart bool
}

// field is one member of a generated struct.
type field struct {
	p    *model.Property
	name string
	t    *tinfo
	// ptr: the Go field is *T (optional, a required nullable member, the body key, or a cyclic
	// struct): nil is absent, or null for a required nullable member, which cannot be absent.
	ptr bool
	// three: the member is optional and nullable (or optional in a merge patch, RFC 7396), so it
	// has three states that a client means differently (absent: leave it; null: clear it; a
	// value): the Go field is *canonical.Nullable[T], nil when absent, Null when sent as null.
	// The fingerprint writes null for Null and nothing for nil, exactly as the handler tells
	// them apart.
	three bool
	// bodyKey marks a member that carries an operation's idempotency key: never
	// required-checked (a missing key is key-missing, docs/design.md section 4); the operation's
	// canonicalizer leaves it out of the fingerprint.
	bodyKey bool
}

// scalar kinds take a pointer when optional; slices, maps and raw values use nil for absent.
func (t *tinfo) pointerable() bool {
	switch t.kind {
	case kSlice, kMap, kRaw:
		return false
	}
	return true
}

// code is the Go type expression.
func (t *tinfo) code() jen.Code {
	switch t.kind {
	case kStruct, kEnum:
		return jen.Id(t.name)
	case kMap:
		return jen.Map(jen.String()).Add(t.elem.code())
	case kSlice:
		return jen.Index().Add(t.elem.code())
	case kString:
		return jen.String()
	case kInt32:
		return jen.Int32()
	case kInt64:
		return jen.Int64()
	case kFloat:
		return jen.Float64()
	case kBool:
		return jen.Bool()
	case kUnset:
		return jen.Qual(pkgCanonical, "Unsettable").Types(t.elem.code())
	case kNullable:
		return jen.Qual(pkgCanonical, "Nullable").Types(t.elem.code())
	case kFile:
		return jen.Qual(pkgGen, "File")
	default:
		return jen.Qual("encoding/json", "RawMessage")
	}
}

func (f *field) code() jen.Code {
	if f.three {
		return jen.Op("*").Qual(pkgCanonical, "Nullable").Types(f.t.code())
	}
	if f.ptr {
		return jen.Op("*").Add(f.t.code())
	}
	return f.t.code()
}

// findCycles marks named schemas that reach themselves through struct-valued members; a field of
// such a type must be a pointer or the Go type would have infinite size.
func (g *planner) findCycles() {
	for _, s := range g.doc.Schemas {
		seen := map[*model.Schema]bool{}
		var walk func(x *model.Schema) bool
		walk = func(x *model.Schema) bool {
			for _, p := range x.Properties {
				c := p.Schema
				if c == s {
					return true
				}
				if seen[c] || c.Type != model.TypeObject {
					continue
				}
				seen[c] = true
				if walk(c) {
					return true
				}
			}
			return false
		}
		if walk(s) {
			g.cyclic[s] = true
		}
	}
}

// reserveNamed claims the Go name of a named component schema.
func (g *planner) reserveNamed(s *model.Schema) {
	if _, ok := g.types[s]; ok {
		return
	}
	g.typeOf(s, s.GoName)
}

// typeOf plans the Go type of s. hint names it when it is an inline struct or enum. Every
// schema is planned once and shared.
func (g *planner) typeOf(s *model.Schema, hint string) *tinfo {
	if t, ok := g.types[s]; ok {
		return t
	}
	if s.Name != "" && s.GoName != "" {
		hint = s.GoName
	}
	t := &tinfo{s: s}
	switch s.Type {
	case model.TypeObject:
		if len(s.Properties) == 0 && !s.ClosedObject {
			t.kind = kMap
			if s.AdditionalProperties != nil {
				g.types[s] = t
				t.elem = g.elemOf(s.AdditionalProperties, hint+"Value", s.MergePatch)
			} else {
				t.elem = &tinfo{kind: kRaw, s: s}
			}
			return t
		}
		t.kind = kStruct
		t.name = g.names.take(hint)
		g.types[s] = t // before the fields, so recursive references find it
		g.planStruct(t)
	case model.TypeArray:
		t.kind = kSlice
		g.types[s] = t
		if s.Items == nil {
			t.elem = &tinfo{kind: kRaw, s: s}
		} else {
			t.elem = g.elemOf(s.Items, hint+"Item", false)
		}
		return t
	case model.TypeString:
		if len(s.Enum) > 0 {
			t.kind = kEnum
			t.name = g.names.take(hint)
			for _, v := range s.Enum {
				t.consts = append(t.consts, g.names.take(t.name+exportedIdent(v)))
			}
			g.named = append(g.named, t)
		} else {
			t.kind = kString
		}
	case model.TypeInteger:
		t.kind = kInt64
		if s.Format == "int32" {
			t.kind = kInt32
		}
	case model.TypeNumber:
		t.kind = kFloat
	case model.TypeBoolean:
		t.kind = kBool
	default:
		t.kind = kRaw
	}
	g.types[s] = t
	return t
}

// elemOf plans the type of an array element or map value of schema s: s's own type, or, when s
// allows null (or null removes the value: a map of a JSON merge patch, patch), canonical.Nullable
// of it, so that [null] is not [0] to the handler or to the fingerprint. A schema-less or
// oneOf/anyOf value keeps null as its canonical JSON already.
func (g *planner) elemOf(s *model.Schema, hint string, patch bool) *tinfo {
	t := g.typeOf(s, hint)
	if !(s.Nullable || patch) || t.kind == kRaw {
		return t
	}
	if w, ok := g.nullables[t]; ok {
		return w
	}
	w := &tinfo{kind: kNullable, s: s, elem: t}
	g.nullables[t] = w
	return w
}

// threeStates reports whether property p of a JSON object has three states (field.three): it
// is optional and may be null. A schema-less or oneOf/anyOf value keeps null as canonical JSON
// (absent is nil, null is the bytes null), and the member carrying the body key is a plain
// pointer: a null key is a missing key.
func threeStates(p *model.Property, t *tinfo, bodyKey bool) bool {
	return !p.Required && (p.Schema.Nullable || p.Nullable) && !bodyKey && t.kind != kRaw
}

// planStruct plans the fields of an object schema.
func (g *planner) planStruct(t *tinfo) {
	g.named = append(g.named, t)
	fnames := newNamer()
	for _, p := range t.s.Properties {
		fnames.take(p.GoName)
	}
	for _, p := range t.s.Properties {
		f := &field{p: p, name: p.GoName, bodyKey: g.keyProps[p]}
		f.t = g.typeOf(p.Schema, t.name+p.GoName)
		f.three = threeStates(p, f.t, f.bodyKey)
		f.ptr = !f.three && f.t.pointerable() && (!p.Required || p.Schema.Nullable || p.Nullable || f.bodyKey ||
			(f.t.kind == kStruct && g.cyclic[p.Schema]))
		t.fields = append(t.fields, f)
	}
	if !t.s.ClosedObject {
		if ap := t.s.AdditionalProperties; ap != nil && ap.Type != model.TypeAny {
			t.extra = fnames.take("AdditionalProperties")
			t.addl = g.elemOf(ap, t.name+"Value", t.s.MergePatch)
		} else {
			t.extra = fnames.take("Extra")
		}
	}
	t.decodeFn = g.names.take("decode" + t.name)
}

// emitTypes declares the database handle, every planned struct and enum type, and the
// per-operation parameter and handler types.
func (p *plan) emitTypes(f *jen.File) {
	if p.opts.Target != TargetMiddleware {
		comment(f, "%s is the database handle the business functions write through: in atomic mode the transaction that also stores the response, in lease mode the one that completes the record. It was chosen at generation time (idemgen generate --db, or db in idemgen.yaml); the runtime's store must run writes through it in its transactions, which Register checks.", dbAlias)
		f.Type().Id(dbAlias).Op("=").Add(p.db.code())
		f.Line()
	}
	for _, t := range p.named {
		switch t.kind {
		case kEnum:
			p.emitEnum(f, t)
		case kStruct:
			p.emitStruct(f, t)
		}
	}
	for _, op := range p.ops {
		p.emitOpTypes(f, op)
	}
}

func (p *plan) emitEnum(f *jen.File, t *tinfo) {
	comment(f, "%s is a string enum%s.", t.name, schemaRef(t.s))
	f.Type().Id(t.name).String()
	f.Const().DefsFunc(func(grp *jen.Group) {
		for i, v := range t.s.Enum {
			grp.Id(t.consts[i]).Id(t.name).Op("=").Lit(v)
		}
	})
	f.Line()
}

func (p *plan) emitStruct(f *jen.File, t *tinfo) {
	doc := t.name + " is a request type" + schemaRef(t.s) + "."
	if t.s.MergePatch {
		doc += " It is read as a JSON merge patch (RFC 7396): every optional member has three states, absent (leave it), null (remove it) and a value."
	}
	if t.s.Opened {
		doc += " Undeclared members are accepted and fingerprinted (body.unknown: accept)."
	}
	switch {
	case t.shared == 1:
		doc += " One other inline schema of the same shape shares it."
	case t.shared > 1:
		doc += fmt.Sprintf(" %d other inline schemas of the same shape share it.", t.shared)
	}
	if t.s.Description != "" {
		doc += "\n\n" + t.s.Description
	}
	comment(f, "%s", doc)
	f.Type().Id(t.name).StructFunc(func(grp *jen.Group) {
		for _, fl := range t.fields {
			tag := fl.p.Name
			if fl.ptr || fl.three || !fl.p.Required {
				tag += ",omitempty"
			}
			c := jen.Id(fl.name).Add(fl.code())
			if !strings.Contains(fl.p.Name, ",") {
				// encoding/json reads a comma as the start of options; such a name gets no tag.
				c.Tag(map[string]string{"json": tag})
			}
			switch {
			case fl.t.kind == kUnset:
				c.Comment(fl.p.Name + "= (empty) is Unset")
			case fl.bodyKey:
				c.Comment("idempotency key: not part of the fingerprint")
			case fl.p.Ignore || fl.p.Schema.Ignore:
				c.Comment("x-idempotency-ignore: not part of the fingerprint")
			case fl.three:
				c.Comment("nil: absent; Null: sent as null")
			}
			grp.Add(c)
		}
		switch {
		case t.addl != nil:
			grp.Id(t.extra).Map(jen.String()).Add(t.addl.code()).Tag(map[string]string{"json": "-"}).
				Comment("undeclared members (additionalProperties, checked): fingerprinted")
		case t.extra != "":
			grp.Id(t.extra).Qual(pkgCanonical, "Members").Tag(map[string]string{"json": "-"}).
				Comment("undeclared members, in canonical form: fingerprinted")
		}
	})
	f.Line()
}

// schemaRef names the component schema in doc comments, "" for inline schemas.
func schemaRef(s *model.Schema) string {
	switch {
	case s.Name != "":
		return " (schema " + s.Name + ")"
	case s.Loc.Pointer != "":
		return " (inline schema at " + s.Loc.Pointer + ")"
	}
	return ""
}
