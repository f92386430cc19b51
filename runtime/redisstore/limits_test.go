package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// One limit, every tier: the cache and the paired store keep what PostgreSQL kept under its
// per-scope stored-bytes cap, so a replay is the same from Redis, from the in-process tier and
// from PostgreSQL after Redis lost its copy (docs/design.md section 5: a replay carries the stored
// status, headers and body; which tier answers must not change them).
func TestOneLimitEveryTier(t *testing.T) {
	const n, size, capBytes = 60, 200 << 10, 6 << 20
	body := strings.Repeat("y", size)
	for _, role := range []string{"cache", "paired"} {
		t.Run(role, func(t *testing.T) {
			ctx := context.Background()
			pg := pgstore.New(newPool(t), pgstore.Options{Limits: pgstore.Limits{BodyBytes: capBytes}})
			if _, err := pg.Pool().Exec(ctx, paymentsTable); err != nil {
				t.Fatal(err)
			}
			client := redistest.NewClient(t, redistest.Standalone)
			prefix := redistest.Prefix(t)
			cache := redisstore.NewCache[pgstore.DBTX](pg, client, redisstore.CacheOptions{Prefix: prefix + "replay:", LocalBytes: 64 << 20})
			leases, err := redisstore.New(client, redisstore.Options{Prefix: prefix + "lease:"})
			if err != nil {
				t.Fatal(err)
			}
			paired := redisstore.Pair[pgstore.DBTX](leases, pg)
			ids := make([]store.ID, n)
			for i := range n {
				key := fmt.Sprintf("big-key-%012d", i)
				if role == "cache" {
					c := atomicClaim(key, body, time.Hour)
					commit(t, cache, c, created(body))
					ids[i] = c.ID
					continue
				}
				c := leaseClaim(key, body, time.Minute)
				r, err := paired.Reserve(ctx, c)
				if err != nil || !r.Claimed() {
					t.Fatalf("Reserve: %+v %v", r, err)
				}
				if err := complete(ctx, paired, c, r.Token, body); err != nil {
					t.Fatal(err)
				}
				ids[i] = c.ID
			}
			var omitted int
			var lookup func(context.Context, store.ID) (store.Record, bool, error) = cache.Get
			if role == "paired" {
				lookup = paired.Get
			}
			for _, id := range ids {
				want, found, err := pg.Get(ctx, id)
				if err != nil || !found {
					t.Fatalf("PostgreSQL's record: %v %v", found, err)
				}
				if want.Response.BodyOmitted {
					omitted++
				}
				for range 2 { // Redis, then the in-process tier (cache)
					got, found, err := lookup(ctx, id)
					if err != nil || !found {
						t.Fatalf("%s's record: %v %v", role, found, err)
					}
					if got.Response.BodyOmitted != want.Response.BodyOmitted || len(got.Response.Body) != len(want.Response.Body) {
						t.Errorf("%s: replayed with omitted=%v and %d body bytes; PostgreSQL kept omitted=%v, %d bytes",
							id.Key, got.Response.BodyOmitted, len(got.Response.Body), want.Response.BodyOmitted, len(want.Response.Body))
					}
				}
			}
			if omitted == 0 || omitted == n {
				t.Fatalf("PostgreSQL omitted %d of %d bodies under a %d-byte cap", omitted, n, capBytes)
			}
			if held := redisBytes(t, client, prefix); held > capBytes+n*1024 {
				t.Errorf("Redis holds %d bytes of records under a cap of %d: it ignored the cap", held, capBytes)
			} else {
				t.Logf("%d of %d bodies omitted; Redis holds %d bytes under a cap of %d", omitted, n, held, capBytes)
			}
		})
	}
}

// redisBytes is the size of the values under prefix: a string's length, a hash's fields'.
func redisBytes(t *testing.T, client rueidis.Client, prefix string) int {
	t.Helper()
	total := 0
	for _, name := range scanAll(t, client, prefix) {
		for _, v := range dumpValue(t, client, name) {
			total += len(v)
		}
	}
	return total
}

// The records cap holds on the paired store too: its Redis claims are counted in PostgreSQL as
// they are granted (store.Admitter), so a tenant over the cap is refused before its call phase
// (counted only at the completion's commit, the provider call would already be made), and the
// refused key's Redis claim is given back.
func TestPairedRecordsCap(t *testing.T) {
	ctx := context.Background()
	pg := pgstore.New(newPool(t), pgstore.Options{Limits: pgstore.Limits{Records: 2, RecordsInterval: time.Hour}})
	if _, err := pg.Pool().Exec(ctx, paymentsTable); err != nil {
		t.Fatal(err)
	}
	leases, err := redisstore.New(redistest.NewClient(t, redistest.Standalone), redisstore.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range []store.Transactional[pgstore.DBTX]{pg, redisstore.NewCache[pgstore.DBTX](pg, redistest.NewClient(t, redistest.Standalone), testCacheOptions(t, false))} {
		if _, err := pg.Pool().Exec(ctx, "TRUNCATE idempotency_scope_usage, idempotency_records, idempotency_tombstones"); err != nil {
			t.Fatal(err)
		}
		paired := redisstore.Pair[pgstore.DBTX](leases, db)
		for i := range 2 {
			c := leaseClaim(fmt.Sprintf("capped-key-%010d-%p", i, db), `{"a":1}`, time.Minute)
			r, err := paired.Reserve(ctx, c)
			if err != nil || !r.Claimed() {
				t.Fatalf("claim %d: %+v %v", i, r, err)
			}
			if err := complete(ctx, paired, c, r.Token, `{"id":1}`); err != nil {
				t.Fatalf("completion %d under the cap: %v", i, err)
			}
		}
		over := leaseClaim(fmt.Sprintf("capped-key-over-%p", db), `{"a":1}`, time.Minute)
		var limited *store.LimitError
		if _, err := paired.Reserve(ctx, over); !errors.As(err, &limited) {
			t.Fatalf("the third new key: %v, want a LimitError", err)
		}
		if _, found, err := leases.Get(ctx, over.ID); err != nil || found {
			t.Errorf("the refused key's Redis claim: found %v (%v), want it given back", found, err)
		}
	}
}
