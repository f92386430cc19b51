package spec

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// TestAnnotatedSpecRoundTrips: the spec idemgen spec writes loads and validates (kin-openapi's
// Validate, as SDK generators check a document), and idemgen reads the same operations from it
// with the same settings, without --infer or a config, in both formats. Its additions are there:
// the key header with its rules, Idempotent-Replayed on stored responses, the error responses
// with the error schema in use, and the other tools' annotations.
func TestAnnotatedSpecRoundTrips(t *testing.T) {
	const dir = "../../testdata/specs/"
	for _, opts := range []Options{
		{Path: dir + "petstore.yaml"},
		{Path: dir + "body-key.yaml"},
		{Path: dir + "lease.yaml"},
		{Path: dir + "repeatable.yaml"},
		{Path: dir + "query-key.yaml", ConfigPath: dir + "query-key.config.yaml"},
		{Path: dir + "stripe-profile.yaml"},
		{Path: dir + "nullable31.yaml"},
		{Path: dir + "form.yaml"},
		{Path: dir + "oneof-key.yaml", ConfigPath: dir + "oneof-key.config.yaml"},
		{Path: dir + "round3/treasury.yaml", ConfigPath: dir + "round3/treasury.stainless.yaml"},
		{Path: dir + "round3/annotations.yaml"},
		{Path: dir + "vendor/adyen-checkout-v71.json", Infer: true},
	} {
		for _, format := range []string{"yaml", "json"} {
			t.Run(filepath.Base(opts.Path)+"."+format, func(t *testing.T) {
				if testing.Short() && strings.Contains(opts.Path, "vendor") {
					t.Skip("a vendor spec")
				}
				res := load(t, opts)
				if errs := errorsOf(res.Diags); len(errs) > 0 {
					t.Fatal(errs)
				}
				out, err := Annotate(res, format)
				if err != nil {
					t.Fatal(err)
				}
				path := writeFile(t, "annotated."+format, string(out))

				// It is a valid OpenAPI document.
				loader := openapi3.NewLoader()
				doc, err := loader.LoadFromFile(path)
				if err != nil {
					t.Fatalf("the annotated spec does not load: %v", err)
				}
				if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
					t.Fatalf("the annotated spec does not validate: %v", err)
				}

				// idemgen reads the same operations, with the same settings, from its own marks.
				again := load(t, Options{Path: path})
				if errs := errorsOf(again.Diags); len(errs) > 0 {
					t.Fatalf("reading the annotated spec: %v", errs)
				}
				if len(again.Doc.Operations) != len(res.Doc.Operations) {
					t.Fatalf("%d operations, want %d", len(again.Doc.Operations), len(res.Doc.Operations))
				}
				for i, op := range res.Doc.Operations {
					got := again.Doc.Operations[i]
					if got.Method != op.Method || got.Path != op.Path || got.ID != op.ID || got.Mark != model.MarkSpec {
						t.Errorf("operation %d: %s %s %s (%s), want %s %s %s", i, got.Method, got.Path, got.ID, got.Mark, op.Method, op.Path, op.ID)
					}
					if a, b := settingsValue(got.Settings), settingsValue(op.Settings); !equalJSON(t, a, b) {
						t.Errorf("%s: settings\n%v\nwant\n%v", op.ID, a, b)
					}
				}

				// What it adds.
				for _, op := range res.Doc.Operations {
					kop := doc.Paths.Find(op.Path).GetOperation(op.Method)
					if k := op.Settings.Key; k.Carrier == model.CarrierHeader || k.Carrier == model.CarrierQuery {
						var key *openapi3.Parameter
						for _, p := range kop.Parameters {
							if (k.Carrier == model.CarrierHeader && p.Value.In == "header" && strings.EqualFold(p.Value.Name, k.Header)) ||
								(k.Carrier == model.CarrierQuery && p.Value.In == "query" && p.Value.Name == k.Query) {
								key = p.Value
							}
						}
						if key == nil || key.Required != op.Settings.Key.Required || key.Schema.Value.MinLength != uint64(op.Settings.Key.MinLength) ||
							*key.Schema.Value.MaxLength != uint64(op.Settings.Key.MaxLength) || key.Schema.Value.Pattern != op.Settings.Key.Pattern {
							t.Errorf("%s: key parameter %+v", op.ID, key)
						}
						if k.Carrier == model.CarrierHeader && (kop.Extensions[extFernIdempotent] != true || doc.Extensions[extFernHeaders] == nil) {
							t.Errorf("%s: no Fern annotations", op.ID)
						}
					}
					retries, _ := kop.Extensions[extSpeakeasyRetry].(map[string]any)
					if codes, _ := retries["statusCodes"].([]any); len(codes) != 2 || codes[0] != "409" || codes[1] != "503" {
						t.Errorf("%s: x-speakeasy-retries %v", op.ID, kop.Extensions[extSpeakeasyRetry])
					}
					// Each problem's answer, at its status in runtime/defaults' table, with
					// Retry-After where the table says so.
					row := profileRow(op.Settings.Profile)
					mt := row.Envelope.ContentType
					wantRetryAfter := map[string]bool{}
					for _, p := range defaults.Problems() {
						if _, declared := problemMeanings[p.Name]; !declared || p.Name == defaults.ProblemKeyExpired {
							continue
						}
						code := strconv.Itoa(row.Answer(p.Name).Status)
						wantRetryAfter[code] = wantRetryAfter[code] || p.RetryAfter
					}
					for code, withRetryAfter := range wantRetryAfter {
						r := kop.Responses.Value(code)
						if r == nil {
							t.Errorf("%s: no %s response", op.ID, code)
							continue
						}
						if _, own := res.src.doc.Paths.Find(op.Path).GetOperation(op.Method).Responses.Map()[code]; own {
							continue // the operation's own answer, left as written
						}
						if r.Value.Content[mt] == nil {
							t.Errorf("%s: the %s response has no %s content", op.ID, code, mt)
						}
						if got := r.Value.Headers[retryAfterHeader] != nil; got != withRetryAfter {
							t.Errorf("%s: the %s response declares Retry-After: %v, want %v", op.ID, code, got, withRetryAfter)
						}
					}
					if (kop.Responses.Value("412") != nil) != (op.Settings.Key.FirstSent != "") {
						t.Errorf("%s: a 412 response only where Repeatability-First-Sent is checked", op.ID)
					}
					replayed := 0
					for code, r := range kop.Responses.Map() {
						if r.Value.Headers[replayedHeader] != nil {
							replayed++
							if !stored(code, op.Settings.Replay.Statuses) {
								t.Errorf("%s: %s is never replayed but declares %s", op.ID, code, replayedHeader)
							}
						}
					}
					if replayed == 0 {
						t.Errorf("%s: no response declares %s", op.ID, replayedHeader)
					}
				}
			})
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	return mustJSON(t, a) == mustJSON(t, b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAnnotateRefusesADocumentWithErrors: nothing is written for a document with errors.
func TestAnnotateRefusesADocumentWithErrors(t *testing.T) {
	res := load(t, Options{Path: "../../testdata/specs/round3/duplicate-ids.yaml"})
	if _, err := Annotate(res, "yaml"); err == nil {
		t.Fatal("annotated a document with errors")
	}
}

// TestAnnotateWithErrorsMapping: under an errors mapping the annotated spec declares each
// problem at the status and in the schema the mapping answers it with (not idemgen's own
// problem schema), so idemgen reads the same mapping back from it (with the config that holds
// it, when it is a config's), and the retry policy names the mapping's statuses.
func TestAnnotateWithErrorsMapping(t *testing.T) {
	const dir = "../../testdata/specs/"
	for _, c := range []struct {
		opts Options
		// want is the schema $ref of each declared status ("" where the mapping writes its
		// schema itself); absent statuses must not be declared.
		want    map[string]string
		retries string
		header  string // a header the mapping sets, declared on the response of that status
	}{
		{Options{Path: dir + "errors-svix.yaml"}, map[string]string{"400": "#/components/schemas/HttpErrorOut", "413": "#/components/schemas/HttpErrorOut", "415": "#/components/schemas/HttpErrorOut", "503": "#/components/schemas/HttpErrorOut"}, "409,503", ""},
		{Options{Path: dir + "errors-twilio.yaml", ConfigPath: dir + "errors-twilio.config.yaml"}, map[string]string{"400": "", "409": "", "413": "", "415": "", "422": "", "429": "", "503": ""}, "409,503", ""},
		{Options{Path: dir + "errors-stripe.yaml"}, map[string]string{"400": "#/components/schemas/error", "409": "#/components/schemas/error", "503": "#/components/schemas/error"}, "409,503", "400 Stripe-Should-Retry"},
	} {
		t.Run(filepath.Base(c.opts.Path), func(t *testing.T) {
			res := load(t, c.opts)
			if errs := errorsOf(res.Diags); len(errs) > 0 {
				t.Fatal(errs)
			}
			out, err := Annotate(res, "yaml")
			if err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, "annotated.yaml", string(out))
			doc, err := openapi3.NewLoader().LoadFromFile(path)
			if err != nil {
				t.Fatalf("the annotated spec does not load: %v", err)
			}
			if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
				t.Fatalf("the annotated spec does not validate: %v", err)
			}
			if doc.Components != nil && (doc.Components.Schemas["IdempotencyProblem"] != nil || doc.Components.Schemas["IdempotencyStripeError"] != nil) {
				t.Error("idemgen's own error schema was added beside the mapping's")
			}
			again := load(t, Options{Path: path, ConfigPath: c.opts.ConfigPath})
			if errs := errorsOf(again.Diags); len(errs) > 0 {
				t.Fatalf("reading the annotated spec back: %v", errs)
			}
			for i, op := range res.Doc.Operations {
				if e := again.Doc.Operations[i].Settings.Errors; e == nil || e.ContentType != op.Settings.Errors.ContentType || !equalJSON(t, e.Docs, op.Settings.Errors.Docs) {
					t.Errorf("%s: the mapping read back differs:\n%s\nwant\n%s", op.ID, mustJSON(t, e), mustJSON(t, op.Settings.Errors))
				}
				src := res.src.doc.Paths.Find(op.Path).GetOperation(op.Method).Responses
				kop := doc.Paths.Find(op.Path).GetOperation(op.Method)
				for _, code := range []string{"400", "409", "412", "413", "415", "422", "429", "503"} {
					r := kop.Responses.Value(code)
					ref, want := c.want[code]
					if src.Value(code) != nil {
						continue // the operation's own answer, left as written
					}
					switch {
					case !want && r != nil:
						t.Errorf("%s: a %s response, which the mapping never answers", op.ID, code)
					case want && r == nil:
						t.Errorf("%s: no %s response", op.ID, code)
					case want:
						mt := r.Value.Content[op.Settings.Errors.ContentType]
						got := ""
						if mt != nil && mt.Schema != nil {
							got = mt.Schema.Ref
						}
						if mt == nil || got != ref {
							t.Errorf("%s: the %s response's schema is %q, want %q", op.ID, code, got, ref)
						}
					}
				}
				if c.header != "" {
					code, name, _ := strings.Cut(c.header, " ")
					if kop.Responses.Value(code).Value.Headers[name] == nil {
						t.Errorf("%s: the %s response does not declare %s", op.ID, code, name)
					}
				}
				retries, _ := kop.Extensions[extSpeakeasyRetry].(map[string]any)
				var codes []string
				for _, v := range retries["statusCodes"].([]any) {
					codes = append(codes, v.(string))
				}
				if strings.Join(codes, ",") != c.retries {
					t.Errorf("%s: x-speakeasy-retries for %v, want %s", op.ID, codes, c.retries)
				}
			}
		})
	}
}

// TestProblemMeaningsNameTheRuntimesProblems: the annotated spec describes the runtime's problems
// by runtime/defaults' names, every one but the application's own (unauthenticated, internal).
func TestProblemMeaningsNameTheRuntimesProblems(t *testing.T) {
	for name, means := range problemMeanings {
		if defaults.ProblemStatus(name) == 0 {
			t.Errorf("problemMeanings describes %q, which is not a runtime/defaults problem", name)
		}
		if !strings.Contains(means, "("+name+")") {
			t.Errorf("the meaning of %s does not name it: %q", name, means)
		}
	}
	for _, p := range defaults.Problems() {
		_, described := problemMeanings[p.Name]
		if own := p.Name == defaults.ProblemUnauthenticated || p.Name == defaults.ProblemInternal; described == own {
			t.Errorf("%s: described %v", p.Name, described)
		}
	}
}
