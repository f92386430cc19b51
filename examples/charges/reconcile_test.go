package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/reconcile"
)

// The fault run of docs/runtime.md, "Uncertain outcomes and reconciliation": the service is
// SIGKILLed in the call phase of N charges (the provider charged, nothing completed), whose
// clients never retry. Reconciliation with the provider's report must list exactly those N as
// charged at the provider with no completed record, a confirmed resolution must settle them, and
// a late retry of each must replay the provider's outcome without charging again.

// The test binary serves the example in a child process when this variable is set, so that the
// test can kill it (TestMain); the provider stays in the test process and keeps its record.
const (
	envChild    = "IDEMGEN_CHARGES_CHILD"
	envDSN      = "IDEMGEN_CHARGES_DSN"
	envProvider = "IDEMGEN_CHARGES_PROVIDER"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		if err := serveChild(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveChild serves the example on a loopback port, prints "LISTENING <addr>", and holds every
// request that carries X-Hold: call after its provider call, printing "CALLED <key>", until the
// process is killed. It exits when its stdin closes.
func serveChild() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv(envDSN))
	if err != nil {
		return err
	}
	var out sync.Mutex
	s := &service{pool: pool, provider: &providerClient{url: os.Getenv(envProvider), http: &http.Client{Timeout: 10 * time.Second}},
		afterCall: func(ctx context.Context, r *http.Request) {
			if r.Header.Get("X-Hold") != "call" {
				return
			}
			out.Lock()
			fmt.Printf("CALLED %s\n", r.Header.Get("Idempotency-Key"))
			out.Unlock()
			<-ctx.Done() // until the process is killed (or the client goes away)
			select {}
		}}
	h, rt, err := newServer(s)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("LISTENING %s\n", ln.Addr())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	return serve(ctx, ln, h, rt)
}

// child is a running service process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	url    string
	called chan string
}

func startChild(t *testing.T, dsn, providerURL string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envDSN+"="+dsn, envProvider+"="+providerURL)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, called: make(chan string, 64)}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			switch f := strings.Fields(sc.Text()); {
			case len(f) == 2 && f[0] == "LISTENING":
				listening <- f[1]
			case len(f) == 2 && f[0] == "CALLED":
				c.called <- f[1]
			}
		}
	}()
	select {
	case addr := <-listening:
		c.url = "http://" + addr
	case <-time.After(60 * time.Second):
		t.Fatal("the service did not start")
	}
	return c
}

// charge sends createCharge; the client never retries.
func charge(ctx context.Context, url, account, key, source string, amount int64, hold bool) (*http.Response, []byte, error) {
	body := fmt.Sprintf(`{"amount":%d,"currency":"eur","source":%q}`, amount, source)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/charges", strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Account", account)
	req.Header.Set("Idempotency-Key", key)
	if hold {
		req.Header.Set("X-Hold", "call")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// faultRun is the state after the fault: the lost requests' keys, the provider's report.
type faultRun struct {
	dsn      string
	pool     *pgxpool.Pool
	provider *provider
	provURL  string
	report   string
	lost     []string // idempotency keys of the requests killed in their call phase
	amounts  map[string]int64
}

const account = "acct_reconcile"

// runFault completes a few charges, sends n more that the service holds after their provider
// call, SIGKILLs it, and writes the provider's report.
func runFault(t *testing.T, n int) *faultRun {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	prov := newProvider()
	psrv := httptest.NewServer(prov)
	t.Cleanup(psrv.Close)
	f := &faultRun{dsn: dsn, pool: pool, provider: prov, provURL: psrv.URL, amounts: map[string]int64{}}
	svc := startChild(t, dsn, psrv.URL)

	// Requests that complete: a charge and a decline, both stored; they must not be findings.
	for i, source := range []string{"tok_visa", "tok_visa", "tok_decline"} {
		resp, body, err := charge(ctx, svc.url, account, fmt.Sprintf("done-%02d-%s", i, strings.Repeat("x", 16)), source, 1000+int64(i), false)
		want := http.StatusCreated
		if source == "tok_decline" {
			want = http.StatusPaymentRequired
		}
		if err != nil || resp.StatusCode != want {
			t.Fatalf("completed charge %d: %v %v %s", i, err, resp, body)
		}
	}
	// The lost ones: held after the provider's answer, then killed.
	errs := make(chan error, n)
	for i := range n {
		key := fmt.Sprintf("lost-%02d-%s", i, strings.Repeat("y", 16))
		f.lost = append(f.lost, key)
		f.amounts[key] = 2000 + int64(i)
		go func() {
			_, _, err := charge(ctx, svc.url, account, key, "tok_visa", f.amounts[key], true)
			errs <- err
		}()
	}
	for range n {
		select {
		case <-svc.called:
		case <-time.After(60 * time.Second):
			t.Fatal("the held requests did not all reach their call phase")
		}
	}
	if err := svc.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = svc.cmd.Wait()
	for range n {
		if err := <-errs; err == nil {
			t.Fatal("a killed request got an answer")
		}
	}
	if got := len(prov.charged()); got != 3+n {
		t.Fatalf("the provider made %d charges, want %d", got, 3+n)
	}
	f.report = filepath.Join(t.TempDir(), "provider-report.csv")
	var b bytes.Buffer
	if err := prov.WriteReport(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.report, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// lostProviderKeys are the provider keys of the lost requests, from the provider's side.
func (f *faultRun) lostProviderKeys() []string {
	var keys []string
	for _, c := range f.provider.charged() {
		if c.Amount >= 2000 {
			keys = append(keys, c.Key)
		}
	}
	sort.Strings(keys)
	return keys
}

// lateRetries sends each lost request again, as its client would much later, to a new service
// process, and checks that each replays the provider's charge and that the provider charged
// nothing more.
func (f *faultRun) lateRetries(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	before := len(f.provider.charged())
	svc := startChild(t, f.dsn, f.provURL)
	byAmount := map[int64]providerCharge{}
	for _, c := range f.provider.charged() {
		byAmount[c.Amount] = c
	}
	for _, key := range f.lost {
		resp, body, err := charge(ctx, svc.url, account, key, "tok_visa", f.amounts[key], false)
		if err != nil {
			t.Fatal(err)
		}
		want := byAmount[f.amounts[key]]
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %s", key, body)
		}
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" || resp.Header.Get("Idempotency-Key-Expires") == "" ||
			got["id"] != want.ID || got["amount"] != float64(want.Amount) || got["currency"] != "EUR" || got["status"] != "succeeded" {
			t.Errorf("late retry of %s: %d replayed=%q %s; want 201, a replay of the provider's %s", key, resp.StatusCode,
				resp.Header.Get("Idempotent-Replayed"), body, want.ID)
		}
	}
	if after := len(f.provider.charged()); after != before {
		t.Errorf("the late retries made %d new charges at the provider, want 0", after-before)
	}
}

// auditRows counts the resolutions written for the lost requests.
func (f *faultRun) auditRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_resolutions WHERE action = 'completed' AND record_written`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// buildIdemgen builds the idemgen command once per test binary.
var buildIdemgen = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "idemgen-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "idemgen")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/idemgen/idemgen/cmd/idemgen").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// idemgen runs the command and returns its stdout and exit code.
func idemgen(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	bin, err := buildIdemgen()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Logf("idemgen %s: stderr:\n%s", args[0], stderr.String())
	}
	return stdout.String(), code
}

// waitUncertain waits until `idemgen records uncertain` lists n records (their leases end 2 s
// after the kill) and returns their provider keys.
func waitUncertain(t *testing.T, dsn string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, code := idemgen(t, "", "records", "uncertain", "--dsn", dsn, "--format", "json")
		var got struct {
			Records []struct {
				State         string `json:"state"`
				Uncertain     string `json:"uncertain"`
				ProviderCalls []struct {
					Label       string `json:"label"`
					ProviderKey string `json:"provider_key"`
				} `json:"provider_calls"`
			} `json:"records"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("records uncertain: exit %d\n%s", code, out)
		}
		if len(got.Records) == n || time.Now().After(deadline) {
			var keys []string
			for _, r := range got.Records {
				if r.State != "uncertain" || r.Uncertain != "lease_ended" || len(r.ProviderCalls) != 1 || r.ProviderCalls[0].Label != "charge" {
					t.Errorf("uncertain record: %+v", r)
				}
				for _, c := range r.ProviderCalls {
					keys = append(keys, c.ProviderKey)
				}
			}
			sort.Strings(keys)
			return keys
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestReconcileAfterKill is the done-when, through the idemgen command.
func TestReconcileAfterKill(t *testing.T) {
	const n = 4
	f := runFault(t, n)
	want := f.lostProviderKeys()
	if got := waitUncertain(t, f.dsn, n); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records uncertain listed provider keys %v, want the lost requests' %v", got, want)
	}

	// Reconcile: exactly the n lost charges, as charged at the provider with no completed
	// record, each uncertain and resolvable; nothing else.
	out, code := idemgen(t, "", "reconcile", "--dsn", f.dsn, "--report", f.report, "--format", "json")
	if code != 4 {
		t.Fatalf("reconcile exit %d, want 4 (desynchronised)\n%s", code, out)
	}
	var found []string
	var summary map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var fd struct {
			Class       string         `json:"class"`
			ProviderKey string         `json:"provider_key"`
			Record      string         `json:"record"`
			Action      string         `json:"action"`
			Summary     map[string]any `json:"summary"`
		}
		if err := json.Unmarshal([]byte(line), &fd); err != nil {
			t.Fatalf("reconcile output line %q: %v", line, err)
		}
		if fd.Summary != nil {
			summary = fd.Summary
			continue
		}
		if fd.Class != string(reconcile.ChargedNoRecord) || fd.Record != reconcile.RecordUncertain || fd.Action != string(reconcile.Complete) {
			t.Errorf("finding %+v, want charged_no_record, uncertain, complete", fd)
		}
		found = append(found, fd.ProviderKey)
	}
	sort.Strings(found)
	if fmt.Sprint(found) != fmt.Sprint(want) {
		t.Fatalf("reconcile listed %v, want exactly the lost requests' %v", found, want)
	}
	if counts, _ := summary["counts"].(map[string]any); counts["charged_no_record"] != float64(n) || summary["matched"] != float64(3) {
		t.Errorf("summary %v", summary)
	}

	// Without confirmation nothing is written; with it, the resolutions are written.
	if out, code := idemgen(t, "n\n", "reconcile", "--dsn", f.dsn, "--report", f.report, "--resolve", "--operator", "test"); code != 2 || f.auditRows(t) != 0 {
		t.Fatalf("resolve without a terminal or --yes: exit %d, %d audit rows\n%s", code, f.auditRows(t), out)
	}
	template := `{"id":{{json .id}},"amount":{{.amount}},"currency":{{json (upper .currency)}},"status":{{json .status}}}`
	out, code = idemgen(t, "", "reconcile", "--dsn", f.dsn, "--report", f.report, "--resolve", "--yes",
		"--operator", "test@example.com", "--reason", "fault run", "--response-status", "201", "--response-template", template)
	if code != 0 || f.auditRows(t) != n {
		t.Fatalf("resolve: exit %d, %d audit rows, want 0 and %d\n%s", code, f.auditRows(t), n, out)
	}
	if out, code := idemgen(t, "", "reconcile", "--dsn", f.dsn, "--report", f.report); code != 0 {
		t.Errorf("reconcile after the resolutions: exit %d, want 0\n%s", code, out)
	}
	if got := waitUncertain(t, f.dsn, 0); len(got) != 0 {
		t.Errorf("still uncertain after the resolutions: %v", got)
	}
	f.lateRetries(t)
}

// TestReconcileAfterKillGo is the same through the Go functions a scheduled job and an
// operator's tool call, with the example's own response builder.
func TestReconcileAfterKillGo(t *testing.T) {
	const n = 3
	ctx := context.Background()
	f := runFault(t, n)
	st := pgstore.New(f.pool, pgstore.Options{})
	waitUncertain(t, f.dsn, n)
	res, err := reconcileReport(ctx, st, f.report, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Counts[reconcile.ChargedNoRecord] != n || len(res.Resolvable) != n || res.Matched != 3 {
		t.Fatalf("result: %+v", res)
	}
	for c, k := range res.Counts {
		if c != reconcile.ChargedNoRecord && k != 0 {
			t.Errorf("%d findings of %s, want 0", k, c)
		}
	}
	done, err := resolveConfirmed(ctx, st, res, "test", "fault run")
	if err != nil || len(done) != n {
		t.Fatalf("resolve: %d, %v", len(done), err)
	}
	for _, d := range done {
		if d.Err != nil || !d.Done.Record {
			t.Errorf("%s: %+v %v", d.Finding.ProviderKey, d.Done, d.Err)
		}
	}
	f.lateRetries(t)
}
