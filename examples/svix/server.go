package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/svix/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

const schema = `CREATE TABLE IF NOT EXISTS applications (
	id text PRIMARY KEY, tenant text NOT NULL, name text NOT NULL, uid text,
	created timestamptz NOT NULL DEFAULT now())`

// Migrate creates the idempotency table and the applications table (both idempotent).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, schema)
	return err
}

// Options adjust the server for tests.
type Options struct {
	// Delay makes every handler that slow after its write.
	Delay time.Duration
	// Limits are the store's per-scope limits (a cap on new keys answers 429).
	Limits pgstore.Limits
}

// NewHandler serves the marked operation: the scope is the bearer token's owner, as Svix's
// API keys name an organisation.
func NewHandler(pool *pgxpool.Pool, opts Options) (http.Handler, error) {
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{Limits: opts.Limits}), Scope: bearer})
	if err != nil {
		return nil, err
	}
	s := &server{opts: opts}
	mux := http.NewServeMux()
	if err := api.Register(mux, rt, api.Handlers{V1ApplicationCreate: s.createApplication}); err != nil {
		return nil, err
	}
	return mux, nil
}

type server struct{ opts Options }

func bearer(r *http.Request) (string, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return "", errors.New("no bearer token")
	}
	return tok, nil
}

// createApplication writes the application and answers Svix's ApplicationOut.
func (s *server) createApplication(ctx context.Context, tx pgstore.DBTX, _ api.V1ApplicationCreateParams, in api.V1ApplicationCreateBody) (runtime.Response, error) {
	id := "app_" + rand.Text()
	var created time.Time
	if err := tx.QueryRow(ctx, `INSERT INTO applications (id, tenant, name, uid) VALUES ($1, '', $2, $3) RETURNING created`, id, in.Name, in.UID).Scan(&created); err != nil {
		return runtime.Response{}, fmt.Errorf("insert application: %w", err)
	}
	if s.opts.Delay > 0 {
		select {
		case <-time.After(s.opts.Delay):
		case <-ctx.Done():
			return runtime.Response{}, ctx.Err()
		}
	}
	metadata := in.Metadata
	if metadata == nil {
		metadata = map[string]string{}
	}
	return runtime.JSON(http.StatusCreated, map[string]any{
		"id": id, "name": in.Name, "uid": in.UID, "metadata": metadata,
		"createdAt": created.UTC().Format(time.RFC3339Nano), "updatedAt": created.UTC().Format(time.RFC3339Nano),
	})
}

// pgstoreLimits caps the records one tenant completes per hour.
func pgstoreLimits(records int64) pgstore.Limits {
	return pgstore.Limits{Records: records, RecordsInterval: time.Hour}
}
