package conformance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The adversary's rolling upgrade: a replica of the previous version executed a payment whose
// body had "Amount" beside "amount" (its decoder kept "Amount" as an undeclared member); the
// client's retry reached a replica of this version, whose decoder refuses such a name (a case
// variant of a declared one), and was told 400 body-invalid: that its request, which ran, was
// invalid. Now the refused request is decoded again as the earlier decoder did, and its record
// answers the retry, but only a record of that very request: fingerprint safety is kept.

// earlierDecode is createPayment's decoder as versions before the refusal of case variants ran
// it (gen.Input.Relax): the earlier replica.
func earlierDecode(in *gen.Input) (runtime.AtomicFunc[DBTX], error) {
	in.Relax()
	_, err := decodeCreatePayment(in)
	return func(ctx context.Context, db DBTX) (runtime.Response, error) {
		return runtime.Response{Status: http.StatusCreated, Body: []byte(`{"id":"pay_1"}`)}, nil
	}, err
}

func TestRequestAnEarlierVersionExecutedReplays(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t, 8)
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st := pgstore.New(pool, pgstore.Options{})
	rt, err := runtime.New(runtime.Config{Store: st, SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	hold := make(chan struct{})
	entered := make(chan struct{}, 1) // the held request's handler started: its key is claimed
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) }) // before the pool's Close, which waits for the held request
	earlier := runtime.AtomicHandler(rt, operationCreatePayment(), func(in *gen.Input) (runtime.AtomicFunc[DBTX], error) {
		held := in.Request.Header.Get("X-Hold") != ""
		fn, err := earlierDecode(in)
		return func(ctx context.Context, db DBTX) (runtime.Response, error) {
			if held {
				entered <- struct{}{}
				<-hold
			}
			return fn(ctx, db)
		}, err
	})
	current := CreatePaymentHandler(rt, func(context.Context, DBTX, CreatePaymentParams, CreatePaymentBody) (runtime.Response, error) {
		ran.Add(1)
		return runtime.Response{Status: http.StatusCreated, Body: []byte(`{"id":"pay_2"}`)}, nil
	})
	post := func(h http.Handler, key, body string, extra ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/payments", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		for i := 0; i+1 < len(extra); i += 2 {
			r.Header.Set(extra[i], extra[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const variant = `{"amount":100,"currency":"EUR","to":"acct_1","Amount":5}`
	const key = "k-upgrade-0001-aaaaaaaaaaaa"

	if w := post(earlier, key, variant); w.Code != http.StatusCreated {
		t.Fatalf("the earlier version: %d %s", w.Code, w.Body)
	}
	w := post(current, key, variant)
	if w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "true" || w.Body.String() != `{"id":"pay_1"}` {
		t.Errorf("the retry on this version: %d %v %s, want the earlier version's 201 replayed", w.Code, w.Header(), w.Body)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the handler ran %d times on this version", n)
	}

	// Under the same key, a body that is not the same request (the earlier decoder gave it
	// another fingerprint) gets the refusal, not the record's answer.
	if w := post(current, key, `{"amount":100,"currency":"EUR","to":"acct_1","Amount":6}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "letter case") {
		t.Errorf("another refused body under the executed key: %d %s, want the 400", w.Code, w.Body)
	}
	// A refused body whose key has no record is refused as before, and leaves no record.
	if w := post(current, "k-upgrade-0002-aaaaaaaaaaaa", variant); w.Code != http.StatusBadRequest {
		t.Errorf("a refused body with a fresh key: %d %s, want 400", w.Code, w.Body)
	}
	if _, found, err := st.Get(ctx, store.ID{Key: "k-upgrade-0002-aaaaaaaaaaaa"}); err != nil || found {
		t.Errorf("the refused request left a record (%v)", err)
	}

	// A completed record whose fingerprint cannot be compared (another framing version: the
	// version before this one's) answers a refused request as decide answers a request the
	// decoder takes (a replay, not a false 422 after an upgrade), and no more: a refused body
	// under a key of another operation keeps its 400.
	other := store.Claim{ID: store.ID{Key: "k-upgrade-0003-aaaaaaaaaaaa"}, Operation: operationCreatePayment().ID,
		Fingerprint: canonical.Fingerprint{Version: canonical.Version + 1}, Retention: time.Hour}
	tx, rec, err := st.BeginAtomic(ctx, other)
	if err != nil || rec != nil {
		t.Fatal(err, rec)
	}
	if err := tx.Commit(ctx, store.Response{Status: 201, Body: []byte(`{"id":"pay_9"}`)}); err != nil {
		t.Fatal(err)
	}
	if w := post(current, "k-upgrade-0003-aaaaaaaaaaaa", variant); w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("a refused body under a completed record of another framing version: %d %s, want its replay", w.Code, w.Body)
	}
	other.ID.Key, other.Operation = "k-upgrade-0005-aaaaaaaaaaaa", "createRefund"
	tx, rec, err = st.BeginAtomic(ctx, other)
	if err != nil || rec != nil {
		t.Fatal(err, rec)
	}
	if err := tx.Commit(ctx, store.Response{Status: 201, Body: []byte(`{"id":"re_1"}`)}); err != nil {
		t.Fatal(err)
	}
	if w := post(current, "k-upgrade-0005-aaaaaaaaaaaa", variant); w.Code != http.StatusBadRequest {
		t.Errorf("a refused body under a key of another operation: %d %s, want 400", w.Code, w.Body)
	}

	// While the earlier version still runs the request, its retry is in flight. The retry is
	// sent once the earlier request's handler runs: sent before, its lookup (a claim that runs
	// nothing) could take the key first, and the earlier request would then be the one answered
	// 409 (seen under load).
	running := make(chan int, 1)
	go func() { running <- post(earlier, "k-upgrade-0004-aaaaaaaaaaaa", variant, "X-Hold", "1").Code }()
	select {
	case <-entered:
	case code := <-running:
		t.Fatalf("the earlier version's held request ended before its handler ran: %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := post(current, "k-upgrade-0004-aaaaaaaaaaaa", variant)
		if w.Code == http.StatusConflict {
			break
		}
		if w.Code != http.StatusBadRequest || time.Now().After(deadline) {
			t.Fatalf("the retry while the earlier version runs it: %d %s, want 409", w.Code, w.Body)
		}
		time.Sleep(5 * time.Millisecond) // the earlier request has not claimed the key yet
	}
	release.Do(func() { close(hold) })
	if code := <-running; code != http.StatusCreated {
		t.Errorf("the earlier version's request: %d", code)
	}
	if w := post(current, "k-upgrade-0004-aaaaaaaaaaaa", variant); w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("the retry after the earlier version completed: %d %s, want its replay", w.Code, w.Body)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the handler ran %d times on this version", n)
	}
}
