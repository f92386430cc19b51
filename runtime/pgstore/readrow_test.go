package pgstore_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// A record's read (a replay's lookup) decodes the row's columns itself when they come as pgx's
// extended protocol receives them, and lets pgx scan them when they come in another form (the
// simple protocol of a pool behind a transaction-pooling proxy): both give the same record, for
// every shape a record has.
func TestReadDecodesAsPgxScans(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool := func(url string) *pgxpool.Pool {
		p, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	extended, simple := pool(url), pool(url+"&default_query_exec_mode=simple_protocol")
	if err := migrate(ctx, extended); err != nil {
		t.Fatal(err)
	}
	ours := pgstore.New(extended, pgstore.Options{Partitioned: partitioned()})
	pgxs := pgstore.New(simple, pgstore.Options{Partitioned: partitioned()})

	complete := func(key string, resp store.Response) store.ID {
		c := inspectClaim("t1", key, "createPayment", time.Minute)
		tok := reserve(t, ours, c)
		c.Retention = time.Hour
		if err := ours.Complete(ctx, c, tok, resp); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	running := inspectClaim("t1", "k-running-00000001", "captureCharge", time.Minute)
	reserve(t, ours, running)
	ids := map[string]store.ID{
		"headers and body": complete("k-full-0000000001", store.Response{Status: 201,
			Header: []byte(`{"Content-Type":["application/json"],"Location":["/v1/payments/7"]}`), Body: []byte(`{"id":7}`)}),
		"no headers, empty body": complete("k-empty-000000001", store.Response{Status: 204, Body: []byte{}}),
		"body omitted":           complete("k-omitted-0000001", store.Response{Status: 200, Header: []byte(`{"Content-Type":["text/plain"]}`), BodyOmitted: true}),
		"running":                running.ID,
	}
	// direct is the record as an atomic-mode claim reads it, on a connection's pgconn
	// (directread.go): the claim's call is bounded by a deadline, as the runtime's store calls.
	direct := func(id store.ID) (store.Record, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c := inspectClaim(id.Scope, id.Key, "createPayment", time.Minute)
		c.ID = id
		tx, rec, err := ours.BeginAtomic(ctx, c)
		if tx != nil {
			_ = tx.Abort(ctx)
		}
		if rec == nil {
			return store.Record{}, false, err
		}
		return *rec, true, err
	}
	for name, id := range ids {
		t.Run(name, func(t *testing.T) {
			got, okGot, err := ours.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			dgot, okDirect, err := direct(id)
			if err != nil || !okDirect {
				t.Fatalf("the claim's read: found %v, %v", okDirect, err)
			}
			want, okWant, err := pgxs.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !okGot || !okWant {
				t.Fatalf("found %v (decoded) and %v (scanned by pgx)", okGot, okWant)
			}
			// The clock decisions move between the two reads.
			for _, d := range []*time.Duration{&got.RetentionLeft, &want.RetentionLeft, &got.LeaseLeft, &want.LeaseLeft} {
				*d = d.Round(time.Minute)
			}
			same := got.Operation == want.Operation && got.Fingerprint == want.Fingerprint && got.Token == want.Token &&
				got.State == want.State && got.RetentionLeft == want.RetentionLeft && got.LeaseLeft == want.LeaseLeft &&
				got.Response.Status == want.Response.Status && got.Response.BodyOmitted == want.Response.BodyOmitted &&
				bytes.Equal(got.Response.Header, want.Response.Header) && (got.Response.Header == nil) == (want.Response.Header == nil) &&
				bytes.Equal(got.Response.Body, want.Response.Body) && (got.Response.Body == nil) == (want.Response.Body == nil)
			if !same {
				t.Errorf("decoded %+v\nscanned by pgx %+v", got, want)
			}
			dgot.RetentionLeft, dgot.LeaseLeft = dgot.RetentionLeft.Round(time.Minute), dgot.LeaseLeft.Round(time.Minute)
			if !reflect.DeepEqual(dgot, got) {
				t.Errorf("read on the connection's pgconn %+v\nthrough pgx %+v", dgot, got)
			}
			if got.Operation == "" || got.Token == 0 || got.Fingerprint.Version == 0 {
				t.Errorf("a field was not read: %+v", got)
			}
		})
	}
	if _, ok, err := ours.Get(ctx, store.ID{Scope: "t1", Key: "k-absent-00000001"}); ok || err != nil {
		t.Errorf("a key without a record: found %v, %v", ok, err)
	}

	// A key remembered after its retention (issue 39): by its expired record, then (plain table)
	// by the tombstone the sweeper moved it into. The decoder leaves such a row to pgx's scan; both
	// reads give the same Expired record.
	c := inspectClaim("t1", "k-remembered-00001", "createPayment", time.Minute)
	tok := reserve(t, ours, c)
	c.Retention, c.Tombstone = time.Second, time.Hour
	if err := ours.Complete(ctx, c, tok, store.Response{Status: 201, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	remembered := func(when string) {
		t.Helper()
		got, okGot, err1 := ours.Get(ctx, c.ID)
		want, okWant, err2 := pgxs.Get(ctx, c.ID)
		if err1 != nil || err2 != nil || !okGot || !okWant {
			t.Fatalf("%s: found %v %v (decoded), %v %v (scanned by pgx)", when, okGot, err1, okWant, err2)
		}
		if got.State != store.Expired || got.StatusClass != 2 || got.Fingerprint != want.Fingerprint || !got.CompletedAt.Equal(want.CompletedAt) ||
			got.ForgetLeft.Round(time.Minute) != want.ForgetLeft.Round(time.Minute) || got.State != want.State {
			t.Errorf("%s: decoded %+v\nscanned by pgx %+v", when, got, want)
		}
		dgot, okDirect, err := direct(c.ID)
		if err != nil || !okDirect || dgot.State != store.Expired || dgot.StatusClass != 2 || dgot.Fingerprint != want.Fingerprint ||
			!dgot.CompletedAt.Equal(want.CompletedAt) || dgot.ForgetLeft.Round(time.Minute) != want.ForgetLeft.Round(time.Minute) {
			t.Errorf("%s: read on the connection's pgconn %+v (found %v, %v)\nscanned by pgx %+v", when, dgot, okDirect, err, want)
		}
	}
	eventually(t, "the retention to end", func() bool {
		rec, _, err := pgxs.Get(ctx, c.ID)
		return err == nil && rec.State == store.Expired
	})
	remembered("past its retention")
	if !partitioned() {
		if _, err := (&pgstore.Sweeper{Pool: extended}).SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
		remembered("after the sweep")
	}
}
