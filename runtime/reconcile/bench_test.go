package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// noCalls is a call log that knows no call: BenchmarkRunReport measures the report's own cost.
type noCalls struct{}

func (noCalls) FindCalls(context.Context, []string) ([]store.CallRecord, error) { return nil, nil }
func (noCalls) ScanCalls(context.Context, time.Time, time.Time, func(*store.CallRecord) error) error {
	return nil
}
func (noCalls) Resolve(context.Context, store.Resolution) (store.Resolved, error) {
	return store.Resolved{}, nil
}

// BenchmarkRunReport reads and classifies a CSV report of 100,000 lines against a call log
// that knows none of its keys: the cost Run adds to the store's reads, per line.
func BenchmarkRunReport(b *testing.B) {
	var report bytes.Buffer
	report.WriteString("id,idempotency_key,amount,currency,status,created\n")
	at := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	const lines = 100_000
	for i := range lines {
		fmt.Fprintf(&report, "ch_%d,%x,%d,eur,succeeded,%s\n", i, sha256.Sum256([]byte(fmt.Sprint(i))), 1000+i%100,
			at.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano))
	}
	b.SetBytes(int64(report.Len()))
	b.ResetTimer()
	for range b.N {
		res, err := Run(context.Background(), noCalls{}, bytes.NewReader(report.Bytes()), Options{})
		if err != nil || res.Lines != lines {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}
