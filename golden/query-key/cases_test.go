package querykey

// Hand-written tests of a query-carried key (AIP-155's requestId): the request-sequence cases of
// testdata/cases run against the generated package served on PostgreSQL, once through the
// generated handlers (Register) and once through runtime.Middleware in front of a plain
// net/http handler (Routes), so that both ways in read, check and key the request the same way.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

const schema = `
CREATE TABLE hubs (tenant text NOT NULL, project text NOT NULL, hub text NOT NULL, description text NOT NULL);
CREATE TABLE hub_updates (tenant text NOT NULL, hub text NOT NULL, mask text NOT NULL, description text NOT NULL);
CREATE TABLE hub_deletes (tenant text NOT NULL, hub text NOT NULL);`

type tenantKey struct{}

// bearer is the cases' scope: Authorization: Bearer <tenant>.
func bearer(r *http.Request) (string, error) {
	t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || t == "" {
		return "", fmt.Errorf("no bearer token")
	}
	return t, nil
}

// withTenant puts the request's tenant in its context for the business functions, and answers
// GET /_effects with the tenant's counts.
func withTenant(pool *pgxpool.Pool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, _ := bearer(r)
		if r.URL.Path == "/_effects" {
			var hubs, updates, deletes int64
			err := pool.QueryRow(r.Context(), `SELECT
	(SELECT count(*) FROM hubs WHERE tenant = $1),
	(SELECT count(*) FROM hub_updates WHERE tenant = $1),
	(SELECT count(*) FROM hub_deletes WHERE tenant = $1)`, tenant).Scan(&hubs, &updates, &deletes)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]int64{"hubs": hubs, "updates": updates, "deletes": deletes})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

// The business functions, shared by both ways in.

func createHub(ctx context.Context, tx pgstore.DBTX, project, hub, description string) (runtime.Response, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO hubs VALUES ($1, $2, $3, $4)`, ctx.Value(tenantKey{}), project, hub, description); err != nil {
		return runtime.Response{}, err
	}
	return runtime.JSON(http.StatusCreated, map[string]string{"name": "projects/" + project + "/hubs/" + hub, "hub": hub})
}

func updateHub(ctx context.Context, tx pgstore.DBTX, hub, mask, description string) (runtime.Response, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO hub_updates VALUES ($1, $2, $3, $4)`, ctx.Value(tenantKey{}), hub, mask, description); err != nil {
		return runtime.Response{}, err
	}
	return runtime.JSON(http.StatusOK, map[string]string{"hub": hub, "updated": mask})
}

func deleteHub(ctx context.Context, tx pgstore.DBTX, hub string) (runtime.Response, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO hub_deletes VALUES ($1, $2)`, ctx.Value(tenantKey{}), hub); err != nil {
		return runtime.Response{}, err
	}
	return runtime.JSON(http.StatusOK, map[string]string{"deleted": hub})
}

// generated serves the operations through the generated handlers.
func generated(t *testing.T, rt *runtime.Runtime) http.Handler {
	mux := http.NewServeMux()
	err := Register(mux, rt, Handlers{
		CreateHub: func(ctx context.Context, tx DBTX, p CreateHubParams, b CreateHubBody) (runtime.Response, error) {
			return createHub(ctx, tx, p.Project, p.HubID, b.Description)
		},
		UpdateHub: func(ctx context.Context, tx DBTX, p UpdateHubParams, b UpdateHubBody) (runtime.Response, error) {
			mask := ""
			if p.UpdateMask != nil {
				mask = *p.UpdateMask
			}
			return updateHub(ctx, tx, p.Hub, mask, b.Description)
		},
		DeleteHub: func(ctx context.Context, tx DBTX, p DeleteHubParams) (runtime.Response, error) {
			return deleteHub(ctx, tx, p.Hub)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mux
}

// behindMiddleware serves the operations with plain handlers that read the request themselves
// (query, body) and write through the transaction of their context, behind runtime.Middleware.
func behindMiddleware(t *testing.T, rt *runtime.Runtime) http.Handler {
	mw, err := runtime.Middleware[pgstore.DBTX](rt, Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(w http.ResponseWriter, resp runtime.Response, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.Status)
		w.Write(resp.Body)
	}
	body := func(r *http.Request) (description string) {
		var b struct{ Description string }
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &b)
		return b.Description
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/projects/{project}/hubs", func(w http.ResponseWriter, r *http.Request) {
		tx, _ := runtime.TxFrom[pgstore.DBTX](r.Context())
		if r.URL.Query().Get("requestId") == "" {
			// The wrapped handler sees the key parameter, as it would see a key header.
			http.Error(w, "the key parameter was not handed on", http.StatusInternalServerError)
			return
		}
		resp, err := createHub(r.Context(), tx, r.PathValue("project"), r.URL.Query().Get("hubId"), body(r))
		answer(w, resp, err)
	})
	mux.HandleFunc("PATCH /v1/projects/{project}/hubs/{hub}", func(w http.ResponseWriter, r *http.Request) {
		tx, _ := runtime.TxFrom[pgstore.DBTX](r.Context())
		resp, err := updateHub(r.Context(), tx, r.PathValue("hub"), r.URL.Query().Get("updateMask"), body(r))
		answer(w, resp, err)
	})
	mux.HandleFunc("DELETE /v1/projects/{project}/hubs/{hub}", func(w http.ResponseWriter, r *http.Request) {
		tx, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
		if !ok {
			// A request without its optional key runs unguarded: no transaction of the runtime.
			resp, err := runtime.JSON(http.StatusOK, map[string]string{"deleted": r.PathValue("hub")})
			if err == nil {
				_, err = poolOf(r.Context()).Exec(r.Context(), `INSERT INTO hub_deletes VALUES ($1, $2)`, r.Context().Value(tenantKey{}), r.PathValue("hub"))
			}
			answer(w, resp, err)
			return
		}
		resp, err := deleteHub(r.Context(), tx, r.PathValue("hub"))
		answer(w, resp, err)
	})
	return mw(mux)
}

type poolKey struct{}

func poolOf(ctx context.Context) *pgxpool.Pool { return ctx.Value(poolKey{}).(*pgxpool.Pool) }

// TestQueryKeyCases runs the cases through both ways in, each on a fresh database.
func TestQueryKeyCases(t *testing.T) {
	list, err := cases.LoadDir("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	for _, way := range []struct {
		name  string
		serve func(*testing.T, *runtime.Runtime) http.Handler
	}{{"generated", generated}, {"middleware", behindMiddleware}} {
		t.Run(way.name, func(t *testing.T) {
			pool := pgtest.NewPool(t, 12)
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
			h := withTenant(pool, way.serve(t, rt))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), poolKey{}, pool)))
			}))
			t.Cleanup(srv.Close)
			runner := &cases.Runner{BaseURL: srv.URL, Client: srv.Client()}
			for _, c := range list {
				t.Run(c.Name, func(t *testing.T) {
					if err := runner.Run(ctx, c); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}

// TestQueryKeyConform: `idemgen conform` judges the generated service by its spec and finds it
// keeping the contract, the key checks included: it sends the key in the query (a missing key,
// malformed keys, two values), not in a header.
func TestQueryKeyConform(t *testing.T) {
	pool := pgtest.NewPool(t, 12)
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
	h := withTenant(pool, generated(t, rt))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	res, err := spec.Load(ctx, spec.Options{Path: "../../testdata/specs/query-key.yaml", ConfigPath: "../../testdata/specs/query-key.config.yaml"})
	if err != nil || res.Diags.HasErrors() {
		t.Fatalf("load: %v %v", err, res.Diags.Err())
	}
	rep, err := conform.Run(ctx, res.Doc, conform.Options{
		BaseURL:      srv.URL,
		Header:       http.Header{"Authorization": {"Bearer conform-1"}},
		TenantHeader: http.Header{"Authorization": {"Bearer conform-2"}},
		Params:       map[string]string{"project": "p1", "hub": "h1", "hubId": "hub-c"},
		Seed:         40,
	})
	if err != nil {
		t.Fatal(err)
	}
	passed := map[string]bool{}
	for _, r := range rep.Results {
		if r.Status == conform.Fail {
			t.Errorf("%s %s: %s", r.Operation, r.Check, r.Why)
		}
		if r.Status == conform.Pass {
			passed[r.Operation+" "+string(r.Check)] = true
		}
	}
	for _, want := range []string{"createHub key-missing", "createHub key-malformed", "createHub replay", "createHub mismatch",
		"deleteHub key-malformed", "updateHub key-malformed", "createHub tenant-isolation"} {
		if !passed[want] {
			t.Errorf("%s did not pass", want)
		}
	}
}
