package replayrules

// Hand-written test of replay.statuses as a client meets them: the generated service, served on
// PostgreSQL, answers 404 and 410 on demand (a hold that does not exist, a hold that expired),
// and `idemgen conform`, faults included, judges it by the spec. chargeHold's
// ["2xx", "!404", "4xx"] stores a 404 (the last matching rule decides, runtime/defaults.Final);
// releaseHold's ["2xx", "4xx", "!404"] does not. Issue 34: conform's model once let the
// exclusion win wherever it stood, and failed the fault checks of this correct service.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The holds every tenant sees: h-open and h-open-2 take charges, h-expired answers 410, a hold
// not in the table 404. A release deletes its hold, so a second release of it is a 404.
const schema = `
CREATE TABLE holds (hold text PRIMARY KEY, expired boolean NOT NULL);
INSERT INTO holds VALUES ('h-open', false), ('h-open-2', false), ('h-open-3', false), ('h-expired', true);
CREATE TABLE charges (id bigserial PRIMARY KEY, tenant text NOT NULL, hold text NOT NULL, amount bigint NOT NULL);
CREATE TABLE releases (id bigserial PRIMARY KEY, tenant text NOT NULL, hold text NOT NULL, reason text NOT NULL);`

type knobsKey struct{}

// knobs are the test knobs of one request: X-Test-Fail: 500 fails the handler after its work,
// X-Test-Delay: 300ms makes it take its time (docs/conform.md, "What the service must lend").
type knobs struct {
	tenant string
	fail   bool
	delay  time.Duration
}

func bearer(r *http.Request) (string, error) {
	t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || t == "" {
		return "", errors.New("no bearer token")
	}
	return t, nil
}

func withKnobs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := knobs{fail: r.Header.Get("X-Test-Fail") == "500"}
		k.tenant, _ = bearer(r)
		k.delay, _ = time.ParseDuration(r.Header.Get("X-Test-Delay"))
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), knobsKey{}, k)))
	})
}

// finish applies the request's knobs to the handler's answer: finish(ctx)(resp, err).
func finish(ctx context.Context) func(runtime.Response, error) (runtime.Response, error) {
	k, _ := ctx.Value(knobsKey{}).(knobs)
	return func(resp runtime.Response, err error) (runtime.Response, error) {
		time.Sleep(k.delay)
		if err == nil && k.fail {
			return runtime.Response{}, errors.New("X-Test-Fail: failing after the work")
		}
		return resp, err
	}
}

// hold answers 404 for a hold that does not exist and 410 for one that expired; ok is false
// then, and resp the answer.
func hold(ctx context.Context, tx DBTX, id string) (resp runtime.Response, ok bool, err error) {
	var expired bool
	switch err := tx.QueryRow(ctx, `SELECT expired FROM holds WHERE hold = $1`, id).Scan(&expired); {
	case errors.Is(err, pgx.ErrNoRows):
		resp, err := runtime.JSON(http.StatusNotFound, map[string]string{"error": "no such hold", "hold": id})
		return resp, false, err
	case err != nil:
		return runtime.Response{}, false, err
	case expired:
		resp, err := runtime.JSON(http.StatusGone, map[string]string{"error": "the hold expired", "hold": id})
		return resp, false, err
	}
	return runtime.Response{}, true, nil
}

func handlers() Handlers {
	return Handlers{
		ChargeHold: func(ctx context.Context, tx DBTX, p ChargeHoldParams, b ChargeHoldBody) (runtime.Response, error) {
			resp, ok, err := hold(ctx, tx, p.Hold)
			if err != nil || !ok {
				return finish(ctx)(resp, err)
			}
			var id int64
			k, _ := ctx.Value(knobsKey{}).(knobs)
			if err := tx.QueryRow(ctx, `INSERT INTO charges (tenant, hold, amount) VALUES ($1, $2, $3) RETURNING id`, k.tenant, p.Hold, b.Amount).Scan(&id); err != nil {
				return runtime.Response{}, err
			}
			return finish(ctx)(runtime.JSON(http.StatusCreated, map[string]any{"id": fmt.Sprintf("ch_%d", id), "hold": p.Hold, "amount": b.Amount}))
		},
		ReleaseHold: func(ctx context.Context, tx DBTX, p ReleaseHoldParams, b ReleaseHoldBody) (runtime.Response, error) {
			resp, ok, err := hold(ctx, tx, p.Hold)
			if err != nil || !ok {
				return finish(ctx)(resp, err)
			}
			var id int64
			k, _ := ctx.Value(knobsKey{}).(knobs)
			if err := tx.QueryRow(ctx, `INSERT INTO releases (tenant, hold, reason) VALUES ($1, $2, $3) RETURNING id`, k.tenant, p.Hold, string(b.Reason)).Scan(&id); err != nil {
				return runtime.Response{}, err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM holds WHERE hold = $1`, p.Hold); err != nil {
				return runtime.Response{}, err
			}
			return finish(ctx)(runtime.JSON(http.StatusOK, map[string]any{"id": fmt.Sprintf("rel_%d", id), "hold": p.Hold, "reason": b.Reason}))
		},
	}
}

// serve starts the generated service on a fresh database.
func serve(t *testing.T) (srv, forgetful *httptest.Server, pool *pgxpool.Pool) {
	pool = pgtest.NewPool(t, 16)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: bearer})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := Register(mux, rt, handlers()); err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(withKnobs(mux))
	t.Cleanup(srv.Close)
	forgetful = httptest.NewServer(storesNothing(withKnobs(mux)))
	t.Cleanup(forgetful.Close)
	return srv, forgetful, pool
}

// storesNothing is a buggy idempotency layer in front of the service: it gives every request a
// key never seen before, so nothing a client sends is ever replayed (a layer whose store loses
// every record). conform must fail it, even on an operation whose resource is used up after
// its first execution, where a correct service's fresh keys meet an unstored 404.
func storesNothing(next http.Handler) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") != "" {
			r.Header.Set("Idempotency-Key", fmt.Sprintf("forgotten-%d-%s", n.Add(1), r.Header.Get("Idempotency-Key")))
		}
		next.ServeHTTP(w, r)
	})
}

// TestReplayRulesConform runs idemgen conform with its fault checks (short) against the
// generated service, one operation and one answer at a time: every run checks its operation
// (no NOT CHECKED) and fails nothing, and the runs that meet a 404 show which rule decided it.
func TestReplayRulesConform(t *testing.T) {
	srv, forgetful, pool := serve(t)
	// Judged by the spec as `idemgen spec` declares it to clients (Idempotency-Key-Expires on
	// every stored answer and replay).
	res := conformancetest.Annotated(t, spec.Options{Path: "../../testdata/specs/replay-rules.yaml"})
	effects := func(ctx context.Context) (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM charges) + (SELECT count(*) FROM releases)`).Scan(&n)
		return n, err
	}
	faults := []conform.Check{conform.CheckLostResponse, conform.CheckLateDuplicate, conform.CheckTwoConnections, conform.CheckStorm}
	for _, run := range []struct {
		name, op, hold string
		// first is first-request's status, a stored answer every check runs on.
		first int
		// notFound is what conform must take a 404 for in the fault histories: "ok" (an
		// execution, stored), "500" (a release of the key, not stored), "" when none is met.
		notFound string
		// usedUp are the checks that skip under conform's used-up rule: a fresh key's answer
		// unstored and other than first-request's (the last run).
		usedUp []conform.Check
		// otherSkips are the other checks that skip, by a part of their reason; with usedUp
		// set, every check named in neither passes.
		otherSkips map[conform.Check]string
		// buggy runs the service behind storesNothing: want the checks in failing to fail.
		buggy   bool
		failing map[conform.Check]string
		effects bool
	}{
		// ["2xx", "!404", "4xx"]: "4xx" decides last, so the 404 is stored and replayed.
		{name: "charge a hold that does not exist: 404 stored", op: "chargeHold", hold: "h-none", first: http.StatusNotFound, notFound: "ok", effects: true},
		{name: "charge an expired hold: 410 stored", op: "chargeHold", hold: "h-expired", first: http.StatusGone, effects: true},
		{name: "charge an open hold: 201", op: "chargeHold", hold: "h-open", first: http.StatusCreated, effects: true},
		// ["2xx", "4xx", "!404"]: another 4xx is stored.
		{name: "release an expired hold: 410 stored", op: "releaseHold", hold: "h-expired", first: http.StatusGone, effects: true},
		// The first release deletes the hold, so every later key's release is a 404, which
		// "!404" (last) keeps from being stored: a correct service executes nothing on it and
		// stores nothing. Every check runs; those that need a fresh execution or a stored answer
		// skip with that reason (conform's used-up rule), the others pass, and the fault
		// histories take each 404 as a release of the key.
		{name: "release an open hold, then 404s not stored", op: "releaseHold", hold: "h-open-2", first: http.StatusOK, notFound: "500", effects: true,
			usedUp: []conform.Check{conform.CheckReplay, conform.CheckEquivalent, conform.CheckMismatch, conform.CheckKeyReuse,
				conform.CheckConcurrent, conform.Check5xxRollsBack, conform.CheckTenants,
				conform.CheckLostResponse, conform.CheckLateDuplicate, conform.CheckTwoConnections, conform.CheckStorm},
			otherSkips: map[conform.Check]string{conform.CheckExcluded: "excludes no field"}},
		// The same operation behind a layer that stores nothing: its fresh keys meet the same
		// unstored 404, but first-request's key is no replay either, so the used-up rule grants
		// no skip and the checks that met the 404 fail.
		{name: "release an open hold behind a layer that stores nothing: caught", op: "releaseHold", hold: "h-open-3", first: http.StatusOK, buggy: true, effects: true,
			failing: map[conform.Check]string{conform.CheckReplay: "but first-request's key, sent again, is no replay of its 200 either"}},
	} {
		t.Run(run.name, func(t *testing.T) {
			o := conform.Options{
				BaseURL:      srv.URL,
				Header:       http.Header{"Authorization": {"Bearer tenant-a"}},
				TenantHeader: http.Header{"Authorization": {"Bearer tenant-b"}},
				Params:       map[string]string{"hold": run.hold},
				FailHeader:   http.Header{"X-Test-Fail": {"500"}},
				DelayHeader:  http.Header{"X-Test-Delay": {"300ms"}},
				Operations:   []string{run.op},
				Faults:       true,
				Short:        true,
				Seed:         34,
			}
			if run.effects {
				o.Effects = effects
			}
			if run.buggy {
				o.BaseURL = forgetful.URL
			}
			rep, err := conform.Run(context.Background(), res.Doc, o)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			conform.WriteText(&text, rep)
			if run.buggy {
				caught := map[conform.Check]bool{}
				for _, r := range rep.Results {
					if r.Status == conform.Fail {
						caught[r.Check] = true
					}
					if why, ok := run.failing[r.Check]; ok && (r.Status != conform.Fail || !strings.Contains(r.Why, why)) {
						t.Errorf("%s: want it failed (%s), got %s %s", r.Check, why, r.Status, r.Why)
					}
					if r.Status == conform.Skip && strings.Contains(r.Why, "the resource was used up") {
						t.Errorf("%s: a service that stores nothing hid behind the used-up skip: %s", r.Check, r.Why)
					}
				}
				if !rep.Failed() {
					t.Fatalf("idemgen conform passed a layer that stores nothing:\n%s", text.String())
				}
				t.Logf("caught, %d check(s) failed:\n%s", len(caught), text.String())
				return
			}
			if rep.Failed() || rep.Incomplete() {
				t.Fatalf("idemgen conform: want no check failed and the operation checked:\n%s", text.String())
			}
			t.Log(text.String())
			by := map[conform.Check]conform.Result{}
			for _, r := range rep.Results {
				by[r.Check] = r
			}
			if first := by[conform.CheckFirstRequest]; first.Status != conform.Pass {
				t.Fatalf("first-request: %s %s", first.Status, first.Why)
			} else if stored := fmt.Sprintf("answers the generated request %d and stores it", run.first); run.first >= 300 && !strings.Contains(strings.Join(first.Notes, "\n"), stored) {
				t.Errorf("first-request did not meet a stored %d: %q", run.first, first.Notes)
			}
			// Every check but those the used-up rule skips passes or skips for a reason that is
			// no used-up answer; the used-up ones skip naming the status and the rules.
			usedUp := map[conform.Check]bool{}
			for _, c := range run.usedUp {
				usedUp[c] = true
			}
			want := `got 404, not first-request's 200 (the resource was used up?), which replay.statuses ["2xx", "4xx", "!404"] does not store`
			for _, r := range rep.Results {
				switch {
				case usedUp[r.Check] && (r.Status != conform.Skip || !strings.Contains(r.Why, want)):
					t.Errorf("%s: want a skip for the unstored 404 (%s), got %s %s", r.Check, want, r.Status, r.Why)
				case !usedUp[r.Check] && strings.Contains(r.Why, "the resource was used up"):
					t.Errorf("%s: skipped for a used-up resource, want it judged: %s", r.Check, r.Why)
				case run.usedUp != nil && !usedUp[r.Check] && run.otherSkips[r.Check] == "" && r.Status != conform.Pass:
					t.Errorf("%s: %s %s, want it passed", r.Check, r.Status, r.Why)
				case run.otherSkips[r.Check] != "" && (r.Status != conform.Skip || !strings.Contains(r.Why, run.otherSkips[r.Check])):
					t.Errorf("%s: want a skip (%s), got %s %s", r.Check, run.otherSkips[r.Check], r.Status, r.Why)
				}
			}
			// The fault checks ran and their histories are linearizable under the model conform
			// derives from replay.statuses, each 404 taken as the rules say.
			met := false
			for _, c := range faults {
				r := by[c]
				if wantStatus := map[bool]conform.Status{true: conform.Skip, false: conform.Pass}[usedUp[c]]; r.Status != wantStatus || r.History == nil || r.History.Verdict != "Ok" {
					t.Errorf("%s: %s %s, want %s and a linearizable history", c, r.Status, r.Why, wantStatus)
					continue
				}
				for _, a := range r.History.Attempts {
					if a.Status != http.StatusNotFound {
						continue
					}
					met = true
					if a.Kind != run.notFound && !(run.notFound == "ok" && strings.HasPrefix(a.Kind, "replay")) {
						t.Errorf("%s: %s, a 404, taken as %q, want %q", c, a.ID, a.Kind, run.notFound)
					}
				}
			}
			if met != (run.notFound != "") {
				t.Errorf("a 404 met in the fault histories: %v, want %v", met, run.notFound != "")
			}
		})
	}
}
