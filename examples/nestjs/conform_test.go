// Package nestjs holds the Node.js example (server.js, NestJS behind
// @node-idempotency/nestjs) and the test that keeps docs/conform.md's account of it true: it
// runs the service, checks it with idemgen conform and compares every verdict with the one the
// doc records.
package nestjs

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/spec"
)

// recorded is what conform reports for @node-idempotency/nestjs 1.0.4 (package-lock.json),
// the same for both operations, as docs/conform.md states it: the check and its verdict.
var recorded = map[conform.Check]conform.Status{
	conform.CheckFirstRequest:    conform.Pass,
	conform.CheckReplay:          conform.Fail, // Location is not replayed (only Content-Type is kept)
	conform.CheckEquivalent:      conform.Fail, // the fingerprint is JSON.stringify: members reordered are another request (422)
	conform.CheckExcluded:        conform.Skip,
	conform.CheckMismatch:        conform.Fail, // the 422 is right; the first request's replay then lacks Location
	conform.CheckDuplicateMember: conform.Pass,
	conform.CheckKeyMissing:      conform.Pass, // enforceIdempotency: 400
	conform.CheckKeyMalformed:    conform.Fail, // two Idempotency-Key lines are joined into one key ("a, b") and run
	conform.CheckKeyReuse:        conform.Pass, // scope: operation, as declared
	conform.CheckUnrouted:        conform.Pass,
	conform.CheckConcurrent:      conform.Fail, // one execution, 409 with Retry-After; the later replay lacks Location
	conform.Check5xxNotStored:    conform.Fail, // the 500 is stored and replayed for ever
	conform.Check5xxReleases:     conform.Pass,
	conform.Check5xxRollsBack:    conform.Fail, // no transaction to join: the handler's write before its failure stays
	conform.CheckTenants:         conform.Fail, // keys are global: tenant B gets tenant A's payment
	conform.CheckLostResponse:    conform.Fail, // the retry replays, without Location
	conform.CheckLateDuplicate:   conform.Fail, // the same
	conform.CheckTwoConnections:  conform.Pass,
	conform.CheckStorm:           conform.Pass,
}

// EnvRequireNode makes a missing node or node_modules fail the test instead of skipping it
// (CI sets it after npm ci).
const EnvRequireNode = "IDEMGEN_REQUIRE_NODE"

func TestNodeIdempotencyNestJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat("node_modules/@node-idempotency/nestjs/package.json")
	}
	if err != nil {
		if os.Getenv(EnvRequireNode) != "" {
			t.Fatalf("%s is set but the example cannot run (node, then npm ci in examples/nestjs): %v", EnvRequireNode, err)
		}
		t.Skipf("needs node and `npm ci` in examples/nestjs: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "server.js", "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	url := ""
	if lines.Scan() {
		url, _ = strings.CutPrefix(lines.Text(), "listening on ")
	}
	if !strings.HasPrefix(url, "http://") {
		t.Fatalf("server.js printed %q, want its address", url)
	}
	go func() {
		for lines.Scan() { // the library logs its refusals; keep the pipe drained
		}
	}()
	res, err := spec.Load(ctx, spec.Options{Path: "openapi.yaml"})
	if err != nil || res.Diags.HasErrors() {
		t.Fatalf("openapi.yaml: %v %v", err, res.Diags.Sorted())
	}
	rep, err := conform.Run(ctx, res.Doc, conform.Options{
		BaseURL:      url,
		Header:       http.Header{"Authorization": {"Bearer a"}},
		TenantHeader: http.Header{"Authorization": {"Bearer b"}},
		FailHeader:   http.Header{"X-Test-Fail": {"500"}},
		DelayHeader:  http.Header{"X-Test-Delay": {"300"}},
		Effects:      effectsOf(url),
		Faults:       true,
		Short:        true,
		Seed:         24,
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	conform.WriteText(&text, rep)
	for _, r := range rep.Results {
		if want, ok := recorded[r.Check]; !ok || r.Status != want {
			t.Errorf("%s %s: %s, docs/conform.md records %s: %s", r.Operation, r.Check, r.Status, want, r.Why)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(text.String())
	}
}

// effectsOf reads GET /_effects, as --effects-cmd 'curl -s URL/_effects' would.
func effectsOf(url string) conform.Effects {
	return func(ctx context.Context) (int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/_effects", nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		return conform.ParseEffects(b)
	}
}
