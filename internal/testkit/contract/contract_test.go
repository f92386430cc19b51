package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// specFor is a one-operation spec under profile name.
func specFor(name string) string {
	return fmt.Sprintf(`openapi: 3.0.3
info: {title: row %[1]s, version: 1.0.0}
x-idempotency: {profile: %[1]s}
paths:
  /v1/things:
    post:
      operationId: createThing
      x-idempotent: true
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, required: [n], properties: {n: {type: integer}}}
      responses:
        '201': {description: made}
`, name)
}

// TestEveryRowIsServed: for every row, `profile: NAME` is accepted and gives the row's settings,
// the generated operation names the row, the runtime's profile of the row has the row's
// settings and answers every problem at the row's status in the row's words, and `idemgen
// spec` declares those answers.
func TestEveryRowIsServed(t *testing.T) {
	for _, row := range defaults.Profiles() {
		t.Run(row.Name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "api.yaml")
			if err := os.WriteFile(path, []byte(specFor(row.Name)), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := spec.Load(context.Background(), spec.Options{Path: path})
			if err != nil || res.Diags.HasErrors() {
				t.Fatalf("profile: %s: %v %v", row.Name, err, res.Diags.Sorted())
			}
			s := res.Doc.Operations[0].Settings
			or := func(v, d int) int {
				if v == 0 {
					return d
				}
				return v
			}
			var scope []string
			for _, h := range row.ScopeHeaders {
				scope = append(scope, h.Name)
			}
			orName := func(v, d string) string {
				if v == "" {
					return d
				}
				return v
			}
			if string(s.Profile) != row.Name || s.Key.MinLength != or(row.Key.MinLength, defaults.KeyMinLength) ||
				s.Key.MaxLength != or(row.Key.MaxLength, defaults.KeyMaxLength) || s.Wait != row.Wait || !slices.Equal(s.ScopeHeaders, scope) ||
				s.Key.Characters != row.Key.Characters.String() || s.Key.Quoted != row.Key.Quoted.String() ||
				string(s.Scope) != orName(row.Scope, defaults.ScopeTenant) ||
				string(s.Body.Nulls) != orName(row.Body.Nulls, defaults.BodyNullsSchema) || string(s.Body.Unknown) != orName(row.Body.Unknown, defaults.BodyUnknownSchema) {
				t.Errorf("the loader's settings %+v (wait %v, scope %v %v, body %+v) are not the row's %+v", s.Key, s.Wait, s.Scope, s.ScopeHeaders, s.Body, row)
			}

			files, err := generator.Generate(res.Doc, generator.Options{Package: "api"})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(files["idemgen_operations.go"]), `runtime.NamedProfile("`+row.Name+`")`) {
				t.Errorf("the generated operation does not name the row:\n%s", files["idemgen_operations.go"])
			}

			p := runtime.NamedProfile(row.Name)
			if p == nil || p.Name != row.Name || p.KeyMinLength != row.Key.MinLength || p.KeyMaxLength != row.Key.MaxLength ||
				p.KeyCharacters != row.Key.Characters || p.KeyQuoted != row.Key.Quoted || p.Scope.String() != orName(row.Scope, defaults.ScopeTenant) ||
				(p.RequestID != nil && p.RequestID.Echo != row.RequestID.Echo) ||
				p.Wait != row.Wait || p.EchoKey != row.EchoKey || !slices.Equal(p.ScopeHeaders, scope) ||
				(p.RequestID != nil) != (row.RequestID.Header != "") || (p.Problems != nil) != (row.Envelope.Writer != "problem+json") {
				t.Fatalf("runtime.NamedProfile(%q) = %+v, not the row", row.Name, p)
			}
			write := p.Problems
			if write == nil {
				write = runtime.ProblemJSON("")
			}
			for _, pr := range defaults.Problems() {
				a := row.Answer(pr.Name)
				w := httptest.NewRecorder()
				write(w, httptest.NewRequest("POST", "/", nil), runtime.Problem{Name: pr.Name, Status: pr.Status, Title: pr.Title, Detail: "d"})
				if w.Code != a.Status || !strings.HasPrefix(w.Header().Get("Content-Type"), row.Envelope.ContentType) {
					t.Errorf("%s: answered %d %s, the row says %d %s", pr.Name, w.Code, w.Header().Get("Content-Type"), a.Status, row.Envelope.ContentType)
				}
				for _, h := range a.Headers {
					if w.Header().Get(h.Name) != h.Value {
						t.Errorf("%s: %s %q, the row says %q", pr.Name, h.Name, w.Header().Get(h.Name), h.Value)
					}
				}
				var doc map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
					t.Fatalf("%s: %v", pr.Name, err)
				}
				if got := at(doc, row.Envelope.TypeAt); row.Envelope.TypeAt != "" && !(got == a.Type || (row.Envelope.TypeIsURI && strings.HasSuffix(got, "/"+a.Type))) {
					t.Errorf("%s: type %q at %s, the row says %q", pr.Name, got, row.Envelope.TypeAt, a.Type)
				}
				if got := at(doc, row.Envelope.CodeAt); a.Code != "" && got != a.Code {
					t.Errorf("%s: code %q at %s, the row says %q", pr.Name, got, row.Envelope.CodeAt, a.Code)
				}
			}
			for _, ra := range row.Answers {
				if ra.At == "" {
					continue
				}
				// An answer for one parameter: the row's code there, and the values it may take.
				a := row.AnswerAt(ra.Problem, ra.At)
				w := httptest.NewRecorder()
				write(w, httptest.NewRequest("POST", "/", nil), runtime.Problem{Name: ra.Problem, Status: a.Status, Detail: "d", Pointer: ra.At, Allowed: []string{"v1", "v2"}})
				var doc map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
					t.Fatalf("%s at %s: %v", ra.Problem, ra.At, err)
				}
				if got := at(doc, row.Envelope.CodeAt); ra.Code != "" && got != ra.Code {
					t.Errorf("%s at %s: code %q, the row says %q", ra.Problem, ra.At, got, ra.Code)
				}
				if ra.Allowed != "" && fmt.Sprint(doc[ra.Allowed]) != "[v1 v2]" {
					t.Errorf("%s at %s: %s is %v, want the allowed values [v1 v2]", ra.Problem, ra.At, ra.Allowed, doc[ra.Allowed])
				}
			}
			if row.RequestID.Header != "" && !row.RequestID.Echo {
				id := p.RequestID.New()
				if !strings.HasPrefix(id, row.RequestID.Prefix) || len(id) != len(row.RequestID.Prefix)+row.RequestID.Length {
					t.Errorf("request id %q is not %s and %d characters", id, row.RequestID.Prefix, row.RequestID.Length)
				}
			}

			out, err := spec.Annotate(res, "json")
			if err != nil {
				t.Fatal(err)
			}
			doc, err := openapi3.NewLoader().LoadFromData(out)
			if err != nil {
				t.Fatal(err)
			}
			kop := doc.Paths.Find("/v1/things").Post
			for _, name := range []string{defaults.ProblemKeyMissing, defaults.ProblemInFlight, defaults.ProblemPayloadMismatch} {
				a := row.Answer(name)
				r := kop.Responses.Value(strconv.Itoa(a.Status))
				if r == nil || r.Value.Content[row.Envelope.ContentType] == nil {
					t.Errorf("idemgen spec declares no %d %s for %s", a.Status, row.Envelope.ContentType, name)
				} else if a.RetryAfter && r.Value.Headers["Retry-After"] == nil {
					t.Errorf("idemgen spec declares the %d for %s without Retry-After", a.Status, name)
				}
			}
		})
	}
}

// at is the string at an RFC 6901 pointer of doc ("" when there is none).
func at(doc map[string]any, pointer string) string {
	var v any = doc
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, ok := v.(map[string]any)
		if !ok || pointer == "" {
			return ""
		}
		v = m[tok]
	}
	s, _ := v.(string)
	return s
}

// TestRowsAreStatedOnce: the behaviour of every row other than the default — its scope header,
// request id headers, answer types, codes and answer headers — is written in the table
// (runtime/defaults/profiles.go) and read through it; the only other place a row's data may
// appear is the runtime's envelope writers (runtime/envelopes.go). No code branches on a row's
// name. Comments, tests, examples (application code) and generated output are left out.
func TestRowsAreStatedOnce(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	allowed := map[string]bool{
		filepath.Join("runtime", "defaults", "profiles.go"): true,
		filepath.Join("runtime", "envelopes.go"):            true,
	}
	var needles []string
	for _, row := range defaults.Profiles() {
		if row.Name == defaults.ProfileDefault {
			continue
		}
		needles = append(needles, `== "`+row.Name+`"`, `Named("`+row.Name+`")`, `NamedProfile("`+row.Name+`")`, `Profile("`+row.Name+`")`)
		for _, h := range row.ScopeHeaders {
			needles = append(needles, strconv.Quote(h.Name))
		}
		for _, s := range []string{row.RequestID.Header, row.RequestID.Original} {
			if s != "" {
				needles = append(needles, strconv.Quote(s))
			}
		}
		for _, a := range row.Answers {
			for _, s := range []string{a.Type, a.Code, a.DocURL} {
				if s != "" {
					needles = append(needles, strconv.Quote(s))
				}
			}
			for _, h := range a.Headers {
				needles = append(needles, strconv.Quote(h.Name))
			}
		}
	}
	comment := regexp.MustCompile(`^\s*//`)
	for _, dir := range []string{"runtime", "internal", "generator", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "testkit") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || allowed[rel] {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(src), "\n") {
				if comment.MatchString(line) {
					continue
				}
				for _, n := range needles {
					if strings.Contains(line, n) {
						t.Errorf("%s:%d restates a profile row (%s): read it from runtime/defaults.Profiles", rel, i+1, n)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
