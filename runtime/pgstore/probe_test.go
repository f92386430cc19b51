package pgstore_test

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// A read that probes the claim lock of a key without a record (readProbe, readProbeCharged)
// says busy only while a claim holds the lock, never because another read is probing it at the
// same instant: two copies of one new request read at once (a client's request delivered on
// two connections, conform's faults/two-connections) were both answered 409 in-flight, and the
// key was claimed by neither, whenever their reads overlapped (under load, often).
func TestProbesDoNotMakeEachOtherBusy(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	scope, kid := pgstore.Digest(store.ID{Scope: "t1", Key: "k-probe-0000000001"})
	const lock = int64(424242)
	busy := func(name, sql string) bool {
		t.Helper()
		args := []any{scope, uuidOf(kid)}
		switch name {
		case "readProbe":
			args = append(args, lock)
		case "readProbeCharged":
			args = append(args, scope, int64(60), int64(1000), lock)
		}
		tx, err := e.pool.Begin(ctx) // rolled back: the charged read counts
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer rows.Close()
		if !rows.Next() {
			t.Fatalf("%s: no row (%v)", name, rows.Err())
		}
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range rows.FieldDescriptions() {
			if f.Name == "busy" {
				b, _ := vals[i].(bool)
				return b
			}
		}
		t.Fatalf("%s: no busy column", name)
		return false
	}
	holder := func(lockSQL string) func() {
		t.Helper()
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, lockSQL, lock); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback(ctx) }
	}
	for name, sql := range e.st.ReadsForTest() {
		if name != "readProbe" && name != "readProbeCharged" {
			continue
		}
		if busy(name, sql) {
			t.Errorf("%s of a new key, nothing holding its lock: busy", name)
		}
		// Another read probing the key at this instant: readProbe's statement, in a
		// transaction kept open, so that it holds whatever lock a probe takes for as long as the
		// test needs. (Not the charged read's: its count would hold the counter's row, which
		// the charged read under test would then wait for.)
		other, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Exec(ctx, e.st.ReadsForTest()["readProbe"], scope, uuidOf(kid), lock); err != nil {
			t.Fatal(err)
		}
		release := func() { _ = other.Rollback(ctx) }
		if busy(name, sql) {
			t.Errorf("%s of a new key while another read probes it: busy, want free", name)
		}
		release()
		// A claim in its transaction holds it exclusively.
		release = holder("SELECT pg_advisory_xact_lock($1)")
		if !busy(name, sql) {
			t.Errorf("%s of a new key while a claim holds its lock: free, want busy", name)
		}
		release()
	}
}
