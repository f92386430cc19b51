package main

import (
	"encoding/json"
	"encoding/xml"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/idemgen/idemgen/internal/conform/testdata/mutants"
)

const mutantSpec = "../../internal/conform/testdata/mutants/payments.yaml"

// mutantServer serves a server of the mutant corpus by name.
func mutantServer(t *testing.T, name string) string {
	t.Helper()
	for _, m := range mutants.All() {
		if m.Name == name {
			h, _ := mutants.New(m)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			return srv.URL
		}
	}
	t.Fatalf("no mutant %q", name)
	return ""
}

// TestConformExitCodes: 0 when every check passes or skips, 1 when one fails (and the report
// names it), 2 when the run cannot be made, with the reason and no usage hint.
func TestConformExitCodes(t *testing.T) {
	good, race := mutantServer(t, "good"), mutantServer(t, "race")
	base := []string{"conform", mutantSpec, "--header", "Authorization: Bearer a", "--delay-header", "X-Test-Delay: 100ms", "--seed", "7"}

	code, out, errOut := idemgen(t, append(base, "--base-url", good)...)
	if code != exitOK || !strings.Contains(out, "PASS concurrent-duplicates") || !strings.Contains(out, "0 failed") {
		t.Fatalf("good: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "SKIP tenant-isolation: needs --tenant-header") {
		t.Errorf("good: a check that needs a flag does not say so:\n%s", out)
	}

	// A check that cannot run is never a pass: --strict makes a skip exit 2, and a run that
	// checked an operation not at all exits 2 without it.
	code, _, errOut = idemgen(t, append(base, "--base-url", good, "--strict")...)
	if code != exitConformCannot || !strings.Contains(errOut, "--strict") {
		t.Errorf("good --strict: exit %d, want 2:\n%s", code, errOut)
	}
	code, out, _ = idemgen(t, append(base, "--base-url", good, "--operation", "createPayment", "--check", "tenant-isolation")...)
	if code != exitConformCannot || !strings.Contains(out, "NOT CHECKED: createPayment: needs --tenant-header") {
		t.Errorf("nothing checked: exit %d, want 2 naming the operation:\n%s", code, out)
	}

	code, out, _ = idemgen(t, append(base, "--base-url", race, "--check", "concurrent-duplicates")...)
	if code != exitConformFailed || !strings.Contains(out, "FAIL concurrent-duplicates") || !strings.Contains(out, "> Idempotency-Key: ") {
		t.Fatalf("race: exit %d, want 1 and the failing exchange:\n%s", code, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	code, _, errOut = idemgen(t, append(base, "--base-url", closed)...)
	if code != exitConformCannot || !strings.Contains(errOut, "cannot reach "+closed) || strings.Contains(errOut, "--help") {
		t.Fatalf("unreachable: exit %d, want 2 naming the URL:\n%s", code, errOut)
	}

	bad := writeTemp(t, "bad.yaml", strings.Replace(markedSpec, "retention: 48h", "retention: forever", 1))
	code, _, errOut = idemgen(t, "conform", bad, "--base-url", good)
	if code != exitConformCannot || !strings.Contains(errOut, "bad.yaml:") || !strings.Contains(errOut, "1 error") {
		t.Fatalf("bad spec: exit %d, want 2 with a located error:\n%s", code, errOut)
	}

	for _, args := range [][]string{
		{"conform", mutantSpec},
		{"conform", mutantSpec, "--base-url", good, "--format", "yaml"},
		{"conform", mutantSpec, "--base-url", good, "--check", "replays"},
		{"conform", mutantSpec, "--base-url", good, "--header", "no colon"},
		{"conform", mutantSpec, "--base-url", good, "--operation", "createPet"},
		{"conform", "--base-url", good},
	} {
		if code, _, errOut := idemgen(t, args...); code != exitConformCannot || !strings.Contains(errOut, "idemgen: ") {
			t.Errorf("%q: exit %d, want 2 with a message:\n%s", args, code, errOut)
		}
	}
}

// TestConformFormats: --format json and junit are documents a CI reads, --html a page with
// the faulted histories drawn.
func TestConformFormats(t *testing.T) {
	race := mutantServer(t, "race")
	html := filepath.Join(t.TempDir(), "report.html")
	args := []string{"conform", mutantSpec, "--base-url", race, "--header", "Authorization: Bearer a", "--delay-header", "X-Test-Delay: 100ms",
		"--operation", "createPayment", "--check", "replay", "--check", "concurrent-duplicates", "--check", "faults/two-connections", "--faults", "--short", "--html", html}

	code, out, errOut := idemgen(t, append(args, "--format", "json")...)
	var doc struct {
		Version int `json:"version"`
		Failed  int `json:"failed"`
		Results []struct {
			Check, Operation, Status, Why string
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitConformFailed {
		t.Fatalf("json: exit %d, %v:\n%s\n%s", code, err, out, errOut)
	}
	if doc.Version != 1 || doc.Failed != 2 || len(doc.Results) != 3 || doc.Results[1].Status != "FAIL" || doc.Results[1].Why == "" {
		t.Errorf("json: %+v", doc)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "<svg") || !strings.Contains(string(page), "history: Illegal") || !strings.Contains(string(page), "srcdoc=") {
		t.Errorf("html: %v, no drawn history in:\n%.500s", err, page)
	}

	code, out, _ = idemgen(t, append(args, "--format", "junit")...)
	var suites struct {
		Suites []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(out), &suites); err != nil || code != exitConformFailed {
		t.Fatalf("junit: exit %d, %v:\n%s", code, err, out)
	}
	if len(suites.Suites) != 1 || suites.Suites[0].Name != "createPayment" || suites.Suites[0].Tests != 3 || suites.Suites[0].Failures != 2 ||
		suites.Suites[0].Cases[1].Failure == nil || !strings.Contains(suites.Suites[0].Cases[1].Failure.Message, "copies at once") {
		t.Errorf("junit: %+v", suites)
	}
}

// TestConformHelpShowsEveryFlag: idemgen conform --help has an example of each of its flags.
func TestConformHelpShowsEveryFlag(t *testing.T) {
	cmd := newConformCmd()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(cmd.Example, "--"+f.Name+" ") && !strings.Contains(cmd.Example, "--"+f.Name+"\n") {
			t.Errorf("--%s has no example in idemgen conform --help", f.Name)
		}
	})
}

// TestConformCases: --cases runs request-sequence cases (the testdata/cases format), with or
// without a spec, each reported by name; a case that does not hold fails the run.
func TestConformCases(t *testing.T) {
	good := mutantServer(t, "good")
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("001-retry-replays.yaml", `about: a retry replays the first answer.
steps:
  - request:
      method: POST
      path: /v1/payments
      headers: {Authorization: Bearer t1, Idempotency-Key: k-0001-cases-aaaaaaaaa, Content-Type: application/json}
      body: '{"amount":100,"currency":"EUR"}'
    expect: {status: 201}
  - request:
      method: POST
      path: /v1/payments
      headers: {Authorization: Bearer t1, Idempotency-Key: k-0001-cases-aaaaaaaaa, Content-Type: application/json}
      body: '{"currency":"EUR","amount":100}'
    expect: {same_as: 0, headers: {Idempotent-Replayed: "true"}}
`)
	code, out, errOut := idemgen(t, "conform", "--base-url", good, "--cases", dir)
	if code != exitOK || !strings.Contains(out, "PASS 001-retry-replays") || !strings.Contains(out, "; 2 requests in") {
		t.Fatalf("exit %d, want 0 and the case's 2 requests counted:\n%s\n%s", code, out, errOut)
	}
	write("002-wrong.yaml", `about: a wrong expectation.
steps:
  - request:
      method: POST
      path: /v1/payments
      headers: {Authorization: Bearer t1, Idempotency-Key: k-0002-cases-aaaaaaaaa, Content-Type: application/json}
      body: '{"amount":100,"currency":"EUR"}'
    expect: {status: 200}
`)
	code, out, _ = idemgen(t, "conform", mutantSpec, "--base-url", good, "--header", "Authorization: Bearer a", "--check", "replay", "--cases", dir)
	if code != exitConformFailed || !strings.Contains(out, "FAIL 002-wrong") || !strings.Contains(out, "want 200, got 201") || !strings.Contains(out, "PASS replay") {
		t.Fatalf("exit %d, want 1 with the failing case:\n%s", code, out)
	}
}
