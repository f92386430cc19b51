package spec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// baseSpec is a small payment API. Line 8 holds the POST's x-idempotent value (%[1]s), line 18
// the GET's (%[2]s), line 2 the document's x-idempotency (%[3]s).
const baseSpec = `openapi: 3.0.3
x-idempotency: %[3]s
info: {title: payments, version: "1"}
paths:
  /payments:
    post:
      operationId: createPayment
      x-idempotent: %[1]s
      parameters: [{name: X-Account, in: header, schema: {type: string}}, {name: limit, in: query, schema: {type: integer}}]
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/PaymentRequest'}
      responses:
        "201": {description: created}
    get:
      operationId: listPayments
      x-idempotent: %[2]s
      responses:
        "200": {description: ok}
components:
  schemas:
    PaymentRequest:
      type: object
      required: [amount, idempotency_key]
      properties:
        amount: {type: integer}
        idempotency_key: {type: string, minLength: 8}
        metadata: {type: object, additionalProperties: {type: string}}
        lines: {type: array, items: {type: object, properties: {note: {type: string}}}}
        data: {type: object, properties: {attributes: {type: object, properties: {idempotencyKey: {type: string}}}}}
        client_time: {type: string, x-idempotency-ignore: %[4]s}
`

// spec writes baseSpec with the given marks into a temporary directory.
func writeSpec(t *testing.T, post, get, doc, ignore string) string {
	t.Helper()
	if doc == "" {
		doc = "{}"
	}
	if ignore == "" {
		ignore = "true"
	}
	if get == "" {
		get = "false"
	}
	return writeFile(t, "openapi.yaml", fmt.Sprintf(baseSpec, post, get, doc, ignore))
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, opts Options) *Result {
	t.Helper()
	res, err := Load(context.Background(), opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return res
}

func errorsOf(l *diag.List) []diag.Diagnostic {
	var out []diag.Diagnostic
	for _, d := range l.Sorted() {
		if d.Severity == diag.Error {
			out = append(out, d)
		}
	}
	return out
}

const postPtr = "/paths/~1payments/post/x-idempotent"

// TestSettingDiagnostics has one row per setting diagnostic (docs/design.md section 2): each must come out alone, with the operation's file and line and the JSON
// pointer of the offending setting.
func TestSettingDiagnostics(t *testing.T) {
	cases := []struct {
		name       string
		post, get  string
		doc        string
		ignore     string
		code       string
		line       int
		pointer    string
		msgContain string
	}{
		{name: "unknown field", post: `{retension: 24h}`, code: "unknown-field", line: 8, pointer: postPtr + "/retension", msgContain: `"retension"; did you mean "retention"?`},
		{name: "unknown field far from any", post: `{ttl: 24h}`, code: "unknown-field", line: 8, pointer: postPtr + "/ttl", msgContain: "known: key, scope, retention"},
		{name: "unknown nested field", post: `{key: {header: X-Key, requierd: true}}`, code: "unknown-field", line: 8, pointer: postPtr + "/key/requierd"},
		{name: "mark of wrong type", post: `"yes"`, code: "wrong-type", line: 8, pointer: postPtr, msgContain: `must be true, false (not marked) or a settings object, not the string "yes"`},
		{name: "duration of wrong type", post: `{retention: 5}`, code: "wrong-type", line: 8, pointer: postPtr + "/retention"},
		{name: "required not a boolean", post: `{key: {required: "no"}}`, code: "wrong-type", line: 8, pointer: postPtr + "/key/required"},
		{name: "exclude not a list", post: `{fingerprint: {exclude: /amount}}`, code: "wrong-type", line: 8, pointer: postPtr + "/fingerprint/exclude"},
		{name: "bad duration", post: `{retention: 1 day}`, code: "bad-duration", line: 8, pointer: postPtr + "/retention", msgContain: "1 day"},
		{name: "negative lease", post: `{lease: "-5s"}`, code: "bad-duration", line: 8, pointer: postPtr + "/lease"},
		{name: "zero retention", post: `{retention: 0s}`, code: "bad-duration", line: 8, pointer: postPtr + "/retention"},
		{name: "negative wait", post: `{concurrency: {wait: -1s}}`, code: "bad-duration", line: 8, pointer: postPtr + "/concurrency/wait", msgContain: `"-1s" must not be negative (0s is allowed)`},
		{name: "zero lease", post: `{lease: 0s}`, code: "bad-duration", line: 8, pointer: postPtr + "/lease", msgContain: "must be positive"},
		{name: "bad size", post: `{limits: {body: 1MB}}`, code: "bad-size", line: 8, pointer: postPtr + "/limits/body"},
		{name: "bad status", post: `{replay: {statuses: [2xx, "6xx"]}}`, code: "bad-status", line: 8, pointer: postPtr + "/replay/statuses/1"},
		{name: "statuses that store no success", post: `{replay: {statuses: ["!404", 4xx]}}`, code: "replay-stores-no-success", line: 8, pointer: postPtr + "/replay/statuses", msgContain: `replay.statuses [!404, 4xx] stores no 2xx answer`},
		{name: "empty statuses", post: `{replay: {statuses: []}}`, code: "bad-value", line: 8, pointer: postPtr + "/replay/statuses", msgContain: "replay.statuses is empty: nothing would ever be stored; leave it out for the default [2xx, 4xx, !408, !409, !425, !429]"},
		{name: "bad mode", post: `{mode: lazy}`, code: "bad-value", line: 8, pointer: postPtr + "/mode"},
		{name: "bad scope", post: `{scope: global}`, code: "bad-value", line: 8, pointer: postPtr + "/scope"},
		{name: "misspelt profile", post: `{profile: strpe}`, code: "bad-value", line: 8, pointer: postPtr + "/profile", msgContain: `"strpe" is not one of idemgen, stripe, acp, ietf; did you mean "stripe"?`},
		{name: "forbidden replay header", post: `{replay: {headers: [Set-Cookie]}}`, code: "bad-value", line: 8, pointer: postPtr + "/replay/headers/0", msgContain: "Set-Cookie is never stored or replayed (docs/runtime.md, Replay)"},
		{name: "min above max", post: `{key: {minLength: 40, maxLength: 20}}`, code: "bad-value", line: 8, pointer: postPtr + "/key/minLength"},
		{name: "length out of range", post: `{key: {maxLength: 10000}}`, code: "bad-value", line: 8, pointer: postPtr + "/key/maxLength"},
		{name: "bad pattern", post: `{key: {pattern: "(?=unclosed"}}`, code: "bad-pattern", line: 8, pointer: postPtr + "/key/pattern"},
		{name: "header and body", post: `{key: {header: X-Key, body: /idempotency_key}}`, code: "key-conflict", line: 8, pointer: postPtr + "/key"},
		{name: "query and header", post: `{key: {query: request_id, header: X-Key}}`, code: "key-conflict", line: 8, pointer: postPtr + "/key", msgContain: "key.header, key.body and key.query"},
		{name: "empty query", post: `{key: {query: ""}}`, code: "bad-value", line: 8, pointer: postPtr + "/key/query"},
		{name: "key.query not a string", post: `{key: {query: limit}}`, code: "key-query-not-string", line: 8, pointer: postPtr + "/key/query", msgContain: "integer"},
		{name: "echo of a query key", post: `{key: {query: request_id, echo: true}}`, code: "key-echo-not-header", line: 8, pointer: postPtr + "/key/echo", msgContain: "takes its key in the query parameter request_id"},
		{name: "echo of a body key", post: `{key: {body: /data/attributes/idempotencyKey, echo: true}}`, code: "key-echo-not-header", line: 8, pointer: postPtr + "/key/echo", msgContain: "takes its key in the body field /data/attributes/idempotencyKey"},
		{name: "exclude matches nothing", post: `{fingerprint: {exclude: [/metadata/x, /nope]}}`, code: "exclude-matches-nothing", line: 8, pointer: postPtr + "/fingerprint/exclude/1", msgContain: `"/nope"`},
		{name: "exclude wildcard into scalar", post: `{fingerprint: {exclude: ["/amount/*"]}}`, code: "exclude-matches-nothing", line: 8, pointer: postPtr + "/fingerprint/exclude/0"},
		{name: "exclude array property that does not exist", post: `{fingerprint: {exclude: ["/lines/*/price"]}}`, code: "exclude-matches-nothing", line: 8, pointer: postPtr + "/fingerprint/exclude/0"},
		{name: "key.body not a string", post: `{key: {body: /amount}}`, code: "key-body-not-string", line: 8, pointer: postPtr + "/key/body", msgContain: "integer"},
		{name: "key.body names nothing", post: `{key: {body: /data/attributes/key}}`, code: "key-body-not-string", line: 8, pointer: postPtr + "/key/body"},
		{name: "key.body not a pointer", post: `{key: {body: idempotency_key}}`, code: "key-body-not-string", line: 8, pointer: postPtr + "/key/body"},
		{name: "mark on GET", post: `true`, get: `true`, code: "safe-method", line: 18, pointer: "/paths/~1payments/get/x-idempotent"},
		{name: "document defaults unknown field", post: `true`, doc: `{retentoin: 1h}`, code: "unknown-field", line: 2, pointer: "/x-idempotency/retentoin"},
		{name: "document defaults not an object", post: `true`, doc: `true`, code: "wrong-type", line: 2, pointer: "/x-idempotency"},
		{name: "ignore not a boolean", post: `true`, ignore: `"yes"`, code: "wrong-type", line: 32},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSpec(t, tc.post, tc.get, tc.doc, tc.ignore)
			res := load(t, Options{Path: path})
			errs := errorsOf(res.Diags)
			if len(errs) != 1 {
				t.Fatalf("want exactly one error %s, got %d:\n%s", tc.code, len(errs), (&diag.Errors{List: errs}).Error())
			}
			d := errs[0]
			if d.Code != tc.code || d.Loc.File != path || d.Loc.Line != tc.line || d.Loc.Pointer != tc.pointer {
				t.Errorf("got %s\nwant code %s at %s:%d (at #%s)", d, tc.code, path, tc.line, tc.pointer)
			}
			if !strings.Contains(d.Message, tc.msgContain) {
				t.Errorf("message %q does not mention %q", d.Message, tc.msgContain)
			}
		})
	}
}

// TestValidSettingsHaveNoDiagnostics guards the table above: the same spec with good settings
// (including pointers through map keys and array wildcards) loads without any diagnostic.
func TestValidSettingsHaveNoDiagnostics(t *testing.T) {
	post := `{key: {body: /data/attributes/idempotencyKey, required: false}, scope: operation, retention: 48h, lease: 1m, mode: lease,
        fingerprint: {exclude: [/metadata/trace_id, "/metadata/*", "/lines/*/note", /lines/0/note], headers: [x-account], body: canonical},
        replay: {headers: [X-Request-Id], statuses: [201, 4xx, "!409"]}, concurrency: {wait: 2s}, limits: {body: 64KiB, response: 2MiB}}`
	res := load(t, Options{Path: writeSpec(t, post, "", "", "")})
	if res.Diags.Len() != 0 {
		t.Fatalf("unexpected diagnostics:\n%s", (&diag.Errors{List: res.Diags.Sorted()}).Error())
	}
}

// TestAllErrorsInOneRunSorted: every error of a document comes out in one run, in the same
// order every time.
func TestAllErrorsInOneRunSorted(t *testing.T) {
	path := writeSpec(t, `{retension: 1h, lease: soon, fingerprint: {exclude: [/nope]}, key: {body: /amount}}`, `true`, `{mode: lazy}`, "")
	var first string
	for i := 0; i < 3; i++ {
		res := load(t, Options{Path: path})
		errs := errorsOf(res.Diags)
		var codes []string
		for _, d := range errs {
			codes = append(codes, d.Code)
		}
		got := (&diag.Errors{List: errs}).Error()
		if i == 0 {
			first = got
			want := "bad-value unknown-field bad-duration exclude-matches-nothing key-body-not-string safe-method"
			if strings.Join(codes, " ") != want {
				t.Fatalf("codes %q, want %q:\n%s", strings.Join(codes, " "), want, got)
			}
		} else if got != first {
			t.Fatalf("run %d printed a different list:\n%s\nfirst:\n%s", i, got, first)
		}
	}
}

// TestMisspeltExtension: an extension that looks like idemgen's but is not is an error, not a
// silently unguarded operation. On an operation, x-idempotency is read as a mark with
// x-idempotent's fields (the spelling some specs use there); at the root, x-idempotent is not
// the document's defaults.
func TestMisspeltExtension(t *testing.T) {
	path := writeSpec(t, "true", "", "", "")
	spec, _ := os.ReadFile(path)
	s := strings.Replace(string(spec), "      x-idempotent: true\n", "      x-idempotency: {retention: 1h}\n      x-idempotant: true\n", 1)
	s = strings.Replace(s, "x-idempotency: {}\n", "x-idempotent: true\n", 1)
	res := load(t, Options{Path: writeFile(t, "m.yaml", s)})
	errs := errorsOf(res.Diags)
	if len(errs) != 2 || errs[0].Code != "unknown-extension" || errs[0].Loc.Line != 2 || errs[0].Loc.Pointer != "/x-idempotent" ||
		errs[1].Code != "unknown-extension" || errs[1].Loc.Line != 9 || !strings.Contains(errs[1].Message, "x-idempotant here; did you mean x-idempotent?") {
		t.Fatalf("errors:\n%s", (&diag.Errors{List: errs}).Error())
	}
	if ops := res.Doc.Operations; len(ops) != 1 || ops[0].Mark != model.MarkXIdempotency || ops[0].Settings.Retention != time.Hour {
		t.Fatalf("operations %+v", ops)
	}
}

// TestReplayStatusesWarnings: replay.statuses whose order changes their meaning, or that do
// not store a success the operation declares, load with a located warning (an error when no
// success is stored at all: TestSettingDiagnostics).
func TestReplayStatusesWarnings(t *testing.T) {
	for _, tc := range []struct {
		name, post, code, pointer, msg string
	}{
		{"an exclusion decided over", `{replay: {statuses: [2xx, "!404", 4xx]}}`, "replay-rule-order", postPtr + "/replay/statuses/1", `"!404" decides nothing: "4xx" after it matches the same statuses`},
		{"a repeated rule", `{replay: {statuses: [4xx, 2xx, 4xx]}}`, "replay-rule-order", postPtr + "/replay/statuses/0", `"4xx" decides nothing: the rules after it match every status it matches`},
		{"a declared success not stored", `{replay: {statuses: [202, 4xx]}}`, "replay-unstored-success", postPtr + "/replay/statuses", "declares the success 201, which its replay.statuses do not store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := load(t, Options{Path: writeSpec(t, tc.post, "", "", "")})
			if errs := errorsOf(res.Diags); len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			var got []diag.Diagnostic
			for _, d := range res.Diags.Sorted() {
				if d.Code == tc.code {
					got = append(got, d)
				}
			}
			if len(got) != 1 || got[0].Loc.Pointer != tc.pointer || !strings.Contains(got[0].Message, tc.msg) {
				t.Fatalf("want one %s warning at %s mentioning %q, got %v", tc.code, tc.pointer, tc.msg, res.Diags.Sorted())
			}
		})
	}
}
