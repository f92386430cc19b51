// Command peer serves the replay variant of bench/ab with the best Go peer, idemlease v1.1.0
// (github.com/repenguin22/idemlease, MIT), configured as its README documents for production on
// PostgreSQL: the net/http middleware httpidem over the pgstore store on database/sql with the
// pgx driver, Require(true), keys scoped by the caller (KeyScope: the bearer tenant, as idemgen's
// harness scopes them). bench/ab/run.sh -peer builds it and drives it side by side with
// idemgen's benchserver, as the old side of an A/B run.
//
// It serves, on the route of benchserver's "A/B ClaimWithStatement" variants:
//
//	/ab/withstatement/v1/payments  POST: createPayment behind httpidem: the handler decodes the
//	                               payment, inserts it in a transaction of its own (BEGIN,
//	                               INSERT, COMMIT: the business code of bench/internal/baseline)
//	                               and answers 201 with the same JSON body; a retried key is
//	                               replayed from the store without running it
//	/_bench/roundtrips             POST: database statements since the last call (and reset)
//	/_bench/postmaster             GET: the PostgreSQL postmaster's process id
//	/_bench/wal                    GET: the server's current WAL position in bytes
//	/debug/pprof/                  net/http/pprof
//
// The probes are benchserver's, so that bench/cmd/benchdrive measures both servers alike. It
// connects with DATABASE_URL, creates pgstore's table and the payments table, and listens on
// -addr until killed. It is a module of its own, outside the repository's CI: its dependencies
// are the peer's, which no part of idemgen needs (bench/README.md, "The peer").
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/repenguin22/idemlease/httpidem"
	"github.com/repenguin22/idemlease/pgstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	conns := flag.Int("conns", 64, "database pool size (database/sql's open and idle connections)")
	flag.Parse()
	if err := run(*addr, *conns); err != nil {
		log.Fatalf("peer: %v", err)
	}
}

// payments is the conformance service's business table (internal/testkit/conformance), which
// bench/internal/baseline's handlers write to.
const payments = `
CREATE TABLE IF NOT EXISTS payments (
	id          text PRIMARY KEY,
	tenant      text NOT NULL,
	amount      bigint NOT NULL,
	currency    text NOT NULL,
	to_account  text NOT NULL,
	description text,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS payments_tenant ON payments (tenant)`

func run(addr string, conns int) error {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	var rt counter
	cfg.Tracer = &rt
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	// database/sql keeps 2 idle connections by default: at c=8 and more it would open and close
	// connections all the time, which no deployment does; benchserver's pgxpool keeps conns.
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	for _, q := range []string{pgstore.Schema(pgstore.DefaultTable), payments} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	idempotency := httpidem.New(pgstore.New(db),
		httpidem.Require(true),
		httpidem.KeyScope(func(r *http.Request) string { t, _ := tenant(r); return t }),
	)
	mux := http.NewServeMux()
	mux.Handle("POST /ab/withstatement/v1/payments", idempotency(createPayment(db)))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /_bench/postmaster", func(w http.ResponseWriter, r *http.Request) {
		var backend int
		if err := db.QueryRowContext(r.Context(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		ppid, err := parent(backend)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, ppid)
	})
	mux.HandleFunc("GET /_bench/wal", func(w http.ResponseWriter, r *http.Request) {
		var lsn int64
		if err := db.QueryRowContext(r.Context(), "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint").Scan(&lsn); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, lsn)
	})
	mux.HandleFunc("POST /_bench/roundtrips", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{"RoundTrips": rt.n.Swap(0)})
	})
	log.Printf("listening on %s", addr)
	return http.ListenAndServe(addr, mux)
}

type paymentRequest struct {
	Amount      int64   `json:"amount"`
	Currency    string  `json:"currency"`
	To          string  `json:"to"`
	Description *string `json:"description,omitempty"`
}

type payment struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	To       string `json:"to"`
	Status   string `json:"status"`
}

// createPayment is bench/internal/baseline's business code on database/sql: the same ID,
// INSERT and response body. A replay never reaches it.
func createPayment(db *sql.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, ok := tenant(r)
		if !ok {
			http.Error(w, "no bearer tenant", http.StatusUnauthorized)
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		var req paymentRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		var id [12]byte
		_, _ = rand.Read(id[:])
		p := payment{ID: "pay_" + hex.EncodeToString(id[:]), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}
		tx, err := db.BeginTx(r.Context(), nil)
		if err != nil {
			http.Error(w, "store error", http.StatusInternalServerError)
			return
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO payments (id, tenant, amount, currency, to_account, description) VALUES ($1, $2, $3, $4, $5, $6)`,
			p.ID, t, p.Amount, p.Currency, p.To, req.Description); err != nil {
			http.Error(w, "store error", http.StatusInternalServerError)
			return
		}
		if err := tx.Commit(); err != nil {
			http.Error(w, "store error", http.StatusInternalServerError)
			return
		}
		body, _ := json.Marshal(p)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
}

func tenant(r *http.Request) (string, bool) {
	t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return t, ok && t != ""
}

// counter counts the statements pgx sends (benchserver's round-trip counter).
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// parent is the parent process id of pid (/proc/PID/stat's fourth field).
func parent(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (second field) is in parentheses and may hold spaces: fields start after
	// its closing one.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return strconv.Atoi(f[1])
}
