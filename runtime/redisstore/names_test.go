package redisstore_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// Redis holds no raw scope or key: names are <prefix>{<the record's digest>}, the digest
// pgstore stores as key_id, so nothing SCAN, MONITOR, SLOWLOG, the AOF or --bigkeys show can
// carry a tenant's credential (the conformance service's scope is its bearer token). A support
// lookup by (tenant, key) still finds the record, by digest.
func TestRedisNamesAreDigests(t *testing.T) {
	const scope, key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "raw-key-0123456789-secret"
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			ctx := context.Background()
			client := redistest.NewClient(t, topo)
			prefix := redistest.Prefix(t)
			pg := newPG(t)
			if _, err := pg.Pool().Exec(ctx, paymentsTable); err != nil {
				t.Fatal(err)
			}
			leases, err := redisstore.New(client, redisstore.Options{Prefix: prefix + "lease:"})
			if err != nil {
				t.Fatal(err)
			}
			cache := redisstore.NewCache[pgstore.DBTX](pg, client, redisstore.CacheOptions{Prefix: prefix + "replay:"})
			paired := redisstore.Pair[pgstore.DBTX](leases, cache)

			// A completed lease record, a running one, and a cached atomic record.
			done := leaseClaim(key+"-done", `{"a":1}`, time.Minute)
			done.ID.Scope = scope
			r, err := paired.Reserve(ctx, done)
			if err != nil || !r.Claimed() {
				t.Fatalf("Reserve: %+v %v", r, err)
			}
			if err := complete(ctx, paired, done, r.Token, `{"id":"ch_1"}`); err != nil {
				t.Fatal(err)
			}
			running := leaseClaim(key+"-running", `{"a":2}`, time.Minute)
			running.ID.Scope = scope
			if r, err := paired.Reserve(ctx, running); err != nil || !r.Claimed() {
				t.Fatalf("Reserve: %+v %v", r, err)
			}
			at := atomicClaim(key+"-atomic", `{"a":3}`, time.Hour)
			at.ID.Scope = scope
			commit(t, cache, at, created(`{"id":"pay_1"}`))
			if _, found, err := cache.Get(ctx, at.ID); err != nil || !found {
				t.Fatalf("Get: %v %v", found, err)
			}

			names := scanAll(t, client, prefix)
			if len(names) != 4 {
				t.Fatalf("keys under the prefix: %q, want 4 (two lease records, the atomic record's copy, the completed lease record's copy)", names)
			}
			want := map[string]bool{}
			for _, p := range []string{"lease:", "replay:"} {
				for _, id := range []store.ID{done.ID, running.ID, at.ID} {
					want[prefix+p+"{"+store.DigestOf(id).KeyUUID()+"}"] = true
				}
			}
			for _, n := range names {
				if strings.Contains(n, scope) || strings.Contains(n, "raw-key") {
					t.Errorf("key name %q holds the raw scope or key", n)
				}
				if !want[n] {
					t.Errorf("key name %q is not <prefix>{<digest>}", n)
				}
				for _, v := range dumpValue(t, client, n) {
					if strings.Contains(v, scope) || strings.Contains(v, "raw-key") {
						t.Errorf("the value of %q holds the raw scope or key: %q", n, v)
					}
				}
			}
			// Support: found by (tenant, key).
			snaps, err := paired.Inspect(ctx, scope, []string{done.ID.Key, running.ID.Key, at.ID.Key}, true)
			if err != nil || len(snaps) != 3 {
				t.Fatalf("Inspect: %d snapshots, %v", len(snaps), err)
			}
			if snaps[0].State != store.Completed || string(snaps[0].Response.Body) != `{"id":"ch_1"}` || snaps[1].State != store.Running {
				t.Errorf("Inspect: %+v", snaps)
			}
		})
	}
}

// scanAll returns the names of every key under prefix, on every node.
func scanAll(t *testing.T, client rueidis.Client, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, node := range client.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// dumpValue returns the strings stored under name: a string's value, or a hash's fields and
// values.
func dumpValue(t *testing.T, client rueidis.Client, name string) []string {
	t.Helper()
	ctx := context.Background()
	typ, err := client.Do(ctx, client.B().Type().Key(name).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	switch typ {
	case "string":
		v, err := client.Do(ctx, client.B().Get().Key(name).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return []string{v}
	case "hash":
		m, err := client.Do(ctx, client.B().Hgetall().Key(name).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for k, v := range m {
			out = append(out, k, v)
		}
		return out
	}
	t.Fatalf("%s is a %s", name, typ)
	return nil
}
