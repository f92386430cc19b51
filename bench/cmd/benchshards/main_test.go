package main

import (
	"slices"
	"testing"

	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The driver routes by the digest pgstore stores in scope_id, whatever the key: a record
// written for tenant t lands in the shard route(t, k) names.
func TestRouteIsTheStoredScopeID(t *testing.T) {
	for i := range 50 {
		tenant := tenantName(i)
		scope, _ := pgstore.Digest(store.ID{Scope: tenant, Key: "any-key"})
		for _, k := range []int{1, 2, 3, 4, 7} {
			if got, want := route(tenant, k), int(uint64(scope)%uint64(k)); got != want {
				t.Fatalf("route(%q, %d) = %d, scope_id routes to %d", tenant, k, got, want)
			}
		}
	}
}

// The short mode's 64 tenants leave no shard of 2 or 4 empty: every shard's share check and
// per-new-key figures have requests to measure.
func TestEveryShardGetsTenants(t *testing.T) {
	for _, k := range []int{2, 4} {
		counts := make([]int, k)
		for i := range 64 {
			counts[route(tenantName(i), k)]++
		}
		if slices.Contains(counts, 0) {
			t.Fatalf("%d shards over 64 tenants: %v", k, counts)
		}
	}
}

func TestShardCounts(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want []int
	}{{"", 1, []int{1}}, {"", 4, []int{1, 2, 4}}, {"", 3, []int{1, 2, 3}}, {"1,2", 4, []int{1, 2}}} {
		got, err := shardCounts(c.in, c.n)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("shardCounts(%q, %d) = %v, %v; want %v", c.in, c.n, got, err, c.want)
		}
	}
	for _, bad := range []string{"0", "x", "5"} {
		if _, err := shardCounts(bad, 4); err == nil {
			t.Errorf("shardCounts(%q, 4) accepted", bad)
		}
	}
}

func TestShareTolerance(t *testing.T) {
	// 4 standard deviations of a fair split of 4,000 requests is 3.2 %, plus 0.5 %.
	if got := shareTolerance(0.5, 4000); got < 0.036 || got > 0.038 {
		t.Fatalf("shareTolerance(0.5, 4000) = %v", got)
	}
}
