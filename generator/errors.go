package generator

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// Errors in the spec's own schema: for the operations whose settings carry an errors mapping
// (model.ErrorFormat), the generated package has a ProblemWriter that answers each of the
// runtime's problems with the document the mapping and the spec's error schemas give it, as
// plain Go types marshalled by encoding/json; the operation's profile carries it.

// FileErrors holds the error writers and their document types.
const FileErrors = "idemgen_errors.go"

// errorWriter is one generated ProblemWriter: one per distinct mapping, shared by the
// operations that resolve to the same documents.
type errorWriter struct {
	name   string
	format *model.ErrorFormat
	types  []*docType // in first-use order
	docs   []*docCase
}

// docCase is the answer to one problem: its document's type and value.
type docCase struct {
	doc *model.ErrorDoc
	typ *docType
}

// docType is a Go type of an error document: a struct (its fields the union of the members the
// problems' documents write), a slice, or a scalar.
type docType struct {
	name string // a struct's declared name
	// schema and ref name the document's schema, on a document's own type: the component
	// ("HttpErrorOut", its $ref), or "Error" and no $ref for the schema the mapping writes.
	schema, ref string
	kind        model.ErrorKind
	location    bool // an array that is {location}: []string
	fields      []*docField
	elem        *docType
}

type docField struct {
	member, goName string
	required       bool
	typ            *docType
}

// planErrors gives o the writer of its errors mapping, sharing one per distinct mapping.
func (g *planner) planErrors(o *opPlan) {
	f := o.op.Settings.Errors
	if f == nil {
		return
	}
	key, _ := json.Marshal(f.Docs)
	k := f.ContentType + "\x00" + string(key)
	for _, w := range g.errorWriters {
		if w.key == k {
			o.errors = w.writer
			return
		}
	}
	w := &errorWriter{name: g.names.take("writeProblems"), format: f}
	bySchema := map[string]*docType{}
	for _, d := range f.Docs {
		t := bySchema[d.Schema]
		if t == nil {
			t = &docType{name: g.names.take("problem" + d.GoName), schema: d.Schema, ref: d.SchemaRef}
			bySchema[d.Schema] = t
			w.types = append(w.types, t)
		}
		g.mergeDocType(t, d.Body)
		w.docs = append(w.docs, &docCase{doc: d, typ: t})
	}
	g.errorWriters = append(g.errorWriters, &keyedWriter{key: k, writer: w})
	o.errors = w
}

// keyedWriter is a writer with the key of the mapping it was planned for.
type keyedWriter struct {
	key    string
	writer *errorWriter
}

// mergeDocType widens t to hold v.
func (g *planner) mergeDocType(t *docType, v *model.ErrorValue) {
	t.kind = v.Kind
	switch v.Kind {
	case model.ErrorObject:
		for _, m := range v.Members {
			var f *docField
			for _, have := range t.fields {
				if have.member == m.Name {
					f = have
				}
			}
			if f == nil {
				f = &docField{member: m.Name, goName: fieldName(t, m.GoName), required: m.Required, typ: &docType{}}
				if m.Value.Kind == model.ErrorObject || (m.Value.Kind == model.ErrorArray && m.Value.Field == "") {
					f.typ.name = g.names.take(t.name + m.GoName)
				}
				t.fields = append(t.fields, f)
			}
			g.mergeDocType(f.typ, m.Value)
		}
	case model.ErrorArray:
		if v.Field == "location" {
			t.location = true
			return
		}
		if t.elem == nil {
			t.elem = &docType{name: t.name + "Item"}
		}
		for _, it := range v.Items {
			g.mergeDocType(t.elem, it)
		}
	}
}

// fieldName is a member's Go name, made unique in its struct.
func fieldName(t *docType, base string) string {
	name := base
	for i := 2; ; i++ {
		taken := false
		for _, f := range t.fields {
			taken = taken || f.goName == name
		}
		if !taken {
			return name
		}
		name = base + strconv.Itoa(i)
	}
}

// emitErrors writes the error writers and their document types.
func (p *plan) emitErrors(f *jen.File) {
	for _, kw := range p.errorWriters {
		w := kw.writer
		var schemas []string
		for _, t := range w.types {
			what := "is an error document in the spec's schema " + t.schema + " (" + t.ref + ")."
			schemas = append(schemas, t.schema)
			if t.ref == "" {
				what = "is an error document in the schema the errors mapping writes (the spec declares none)."
				schemas[len(schemas)-1] = "one the errors mapping writes"
			}
			emitDocType(f, t, what)
		}
		comment(f, "%s answers the runtime's problems in the API's own error schemas (%s), filled as the errors mapping says, so that the API's clients read them as its own errors. A problem this package was generated without (one a newer runtime adds) is written as RFC 9457 problem+json.",
			w.name, strings.Join(schemas, ", "))
		f.Func().Id(w.name).Params(jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request"), jen.Id("p").Qual(pkgRuntime, "Problem")).BlockFunc(func(g *jen.Group) {
			g.Var().Id("doc").Any()
			g.Switch(jen.Id("p").Dot("Name")).BlockFunc(func(sw *jen.Group) {
				for _, group := range caseGroups(w.docs) {
					c := group[0]
					var names []jen.Code
					for _, gc := range group {
						n := jen.Qual(pkgRuntime, problemConst(gc.doc.Problem))
						if len(group) > 2 {
							n = jen.Line().Add(n) // one name a line
						}
						names = append(names, n)
					}
					sw.Case(names...).BlockFunc(func(cg *jen.Group) {
						if c.doc.Status != 0 {
							cg.Id("p").Dot("Status").Op("=").Lit(c.doc.Status)
						}
						for _, h := range c.doc.Headers {
							cg.Id("w").Dot("Header").Call().Dot("Set").Call(jen.Lit(h.Name), jen.Lit(h.Value))
						}
						cg.Id("doc").Op("=").Add(docValue(c.typ, c.doc.Body))
					})
				}
				sw.Default().Block(
					jen.Qual(pkgRuntime, "ProblemJSON").Call(jen.Lit("")).Call(jen.Id("w"), jen.Id("r"), jen.Id("p")),
					jen.Return(),
				)
			})
			g.List(jen.Id("body"), jen.Err()).Op(":=").Qual("encoding/json", "Marshal").Call(jen.Id("doc"))
			g.If(jen.Err().Op("!=").Nil()).Block(
				jen.Comment("Strings, numbers and lists of them always encode; this is a guard, not a path."),
				jen.Qual(pkgRuntime, "ProblemJSON").Call(jen.Lit("")).Call(jen.Id("w"), jen.Id("r"), jen.Id("p")),
				jen.Return(),
			)
			g.Qual(pkgRuntime, "WriteProblem").Call(jen.Id("w"), jen.Id("p"), jen.Lit(w.format.ContentType), jen.Id("body"))
		})
	}
}

// emitDocType declares a struct document type and the struct types of its members.
func emitDocType(f *jen.File, t *docType, doc string) {
	if t.kind != model.ErrorObject {
		if t.elem != nil && t.elem.kind == model.ErrorObject {
			emitDocType(f, t.elem, "is one element of a list in the spec's error documents.")
		}
		return
	}
	comment(f, "%s %s", t.name, doc)
	fields := slices.Clone(t.fields)
	slices.SortFunc(fields, func(a, b *docField) int { return strings.Compare(a.member, b.member) })
	f.Type().Id(t.name).StructFunc(func(g *jen.Group) {
		for _, fl := range fields {
			tag := fl.member
			if !fl.required {
				tag += ",omitempty"
			}
			g.Id(fl.goName).Add(goDocType(fl.typ, !fl.required)).Tag(map[string]string{"json": tag})
		}
	})
	for _, fl := range t.fields {
		switch {
		case fl.typ.kind == model.ErrorObject:
			emitDocType(f, fl.typ, "is a member of the spec's error documents.")
		case fl.typ.elem != nil:
			emitDocType(f, fl.typ, "")
		}
	}
}

// goDocType is the Go type of a document value; an optional object is a pointer, so that it is
// left out when absent.
func goDocType(t *docType, optional bool) jen.Code {
	switch t.kind {
	case model.ErrorObject:
		if optional {
			return jen.Op("*").Id(t.name)
		}
		return jen.Id(t.name)
	case model.ErrorArray:
		if t.location || t.elem == nil {
			return jen.Index().String()
		}
		return jen.Index().Add(goDocType(t.elem, false))
	case model.ErrorInteger:
		return jen.Int()
	case model.ErrorNumber:
		return jen.Float64()
	case model.ErrorBool:
		return jen.Bool()
	}
	return jen.String()
}

// docValue is the Go expression of a document value of type t.
func docValue(t *docType, v *model.ErrorValue) jen.Code {
	switch v.Kind {
	case model.ErrorObject:
		lit := jen.Id(t.name).Values(jen.DictFunc(func(d jen.Dict) {
			for _, m := range v.Members {
				for _, fl := range t.fields {
					if fl.member != m.Name {
						continue
					}
					val := docValue(fl.typ, m.Value)
					if m.Value.Kind == model.ErrorObject && !fl.required {
						val = jen.Op("&").Add(val)
					}
					d[jen.Id(fl.goName)] = val
				}
			}
		}))
		return lit
	case model.ErrorArray:
		if v.Field == "location" {
			return jen.Id("p").Dot("Location").Call()
		}
		return jen.Index().Add(goDocType(t.elem, false)).ValuesFunc(func(g *jen.Group) {
			for _, it := range v.Items {
				e := docValue(t.elem, it)
				if it.Kind == model.ErrorObject {
					e = elidedType(t.elem, it) // []T{{...}}, as gofmt -s writes it
				}
				g.Add(e)
			}
		})
	case model.ErrorInteger, model.ErrorNumber:
		switch v.Field {
		case "status":
			return jen.Id("p").Dot("Status")
		case "retry_after":
			return jen.Id("p").Dot("RetryAfterSeconds").Call()
		}
		if v.Kind == model.ErrorInteger {
			n, _ := strconv.ParseInt(v.Literal, 10, 64)
			return jen.Lit(int(n))
		}
		x, _ := strconv.ParseFloat(v.Literal, 64)
		return jen.Lit(x)
	case model.ErrorBool:
		return jen.Lit(v.Literal == "true")
	}
	return textValue(v.Parts)
}

// elidedType is an object element of a slice literal without its type.
func elidedType(t *docType, v *model.ErrorValue) jen.Code {
	return jen.Values(jen.DictFunc(func(d jen.Dict) {
		for _, m := range v.Members {
			for _, fl := range t.fields {
				if fl.member == m.Name {
					val := docValue(fl.typ, m.Value)
					if m.Value.Kind == model.ErrorObject && !fl.required {
						val = jen.Op("&").Add(val)
					}
					d[jen.Id(fl.goName)] = val
				}
			}
		}
	}))
}

// caseGroups groups the problems whose answers are the same (status, headers, document), in the
// order of their first problem, so that each answer is written once.
func caseGroups(docs []*docCase) [][]*docCase {
	var groups [][]*docCase
	keys := map[string]int{}
	for _, c := range docs {
		b, _ := json.Marshal(struct {
			S int
			H []model.ErrorHeader
			B *model.ErrorValue
			T string
		}{c.doc.Status, c.doc.Headers, c.doc.Body, c.typ.name})
		if i, ok := keys[string(b)]; ok {
			groups[i] = append(groups[i], c)
			continue
		}
		keys[string(b)] = len(groups)
		groups = append(groups, []*docCase{c})
	}
	return groups
}

// textValue is a string template as a Go expression: its pieces joined with +.
func textValue(parts []model.ErrorPart) jen.Code {
	if len(parts) == 0 {
		return jen.Lit("")
	}
	var out *jen.Statement
	for _, pt := range parts {
		var e jen.Code
		switch pt.Field {
		case "":
			e = jen.Lit(pt.Text)
		case "name":
			e = jen.Id("p").Dot("Name")
		case "title":
			e = jen.Id("p").Dot("Title")
		case "detail":
			e = jen.Id("p").Dot("Message").Call()
		case "status":
			e = jen.Qual("strconv", "Itoa").Call(jen.Id("p").Dot("Status"))
		case "retry_after":
			e = jen.Qual("strconv", "Itoa").Call(jen.Id("p").Dot("RetryAfterSeconds").Call())
		case "pointer":
			e = jen.Id("p").Dot("Pointer")
		case "param":
			e = jen.Id("p").Dot("Param").Call()
		}
		if out == nil {
			out = jen.Add(e)
		} else {
			out = out.Op("+").Add(e)
		}
	}
	return out
}

// problemConst is the runtime's constant of a problem name: "in-flight" is ProblemInFlight.
func problemConst(name string) string {
	return "Problem" + exportedIdent(name)
}

// errorsProfile is the Profile field of an operation whose errors the plan writes.
func errorsProfile(o *opPlan) jen.Code {
	if p := o.op.Settings.Profile; p != "" {
		return namedProfile(p).Dot("WithProblems").Call(jen.Id(o.errors.name))
	}
	return jen.Op("&").Qual(pkgRuntime, "Profile").Values(jen.Dict{jen.Id("Problems"): jen.Id(o.errors.name)})
}
