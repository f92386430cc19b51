package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/petstore/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// schemaSQL is the store's own schema; the idempotency store's table comes from pgstore.Migrate.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS pets (
	id         bigserial PRIMARY KEY,
	name       text NOT NULL,
	status     text,
	doc        jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS orders (
	id         bigserial PRIMARY KEY,
	pet_id     bigint NOT NULL REFERENCES pets (id),
	quantity   integer NOT NULL,
	ship_date  timestamptz,
	status     text NOT NULL,
	complete   boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL DEFAULT now()
);
-- Adoptions, the long-running operation: the status resource reads this table.
CREATE TABLE IF NOT EXISTS adoptions (
	id           bigserial PRIMARY KEY,
	owner        text NOT NULL,
	pet_id       bigint NOT NULL REFERENCES pets (id),
	adopter      text NOT NULL,
	home         text,
	status       text NOT NULL CHECK (status IN ('queued', 'running', 'approved')),
	progress     integer NOT NULL,
	step         text NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT now(),
	completed_at timestamptz
);
-- The outbox: one job per adoption, written in the transaction that creates the adoption (and
-- stores adoptPet's idempotency record); workers claim jobs with a lease.
CREATE TABLE IF NOT EXISTS adoption_jobs (
	id           bigserial PRIMARY KEY,
	adoption_id  bigint NOT NULL UNIQUE REFERENCES adoptions (id),
	attempts     integer NOT NULL DEFAULT 0,
	locked_until timestamptz,
	done_at      timestamptz,
	created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS adoption_jobs_pending_idx ON adoption_jobs (id) WHERE done_at IS NULL;
`

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("migrate store: %w", err)
	}
	return nil
}

// options are the example's knobs.
type options struct {
	// orderDelay makes placeOrder wait before it writes, so that a concurrent retry of the same
	// order can be seen getting 409 (the demo and the tests use it).
	orderDelay time.Duration
	// adoptionStep is how long each check of an adoption takes in the worker; jobPoll how often
	// an idle worker looks at the outbox. Zero: 2s and 500ms.
	adoptionStep, jobPoll time.Duration
}

// newWorker returns the adoption worker for pool.
func newWorker(pool *pgxpool.Pool, opts options) *worker {
	w := &worker{pool: pool, step: opts.adoptionStep, poll: opts.jobPoll, lease: time.Minute, log: slog.Default()}
	if w.step <= 0 {
		w.step = 2 * time.Second
	}
	if w.poll <= 0 {
		w.poll = 500 * time.Millisecond
	}
	return w
}

// apiKeyScope is the idempotency scope: the spec's api_key header names the client, so two
// clients never share idempotency keys. A request without one is refused before any key lookup.
func apiKeyScope(r *http.Request) (string, error) {
	k := strings.TrimSpace(r.Header.Get("api_key"))
	if k == "" {
		return "", errors.New("missing api_key header")
	}
	return k, nil
}

// newServer wires the generated, idempotent operations on st and the store's plain read
// operations into one handler, and returns the runtime (main shuts it down with the server).
func newServer(st *pgstore.Store, pool *pgxpool.Pool, opts options) (http.Handler, *runtime.Runtime, error) {
	rt, err := runtime.New(runtime.Config{Store: st, Scope: apiKeyScope})
	if err != nil {
		return nil, nil, err
	}
	s := &store{pool: pool, opts: opts}
	mux := http.NewServeMux()
	if err := api.Register(mux, rt, api.Handlers{AddPet: s.addPet, PlaceOrder: s.placeOrder, AdoptPet: s.adoptPet}); err != nil {
		return nil, nil, err
	}
	mux.HandleFunc("GET /pet/{petId}", s.getPet)
	mux.HandleFunc("GET /store/order/{orderId}", s.getOrder)
	mux.HandleFunc("GET /adoptions/{adoptionId}", s.getAdoption)
	return withClient(mux), rt, nil
}

// store holds the business handlers. The idempotent ones write only through the transaction
// the runtime gives them, which commits together with the stored response: a crash or an error
// leaves neither the pet nor the record behind, and the client's retry simply runs again.
type store struct {
	pool *pgxpool.Pool
	opts options
}

// order is the Order schema as the store answers it.
type order struct {
	ID       int64      `json:"id"`
	PetID    int64      `json:"petId"`
	Quantity int32      `json:"quantity"`
	ShipDate *time.Time `json:"shipDate,omitempty"`
	Status   string     `json:"status"`
	Complete bool       `json:"complete"`
}

func (s *store) getPet(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("petId"), 10, 64)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "invalid-id", "petId must be an integer")
		return
	}
	var doc []byte
	err = s.pool.QueryRow(r.Context(), `SELECT doc FROM pets WHERE id = $1`, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		writeProblem(w, http.StatusNotFound, "pet-not-found", fmt.Sprintf("no pet %d", id))
		return
	}
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "internal", "the pet could not be read")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

func (s *store) getOrder(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("orderId"), 10, 64)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "invalid-id", "orderId must be an integer")
		return
	}
	o, err := readOrder(r.Context(), s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		writeProblem(w, http.StatusNotFound, "order-not-found", fmt.Sprintf("no order %d", id))
		return
	}
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "internal", "the order could not be read")
		return
	}
	b, _ := json.Marshal(o)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func readOrder(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id int64) (order, error) {
	var o order
	err := q.QueryRow(ctx, `SELECT id, pet_id, quantity, ship_date, status, complete FROM orders WHERE id = $1`, id).
		Scan(&o.ID, &o.PetID, &o.Quantity, &o.ShipDate, &o.Status, &o.Complete)
	return o, err
}

// problemType prefixes the store's own problem types (RFC 9457).
const problemType = "https://idemgen.dev/examples/petstore/problems/"

func problem(status int, name, detail string) runtime.Response {
	b, _ := json.Marshal(map[string]any{"type": problemType + name, "title": http.StatusText(status), "status": status, "detail": detail})
	return runtime.Response{Status: status, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: b}
}

func writeProblem(w http.ResponseWriter, status int, name, detail string) {
	p := problem(status, name, detail)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(p.Body)
}
