package redisstore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/store"
)

func sampleRecord(body string) store.Record {
	return store.Record{
		Operation:   "createPayment",
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(body))},
		State:       store.Completed, Token: 1733000000123456,
		Response: store.Response{Status: 201, Header: []byte(`{"Location":["/p/1"]}`), Body: []byte(body)},
	}
}

func TestRecordCodecRoundTrip(t *testing.T) {
	for _, rec := range []store.Record{
		sampleRecord(`{"id":1}`),
		sampleRecord(""),
		{Operation: "", State: store.Completed, Response: store.Response{Status: 204, Body: []byte{}}},
		{Operation: "op", State: store.Completed, Token: -5, Response: store.Response{Status: 200, Header: []byte(`{}`), BodyOmitted: true}},
	} {
		got, err := decodeRecord(encodeRecord(&rec))
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", rec, err)
		}
		if got.Operation != rec.Operation || got.Fingerprint != rec.Fingerprint || got.Token != rec.Token ||
			got.State != store.Completed || got.Response.Status != rec.Response.Status ||
			!bytes.Equal(got.Response.Header, rec.Response.Header) || got.Response.BodyOmitted != rec.Response.BodyOmitted ||
			!bytes.Equal(got.Response.Body, rec.Response.Body) || (rec.Response.BodyOmitted != (got.Response.Body == nil)) {
			t.Errorf("round trip of %+v gave %+v", rec, got)
		}
	}
}

// TestRecordCodecRefusesDamage: every truncation, and every change of the version, status or
// omitted byte, is refused rather than decoded into another record.
func TestRecordCodecRefusesDamage(t *testing.T) {
	rec := sampleRecord(`{"id":1}`)
	b := encodeRecord(&rec)
	fixedEnd := 1 + 1 + len(rec.Operation) + 34 // format, length, operation, fingerprint
	for n := range fixedEnd + 8 {
		if _, err := decodeRecord(b[:n]); err == nil {
			t.Errorf("a value cut to %d bytes decoded", n)
		}
	}
	bad := bytes.Clone(b)
	bad[0] = 2
	if _, err := decodeRecord(bad); err == nil {
		t.Error("format 2 decoded")
	}
}

func TestLocalTierDeadlineAndBudget(t *testing.T) {
	l := newLocalTier(64 << 10)
	id := store.ID{Scope: "s", Key: "k"}
	rec := sampleRecord("x")
	l.put(id, &rec, 100)
	if got, ok := l.get(id, 99); !ok || string(got.Response.Body) != "x" || got.RetentionLeft != 1 {
		t.Fatalf("before the deadline: %+v %v", got, ok)
	}
	if _, ok := l.get(id, 100); ok {
		t.Fatal("a copy answered at its deadline")
	}
	rec.Response.Body[0] = 'y' // the tier keeps its own copy
	l.put(id, &rec, 200)
	rec.Response.Body[0] = 'z'
	if got, _ := l.get(id, 0); string(got.Response.Body) != "y" {
		t.Fatalf("the tier shares the caller's bytes: %q", got.Response.Body)
	}

	big := sampleRecord(string(make([]byte, 1000)))
	for i := range 10000 {
		l.put(store.ID{Scope: "s", Key: fmt.Sprint(i)}, &big, int64(time.Hour))
	}
	var total int64
	entries := 0
	for i := range l.shards {
		s := &l.shards[i]
		if s.bytes > l.budget {
			t.Errorf("shard %d holds %d bytes, budget %d", i, s.bytes, l.budget)
		}
		if len(s.queue)-s.head > 2*len(s.entries)+64 {
			t.Errorf("shard %d's queue holds %d slots for %d entries", i, len(s.queue)-s.head, len(s.entries))
		}
		total += s.bytes
		entries += len(s.entries)
	}
	if total > 64<<10 || entries == 0 {
		t.Errorf("%d entries in %d bytes, budget %d", entries, total, 64<<10)
	}
	// The latest ones are kept, the first ones evicted.
	if _, ok := l.get(store.ID{Scope: "s", Key: "9999"}, 0); !ok {
		t.Error("the newest entry was evicted")
	}
	if _, ok := l.get(store.ID{Scope: "s", Key: "0"}, 0); ok {
		t.Error("the oldest entry survived 10000 inserts in a 64 KiB budget")
	}
	// Replacing one hot key over and over does not grow the queue.
	h := store.ID{Scope: "s", Key: "hot"}
	for i := range 10000 {
		l.put(h, &rec, int64(300+i))
	}
	s := l.shard(h)
	if len(s.queue)-s.head > 2*len(s.entries)+64 {
		t.Errorf("replacing one key 10000 times left %d queue slots for %d entries", len(s.queue)-s.head, len(s.entries))
	}
}

func TestKeyNameIsInjective(t *testing.T) {
	seen := map[string]store.ID{}
	for _, sk := range [][2]string{
		{"a", "b:c"}, {"a:b", "c"}, {"", "a:b:c"}, {"a}", "b"}, {"a", "}b"}, {"1:a", "b"}, {"{x}", "y"},
	} {
		id := store.ID{Scope: sk[0], Key: sk[1]}
		k := keyName("p:", id)
		if other, dup := seen[k]; dup {
			t.Errorf("%+v and %+v share the name %q", id, other, k)
		}
		seen[k] = id
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || !strings.HasSuffix(k, "}") {
			t.Errorf("%q: want exactly one hash tag, at the end", k)
		}
	}
	if err := checkPrefix("bad{"); err == nil {
		t.Error("a prefix with a brace was accepted")
	}
}

// BenchmarkLocalTierHit measures a hit of the in-process tier (the comparison with rueidis's
// client-side caching is in docs/redis.md): go test -bench LocalTier -cpu 1,2 ./runtime/redisstore
func BenchmarkLocalTierHit(b *testing.B) {
	l := newLocalTier(64 << 20)
	rec := sampleRecord(string(make([]byte, 400)))
	ids := make([]store.ID, 64)
	for i := range ids {
		ids[i] = store.ID{Scope: "tenant", Key: fmt.Sprintf("key-%d-xxxxxxxxxxxxxxxx", i)}
		l.put(ids[i], &rec, int64(time.Hour))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := l.get(ids[i%64], 1); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}
