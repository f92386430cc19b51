package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The digests a record is stored under are what docs/runtime.md says, in SQL as in Go, for
// short and long scopes (longer than the stack buffer digest hashes from), so support staff can
// find a record by hand and bench/cmd/benchscale can fill the table in SQL.
func TestDigestSQL(t *testing.T) {
	pool := pgtest.NewPool(t, 2)
	for _, id := range []store.ID{
		{Scope: "t1", Key: "k-test-0001-aaaaaaaaaaaa"},
		{Scope: "", Key: "createRefund k-1"},
		{Scope: strings.Repeat("s", 2700), Key: strings.Repeat("k", 255)},
		{Scope: "tenant-é", Key: "x"},
	} {
		scope, key := pgstore.Digest(id)
		var gotScope int64
		var gotKey [16]byte
		err := pool.QueryRow(context.Background(), `SELECT
	('x' || encode(substr(sha256('\x6964656d67656e2f73636f70652f763100'::bytea || convert_to($1, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint,
	encode(substr(sha256('\x6964656d67656e2f7265636f72642f763100'::bytea || int8send(octet_length($1)::bigint)
		|| convert_to($1, 'UTF8') || convert_to($2, 'UTF8')), 1, 16), 'hex')::uuid`, id.Scope, id.Key).Scan(&gotScope, &gotKey)
		if err != nil {
			t.Fatal(err)
		}
		if gotScope != scope || gotKey != key {
			t.Errorf("scope of %d bytes: SQL digests %x %x, Go %x %x", len(id.Scope), gotScope, gotKey, scope, key)
		}
	}
	a, _ := pgstore.Digest(store.ID{Scope: "ab", Key: "c"})
	b, _ := pgstore.Digest(store.ID{Scope: "a", Key: "bc"})
	_, ka := pgstore.Digest(store.ID{Scope: "ab", Key: "c"})
	_, kb := pgstore.Digest(store.ID{Scope: "a", Key: "bc"})
	if a == b || ka == kb {
		t.Error("(ab, c) and (a, bc) must not share digests: the scope's length is framed")
	}
}
