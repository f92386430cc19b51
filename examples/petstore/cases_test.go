package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/cases"
)

// casesHandler adapts the petstore to the request-sequence case format (testdata/cases/README.md
// here): the format's tenant (Authorization: Bearer <tenant>) becomes the petstore's api_key,
// and GET /_effects counts the tenant's adoption rows.
func casesHandler(pool *pgxpool.Pool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok {
			r.Header.Set("api_key", tenant)
			r.Header.Del("Authorization")
		}
		if r.URL.Path != "/_effects" {
			h.ServeHTTP(w, r)
			return
		}
		var a, approved, jobs, done int64
		err := pool.QueryRow(r.Context(), `SELECT
	(SELECT count(*) FROM adoptions WHERE owner = $1),
	(SELECT count(*) FROM adoptions WHERE owner = $1 AND status = 'approved'),
	(SELECT count(*) FROM adoption_jobs j JOIN adoptions a ON a.id = j.adoption_id WHERE a.owner = $1),
	(SELECT count(*) FROM adoption_jobs j JOIN adoptions a ON a.id = j.adoption_id WHERE a.owner = $1 AND j.done_at IS NOT NULL)`,
			tenant).Scan(&a, &approved, &jobs, &done)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int64{
			"adoptions": a, "adoptions_approved": approved, "adoption_jobs": jobs, "adoption_jobs_done": done,
		})
	})
}

// startWorker runs the adoption worker until the test ends.
func startWorker(t *testing.T, pool *pgxpool.Pool, opts options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		newWorker(pool, opts).run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// TestCases runs the petstore's request-sequence cases (testdata/cases) against the petstore
// with its adoption worker running.
func TestCases(t *testing.T) {
	list, err := cases.LoadDir("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("no cases in testdata/cases")
	}
	opts := options{adoptionStep: 30 * time.Millisecond, jobPoll: 20 * time.Millisecond}
	srv, pool := petstore(t, opts)
	startWorker(t, pool, opts)
	adapted := httptest.NewServer(casesHandler(pool, srv.Config.Handler))
	t.Cleanup(adapted.Close)
	runner := &cases.Runner{BaseURL: adapted.URL, Client: adapted.Client()}
	for _, c := range list {
		t.Run(c.Name, func(t *testing.T) {
			if err := runner.Run(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
