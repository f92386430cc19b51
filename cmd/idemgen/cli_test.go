package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const vendor = "../../testdata/specs/vendor/"

// idemgen runs the command in-process and returns its exit code, stdout and stderr.
func idemgen(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

const markedSpec = `openapi: 3.0.3
info: {title: shop, version: "1"}
paths:
  /payments:
    post:
      operationId: createPayment
      x-idempotent: {retention: 48h, fingerprint: {exclude: [/note]}}
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {amount: {type: integer}, note: {type: string}}}
      responses: {"201": {description: created}}
  /refunds:
    post:
      operationId: createRefund
      parameters: [{name: Idempotency-Key, in: header, schema: {type: string}}]
      responses: {"201": {description: created}}
`

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestListFormats(t *testing.T) {
	spec := writeTemp(t, "openapi.yaml", markedSpec)

	code, out, errOut := idemgen(t, "list", spec)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "METHOD") || !strings.Contains(lines[1], "createPayment") ||
		!strings.Contains(lines[1], "header Idempotency-Key") || !strings.Contains(lines[1], "48h") || !strings.Contains(lines[1], "/note") {
		t.Errorf("table:\n%s", out)
	}
	// The unmarked refund operation with an Idempotency-Key header is a warning, not an error.
	if !strings.Contains(errOut, "warning[unmarked-idempotency-key]") || !strings.Contains(errOut, `"createRefund":`) {
		t.Errorf("stderr:\n%s", errOut)
	}

	code, out, _ = idemgen(t, "list", spec, "--infer", "--format", "json")
	if code != exitOK {
		t.Fatalf("json exit %d", code)
	}
	var doc struct {
		Version    int `json:"version"`
		Operations []struct {
			Method, Path, OperationID, Mark string
			Key                             struct {
				Carrier, Name string
				Required      bool
			}
			Retention        string
			RetentionSeconds int64
			Fingerprint      struct{ Exclude, Headers []string }
			Replay           struct{ Statuses []string }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if doc.Version != 1 || len(doc.Operations) != 2 {
		t.Fatalf("json doc %+v", doc)
	}
	p, r := doc.Operations[0], doc.Operations[1]
	if p.OperationID != "createPayment" || p.Mark != "spec" || p.Retention != "48h" || p.RetentionSeconds != 172800 ||
		p.Key.Carrier != "header" || p.Key.Name != "Idempotency-Key" || !p.Key.Required || strings.Join(p.Fingerprint.Exclude, ",") != "/note" ||
		p.Fingerprint.Headers == nil || strings.Join(p.Replay.Statuses, ",") != "2xx,4xx,!408,!409,!425,!429" {
		t.Errorf("payment %+v", p)
	}
	if r.OperationID != "createRefund" || r.Mark != "infer" || r.Key.Required {
		t.Errorf("inferred refund %+v (its declared header is optional)", r)
	}

	code, out, _ = idemgen(t, "list", spec, "--format", "markdown")
	if code != exitOK || !strings.HasPrefix(out, "| Method | Path |") || !strings.Contains(out, "| `POST` | `/payments` | `createPayment` |") {
		t.Errorf("markdown (exit %d):\n%s", code, out)
	}
}

func TestListWithConfigOnVendorSpec(t *testing.T) {
	code, out, errOut := idemgen(t, "list", vendor+"paypal-payments-v2.json", "--config", "../../testdata/config/paypal.yaml", "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Operations []struct {
			OperationID, Mark, Mode, Retention string
			Key                                struct {
				Name     string
				Required bool
			}
			Fingerprint struct{ Headers []string }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// PayPal declares its error answers in schemas written inline, which an errors mapping
	// cannot name: the one warning list may print.
	if len(doc.Operations) != 3 || strings.Count(errOut, "warning[") != strings.Count(errOut, "warning[errors-schema-inline]") {
		t.Fatalf("%d operations, stderr %q", len(doc.Operations), errOut)
	}
	for _, op := range doc.Operations {
		if op.Mark != "config" || op.Key.Name != "PayPal-Request-Id" || op.Retention != "72h" {
			t.Errorf("%+v", op)
		}
	}
	if doc.Operations[1].Mode != "lease" || !doc.Operations[2].Key.Required || doc.Operations[0].Key.Required ||
		strings.Join(doc.Operations[2].Fingerprint.Headers, ",") != "Paypal-Partner-Attribution-Id" {
		t.Errorf("per-operation settings lost: %+v", doc.Operations)
	}
}

func TestCheckExitCodes(t *testing.T) {
	spec := writeTemp(t, "openapi.yaml", markedSpec)
	code, out, errOut := idemgen(t, "check", spec)
	if code != exitOK || !strings.Contains(out, "1 idempotent operation, 0 errors, 1 warning") {
		t.Errorf("check: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, _, _ := idemgen(t, "check", spec, "--strict"); code != exitSpec {
		t.Errorf("check --strict with a warning: exit %d, want %d", code, exitSpec)
	}
	if code, _, errOut := idemgen(t, "check", spec, "--strict", "--infer"); code != exitOK {
		t.Errorf("check --strict --infer: exit %d: %s", code, errOut)
	}

	bad := writeTemp(t, "bad.yaml", strings.Replace(markedSpec, "retention: 48h", "retention: 2 days, mode: lazy", 1))
	code, _, errOut = idemgen(t, "check", bad)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != exitSpec || len(lines) < 3 || !strings.Contains(lines[0], "bad.yaml:7") || !strings.Contains(lines[0], "error[bad-duration]") ||
		!strings.Contains(lines[1], "bad.yaml:7:47: error[bad-value]") || !strings.Contains(lines[1], "#/paths/~1payments/post/x-idempotent/mode") {
		t.Errorf("check bad: exit %d\n%s", code, errOut)
	}
	// generate's loader path (loadFlags.load) fails the same way.
	code, _, _ = idemgen(t, "list", bad)
	if code != exitSpec {
		t.Errorf("list on a bad spec: exit %d", code)
	}

	code, _, errOut = idemgen(t, "check", vendor+"square-connect-v2-oas3-2025-05-21.json")
	if code != exitSpec || !strings.Contains(errOut, "square-connect-v2-oas3-2025-05-21.json:8308:21: error[dangling-ref]") || strings.Contains(errOut, "goroutine") {
		t.Errorf("square: exit %d\n%s", code, errOut)
	}
}

// TestCheckAgreesWithGenerate: a spec the generator refuses fails check and list with the same
// located errors, so that check's verdict is generate's (docs/cli.md).
func TestCheckAgreesWithGenerate(t *testing.T) {
	for _, c := range []struct{ name, spec, code string }{
		{"json and form schemas differ", `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /p:
    post:
      operationId: createP
      x-idempotent: true
      requestBody:
        content:
          application/json: {schema: {type: object, properties: {a: {type: string}}}}
          application/x-www-form-urlencoded: {schema: {type: object, properties: {b: {type: string}}}}
      responses: {"201": {description: ok}}
`, "error[unsupported-schema]"},
		{"a body key in json beside text/plain", `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /p:
    post:
      operationId: createP
      x-idempotent: {key: {body: /a}}
      requestBody:
        content:
          application/json: {schema: {type: object, properties: {a: {type: string}}}}
          text/plain: {}
      responses: {"201": {description: ok}}
`, "error[unsupported-schema]"},
		{"undeclared path parameter", `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /p/{undeclared}:
    post:
      operationId: createP
      x-idempotent: true
      responses: {"201": {description: ok}}
`, "error[bad-path]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := writeTemp(t, "openapi.yaml", c.spec)
			gcode, _, gerr := idemgen(t, "generate", spec, "--out", t.TempDir())
			for _, cmd := range [][]string{{"check", spec}, {"list", spec}} {
				code, _, errOut := idemgen(t, cmd...)
				if code != exitSpec || code != gcode || !strings.Contains(errOut, c.code) {
					t.Errorf("%s: exit %d (generate %d)\n%s\ngenerate:\n%s", cmd[0], code, gcode, errOut, gerr)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	spec := writeTemp(t, "openapi.yaml", markedSpec)
	for _, args := range [][]string{
		{"list"},
		{"list", spec, spec},
		{"list", spec, "--format", "xml"},
		{"list", spec, "--bogus"},
		{"check", filepath.Join(t.TempDir(), "missing.yaml")},
		{"list", spec, "--config", "missing-idemgen.yaml"},
		{"frobnicate"},
	} {
		code, _, errOut := idemgen(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "idemgen --help") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	code, out, _ := idemgen(t, "version")
	if code != exitOK || !strings.HasPrefix(out, "idemgen ") || len(strings.TrimSpace(out)) <= len("idemgen") {
		t.Errorf("version: %d %q", code, out)
	}
	// The go:generate suggestion works without idemgen on PATH.
	if code, out, _ := idemgen(t, "generate", "--help"); code != exitOK ||
		!strings.Contains(out, "//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate ") {
		t.Errorf("generate --help lacks the go run form:\n%s", out)
	}
	code, out, _ = idemgen(t, "--help")
	for _, want := range []string{"x-idempotent", "check", "list", "--infer", "Exit codes: 0 success, 1", "2 wrong flags"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestListWithOverlay(t *testing.T) {
	code, out, errOut := idemgen(t, "list", vendor+"paypal-payments-v2.json", "--overlay", "../../testdata/config/paypal.overlay.yaml", "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Operations []struct {
			Path, Mark, Retention string
			Key                   struct {
				Name     string
				Required bool
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Operations) != 1 {
		t.Fatalf("%d operations:\n%s", len(doc.Operations), out)
	}
	op := doc.Operations[0]
	// The overlay sets the header, not required: the declared optional header keeps it optional.
	if op.Path != "/v2/payments/captures/{capture_id}/refund" || op.Mark != "spec" || op.Retention != "72h" || op.Key.Name != "PayPal-Request-Id" || op.Key.Required {
		t.Errorf("%+v", op)
	}
	// The two other operations with PayPal-Request-Id are still reported as unmarked.
	if strings.Count(errOut, "warning[unmarked-idempotency-key]") != 2 {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// TestListInferOnVendorSpecs: what a user pointing `idemgen list --infer` at each public spec
// sees (internal/spec's corpus test checks the details).
func TestListInferOnVendorSpecs(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 13 MB of specs")
	}
	for file, want := range map[string]int{
		"adyen-checkout-v71.json": 22, "paypal-payments-v2.json": 3, "coinbase-cdp.yaml": 66,
		"twilio-api-v2010.yaml": 4, "svix-server-openapi.json": 10, "stripe-spec3.yaml": 0, "swagger-petstore-v3.yaml": 0,
		"mollie-api.yaml": 49,
	} {
		code, out, errOut := idemgen(t, "list", "--infer", "--format", "json", vendor+file)
		var doc struct{ Operations []json.RawMessage }
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK || len(doc.Operations) != want {
			t.Errorf("%s: exit %d, %d operations, want %d (%v)\n%s", file, code, len(doc.Operations), want, err, errOut)
		}
	}
	// A spec with errors lists what was understood, then fails; the summary counts both.
	code, out, errOut := idemgen(t, "list", "--infer", "--format", "json", vendor+"square-connect-v2-oas3-2025-05-21.json")
	var sq struct {
		Errors     int
		Operations []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &sq); err != nil || code != exitSpec || len(sq.Operations) != 66 || sq.Errors != 6 ||
		!strings.Contains(errOut, "square-connect-v2-oas3-2025-05-21.json: 66 idempotent operations, 6 errors, 10 warnings") {
		t.Errorf("square: exit %d, %d operations, %d errors (%v)\n%s", code, len(sq.Operations), sq.Errors, err, errOut)
	}
	for _, file := range []string{"square-connect-v2-oas3-2025-05-21.json", "unit-openapi/openapi.json"} {
		code, _, errOut := idemgen(t, "list", "--infer", vendor+file)
		first := errOut[strings.Index(errOut, ": error["):]
		first, _, _ = strings.Cut(first, "\n")
		if code != exitSpec || !strings.Contains(errOut, ".json:") || !strings.Contains(first, "$ref") {
			t.Errorf("%s: exit %d, first line %q", file, code, first)
		}
	}
}

// oneRunSpec has one fault of each stage in different operations: a settings error the loader
// reports (bad-duration), schema shapes the generator refuses (unsupported-schema), and a raw
// media type beside a JSON body that carries the key, which the loader alone would only warn
// about.
const oneRunSpec = `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /bad:
    post:
      operationId: bad
      x-idempotent: {retention: "1 day"}
      responses: {"201": {description: ok}}
  /items/{id}:
    post:
      operationId: item
      x-idempotent: true
      parameters:
        - {name: id, in: path, required: true, schema: {type: array, items: {type: string}}}
      responses: {"201": {description: ok}}
  /text:
    post:
      operationId: text
      x-idempotent: {key: {body: /request_id}}
      requestBody:
        content:
          application/json: {schema: {type: object, properties: {request_id: {type: string}}}}
          text/plain: {schema: {type: string}}
      responses: {"201": {description: ok}}
  /ok:
    post:
      operationId: fine
      x-idempotent: true
      responses: {"201": {description: ok}}
`

// TestOneRunShowsEveryError: a loader error does not hide the generator's errors of other
// operations; the raw media type is an error the first time (not a warning that turns into an
// error once the other faults are fixed); check, list and generate print the same summary; list
// lists the operations it understood, then fails.
func TestOneRunShowsEveryError(t *testing.T) {
	spec := writeTemp(t, "openapi.yaml", oneRunSpec)
	const want = "openapi.yaml: 4 idempotent operations, 3 errors, 0 warnings"
	code, out, errOut := idemgen(t, "check", spec)
	if code != exitSpec || !strings.HasSuffix(strings.TrimSpace(out), want) {
		t.Fatalf("check: exit %d, stdout %q\n%s", code, out, errOut)
	}
	for _, w := range []string{":7:33: error[bad-duration]", ":14:11: error[unsupported-schema]", ":23:11: error[unsupported-schema]", "carry the key in a header"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("check output lacks %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(errOut, "warning[raw-fingerprint]") {
		t.Errorf("the raw media type is reported as a warning besides the error:\n%s", errOut)
	}
	code, out, errOut2 := idemgen(t, "list", spec)
	if code != exitSpec || strings.Count(out, "\n") != 5 || !strings.Contains(out, "fine") || !strings.HasSuffix(strings.TrimSpace(errOut2), want) {
		t.Errorf("list: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut2)
	}
	code, out, errOut3 := idemgen(t, "list", spec, "--format", "json")
	var doc struct {
		Errors, Warnings int
		Operations       []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitSpec || doc.Errors != 3 || doc.Warnings != 0 || len(doc.Operations) != 4 {
		t.Errorf("list json: exit %d, %+v (%v)\n%s", code, doc, err, errOut3)
	}
	code, out, errOut4 := idemgen(t, "generate", spec, "--out", filepath.Join(t.TempDir(), "api"))
	if code != exitSpec || out != "" || !strings.HasSuffix(strings.TrimSpace(errOut4), want) {
		t.Errorf("generate: exit %d, stdout %q, stderr:\n%s", code, out, errOut4)
	}
	// The same diagnostics, in the same order, from every command.
	strip := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.Contains(l, "idempotent operations,") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if strip(errOut) != strip(errOut2) || strip(errOut) != strip(errOut4) {
		t.Errorf("check, list and generate disagree:\n%s\n---\n%s\n---\n%s", errOut, errOut2, errOut4)
	}
}

// TestSummaryOfAnUnreadableDocument: a document that cannot be read does not claim to have no
// idempotent operations.
func TestSummaryOfAnUnreadableDocument(t *testing.T) {
	spec := writeTemp(t, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {/p: [\n")
	for _, cmd := range []string{"check", "list"} {
		code, out, errOut := idemgen(t, cmd, spec)
		all := out + errOut
		if code != exitSpec || strings.Contains(all, "0 idempotent operations") || !strings.Contains(all, "openapi.yaml: the document could not be read, 1 error, 0 warnings") {
			t.Errorf("%s: exit %d\n%s", cmd, code, all)
		}
	}
}

// TestSummaryOfAFailedOverlay: when an overlay action matches nothing, the summary blames the
// overlay, not the document, and the problem is counted once, located at the action.
func TestSummaryOfAFailedOverlay(t *testing.T) {
	spec := writeTemp(t, "openapi.yaml", markedSpec)
	ov := writeTemp(t, "o.yaml", "overlay: 1.0.0\ninfo: {title: t, version: \"1\"}\nactions:\n  - target: $.paths['/nope'].post\n    update: {x-idempotent: true}\n")
	for _, cmd := range []string{"check", "list"} {
		code, out, errOut := idemgen(t, cmd, spec, "--overlay", ov)
		all := out + errOut
		if code != exitSpec || !strings.Contains(all, "openapi.yaml: an overlay could not be applied, 1 error, 0 warnings") ||
			!strings.Contains(errOut, "o.yaml:4:13: error[overlay-failed]: target \"$.paths['/nope'].post\" matches nothing") {
			t.Errorf("%s: exit %d\n%s", cmd, code, all)
		}
	}
}

// TestNoOperationsHint: check and list on a spec where --infer recognises nothing say so and
// how to mark operations, instead of a bare 0 (and list does not suggest --infer to a run that
// used it); for Stripe's spec, which declares no key, the hint shows the Stripe profile.
func TestNoOperationsHint(t *testing.T) {
	const plain = "openapi: 3.0.3\ninfo: {title: %s, version: '1'}\npaths:\n  /v1/customers:\n    post:\n      operationId: PostCustomers\n      responses: {'200': {description: ok}}\n"
	for _, title := range []string{"Shop", "Stripe API"} {
		spec := writeTemp(t, "openapi.yaml", fmt.Sprintf(plain, title))
		for _, cmd := range []string{"check", "list"} {
			code, out, errOut := idemgen(t, cmd, spec, "--infer")
			stripe := strings.Contains(errOut, "defaults: {profile: stripe}")
			if code != exitOK || !strings.Contains(errOut, "no operation declares a recognised idempotency key header or body field") ||
				!strings.Contains(errOut, "mark operations with x-idempotent, or list them in an idemgen.yaml (--config)") ||
				strings.Contains(errOut, "try --infer") || stripe != (title == "Stripe API") {
				t.Errorf("%s --infer on %q: exit %d\n%s%s", cmd, title, code, errOut, out)
			}
		}
	}
}

// TestListJSONOnEveryFailure: a machine reader of `list --format json` gets one valid document
// whatever went wrong (a file that does not exist, invalid YAML, an overlay that cannot be
// applied, a bad --ref-map, a spec with errors), with the errors in it, located as on standard
// error, and the exit code of the failure.
func TestListJSONOnEveryFailure(t *testing.T) {
	spec := writeTemp(t, "openapi.yaml", markedSpec)
	broken := writeTemp(t, "broken.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {/p: [\n")
	ov := writeTemp(t, "o.yaml", "overlay: 1.0.0\ninfo: {title: t, version: \"1\"}\nactions:\n  - target: $.paths['/nope'].post\n    update: {x-idempotent: true}\n")
	bad := writeTemp(t, "bad.yaml", strings.Replace(markedSpec, "retention: 48h", "retention: 2 days", 1))
	for _, c := range []struct {
		name     string
		args     []string
		code     int
		readable bool
		diag     string // code:file-suffix:line of the first diagnostic
	}{
		{"missing file", []string{filepath.Join(t.TempDir(), "nope.yaml")}, exitUsage, false, "read-failed:nope.yaml:0"},
		{"missing config", []string{spec, "--config", "missing-idemgen.yaml"}, exitUsage, false, "read-failed:missing-idemgen.yaml:0"},
		{"bad ref-map", []string{spec, "--ref-map", "nonsense"}, exitUsage, false, "usage::0"},
		{"invalid YAML", []string{broken}, exitSpec, false, "invalid-yaml:broken.yaml:4"},
		{"overlay", []string{spec, "--overlay", ov}, exitSpec, false, "overlay-failed:o.yaml:4"},
		{"spec errors", []string{bad}, exitSpec, true, "bad-duration:bad.yaml:7"},
	} {
		code, out, errOut := idemgen(t, append([]string{"list", "--format", "json"}, c.args...)...)
		var doc struct {
			Errors      int
			Readable    bool
			Operations  []json.RawMessage
			Diagnostics []struct {
				Severity, Code, File, Message string
				Line                          int
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Errorf("%s: stdout is not JSON (%v):\n%s\nstderr:\n%s", c.name, err, out, errOut)
			continue
		}
		if code != c.code || doc.Readable != c.readable || doc.Errors == 0 || len(doc.Diagnostics) == 0 || doc.Operations == nil {
			t.Errorf("%s: exit %d, %+v\n%s", c.name, code, doc, errOut)
			continue
		}
		d := doc.Diagnostics[0]
		file := d.File
		if file != "" {
			file = filepath.Base(file)
		}
		if got := fmt.Sprintf("%s:%s:%d", d.Code, file, d.Line); got != c.diag || d.Severity != "error" || d.Message == "" {
			t.Errorf("%s: first diagnostic %+v, want %s", c.name, d, c.diag)
		}
	}
}
