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
INSERT INTO holds VALUES ('h-open', false), ('h-open-2', false), ('h-expired', true);
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
func serve(t *testing.T) (*httptest.Server, *pgxpool.Pool) {
	pool := pgtest.NewPool(t, 16)
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
	srv := httptest.NewServer(withKnobs(mux))
	t.Cleanup(srv.Close)
	return srv, pool
}

// TestReplayRulesConform runs idemgen conform with its fault checks (short) against the
// generated service, one operation and one answer at a time: every run checks its operation
// (no NOT CHECKED) and fails nothing, and the runs that meet a 404 show which rule decided it.
func TestReplayRulesConform(t *testing.T) {
	srv, pool := serve(t)
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
		// checks, when set, are the only checks run (see the last run).
		checks  []conform.Check
		effects bool
	}{
		// ["2xx", "!404", "4xx"]: "4xx" decides last, so the 404 is stored and replayed.
		{name: "charge a hold that does not exist: 404 stored", op: "chargeHold", hold: "h-none", first: http.StatusNotFound, notFound: "ok", effects: true},
		{name: "charge an expired hold: 410 stored", op: "chargeHold", hold: "h-expired", first: http.StatusGone, effects: true},
		{name: "charge an open hold: 201", op: "chargeHold", hold: "h-open", first: http.StatusCreated, effects: true},
		// ["2xx", "4xx", "!404"]: another 4xx is stored.
		{name: "release an expired hold: 410 stored", op: "releaseHold", hold: "h-expired", first: http.StatusGone, effects: true},
		// The first release deletes the hold, so every later key's release is a 404, which
		// "!404" (last) keeps from being stored: the checks that need a stored answer skip with
		// that reason (were the 404 taken as stored, replay would fail: it is never replayed),
		// and two-connections' history takes each 404 as a release of the key. The checks that
		// expect every fresh key to execute again (effects counts, concurrent-duplicates,
		// lost-response, late-duplicate, retry-storm) do not hold for an operation that consumed
		// its resource: conform offers
		// --fresh-param for that, which would never meet the 404.
		{name: "release an open hold, then 404s not stored", op: "releaseHold", hold: "h-open-2", first: http.StatusOK, notFound: "500",
			checks: []conform.Check{conform.CheckFirstRequest, conform.CheckReplay, conform.CheckMismatch, conform.CheckKeyMissing,
				conform.CheckKeyMalformed, conform.CheckTenants, conform.CheckTwoConnections}},
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
				Checks:       run.checks,
				Faults:       true,
				Short:        true,
				Seed:         34,
			}
			if run.effects {
				o.Effects = effects
			}
			rep, err := conform.Run(context.Background(), res.Doc, o)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			conform.WriteText(&text, rep)
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
			if run.notFound == "500" {
				for _, c := range []conform.Check{conform.CheckReplay, conform.CheckMismatch, conform.CheckTenants} {
					if r := by[c]; r.Status != conform.Skip || !strings.Contains(r.Why, "got 404, not first-request's 200") || !strings.Contains(r.Why, "which replay.statuses does not store") {
						t.Errorf("%s: want a skip for the unstored 404, got %s %s", c, r.Status, r.Why)
					}
				}
			}
			// The fault checks ran and their histories are linearizable under the model conform
			// derives from replay.statuses, each 404 taken as the rules say.
			met := false
			for _, c := range faults {
				r, ran := by[c]
				if !ran && run.checks != nil {
					continue
				}
				if r.Status != conform.Pass || r.History == nil || r.History.Verdict != "Ok" {
					t.Errorf("%s: %s %s", c, r.Status, r.Why)
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
