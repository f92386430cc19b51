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

// batchCalls is a call log that knows every key as an uncertain call and keeps the slices it
// returned, so that a test can see whether a result still points into them.
type batchCalls struct{ returned [][]store.CallRecord }

func (b *batchCalls) FindCalls(_ context.Context, keys []string) ([]store.CallRecord, error) {
	out := make([]store.CallRecord, len(keys))
	for i, k := range keys {
		out[i] = store.CallRecord{Call: store.Call{Label: "charge", ProviderKey: k}, Token: 1,
			Record: store.CallRecordState{State: store.Running, Token: 1, LeaseEnded: true, Uncertain: store.UncertainLeaseEnded}}
	}
	b.returned = append(b.returned, out)
	return out, nil
}
func (b *batchCalls) ScanCalls(context.Context, time.Time, time.Time, func(*store.CallRecord) error) error {
	return nil
}
func (b *batchCalls) Resolve(context.Context, store.Resolution) (store.Resolved, error) {
	return store.Resolved{}, nil
}

// The resolvable findings own their calls: they do not point into the batch the call log
// returned, which would keep every batch of the report (all its calls) for as long as the
// result lives (0.6 KB a report line, 1.2 GB at a million lines).
func TestResolvableKeepsNoBatch(t *testing.T) {
	var report bytes.Buffer
	report.WriteString("idempotency_key,amount,currency,status,created\n")
	for i := range 10 {
		fmt.Fprintf(&report, "%x,1250,eur,succeeded,2026-11-02T10:00:0%dZ\n", sha256.Sum256([]byte(fmt.Sprint(i))), i)
	}
	src := &batchCalls{}
	res, err := Run(context.Background(), src, &report, Options{BatchSize: 3})
	if err != nil || len(res.Resolvable) != 10 {
		t.Fatalf("%d resolvable, %v", len(res.Resolvable), err)
	}
	for _, batch := range src.returned {
		for i := range batch {
			for _, f := range res.Resolvable {
				if f.Call == &batch[i] {
					t.Fatalf("finding %s points into the call log's batch", f.ProviderKey)
				}
			}
		}
	}
}
