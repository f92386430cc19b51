package load

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/spec"
)

const stripe = "../../testdata/specs/vendor/stripe-spec3.yaml"

// postsConfig writes an idemgen.yaml marking every POST of the spec, as a team adopting
// Stripe-style keys on a vendor spec would, and returns its path and the number of entries.
func postsConfig(tb testing.TB, specPath string) (string, int) {
	tb.Helper()
	res, err := spec.Load(context.Background(), spec.Options{Path: specPath})
	if err != nil || res.Doc == nil {
		tb.Fatalf("load %s: %v", specPath, err)
	}
	var b strings.Builder
	b.WriteString("version: 1\noperations:\n")
	n := 0
	for _, op := range res.Doc.Unmarked {
		if op.Method == "POST" {
			fmt.Fprintf(&b, "  %q: true\n", "POST "+op.Path)
			n++
		}
	}
	p := filepath.Join(tb.TempDir(), "idemgen.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p, n
}

func bareLoad(tb testing.TB) {
	l := openapi3.NewLoader()
	if _, err := l.LoadFromFile(stripe); err != nil {
		tb.Fatal(err)
	}
}

// loadAndList is what `idemgen list --config` does apart from printing to a terminal.
func loadAndList(tb testing.TB, cfg string, want int) {
	res, err := spec.Load(context.Background(), spec.Options{Path: stripe, ConfigPath: cfg})
	if err != nil || res.Diags.HasErrors() {
		tb.Fatalf("load: %v %v", err, res.Diags.Sorted())
	}
	if len(res.Doc.Operations) != want {
		tb.Fatalf("%d operations marked, want %d", len(res.Doc.Operations), want)
	}
	for _, op := range res.Doc.Operations {
		fmt.Fprintln(io.Discard, op.Method, op.Path, op.ID, op.Settings.Key.Header, op.Settings.Retention)
	}
}

// BenchmarkStripe runs a bare kin-openapi load and idemgen's load+list of the same file in
// every iteration, so both see the same machine state, and reports the mean of each and their
// ratio (idemgen / bare). The target is a ratio of at most 1.25. Each side starts after a
// collection (outside the timing) so neither pays for the other's garbage, and the order
// alternates between iterations.
func BenchmarkStripe(b *testing.B) {
	cfg, posts := postsConfig(b, stripe)
	var bare, ours, bareCPU, oursCPU time.Duration
	timed := func(f func(), wall, cpu *time.Duration) {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		c0, t0 := cpuTime(), time.Now()
		f()
		*wall += time.Since(t0)
		*cpu += cpuTime() - c0
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			timed(func() { bareLoad(b) }, &bare, &bareCPU)
			timed(func() { loadAndList(b, cfg, posts) }, &ours, &oursCPU)
		} else {
			timed(func() { loadAndList(b, cfg, posts) }, &ours, &oursCPU)
			timed(func() { bareLoad(b) }, &bare, &bareCPU)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(bare.Milliseconds())/n, "bare-ms/op")
	b.ReportMetric(float64(ours.Milliseconds())/n, "idemgen-ms/op")
	b.ReportMetric(float64(ours)/float64(bare), "ratio")
	b.ReportMetric(float64(bareCPU.Milliseconds())/n, "bare-cpu-ms/op")
	b.ReportMetric(float64(oursCPU.Milliseconds())/n, "idemgen-cpu-ms/op")
	b.ReportMetric(float64(oursCPU)/float64(bareCPU), "cpu-ratio")
	b.ReportMetric(float64(posts), "marked")
}

// cpuTime is the CPU time (user + system, all threads, the garbage collector included) this
// process has used: on a shared machine it moves far less with other load than wall time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBareKin and BenchmarkIdemgen measure each side alone, for -benchmem allocation counts.
func BenchmarkBareKin(b *testing.B) {
	for i := 0; i < b.N; i++ {
		bareLoad(b)
	}
}

func BenchmarkIdemgen(b *testing.B) {
	cfg, posts := postsConfig(b, stripe)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		loadAndList(b, cfg, posts)
	}
}
