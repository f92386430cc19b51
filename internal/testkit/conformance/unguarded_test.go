package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
)

// minPoolSize is conformancetest.MinPoolSize (this package's tests cannot import it).
const minPoolSize = 40

// TestCasesCatchAnUnguardedService runs cases against the same business handler mounted
// without idemgen (decode, run in a transaction, answer): the cases must fail, each for the
// reason it exists. A case that passed here would not be testing idempotency at all.
func TestCasesCatchAnUnguardedService(t *testing.T) {
	pool := pgtest.NewPool(t, minPoolSize)
	ctx := context.Background()
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	s := &service{tables: pool, provider: NewProvider()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payments", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Amount       int64
			Currency, To string
		}
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			writeProblem(w, http.StatusBadRequest, "body-invalid", "Bad body", err.Error())
			return
		}
		tx, err := pool.Begin(r.Context())
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, "internal", "Internal", err.Error())
			return
		}
		defer tx.Rollback(context.Background())
		resp, err := s.createPayment(r.Context(), tx, paymentInput{Amount: b.Amount, Currency: b.Currency, To: b.To})
		if err == nil {
			err = tx.Commit(r.Context())
		}
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, "internal", "Internal", err.Error())
			return
		}
		writeResponse(w, resp)
	})
	mux.HandleFunc("GET /_effects", s.effects)
	srv := httptest.NewServer(withKnobs(mux))
	t.Cleanup(srv.Close)
	runner := &cases.Runner{BaseURL: srv.URL, Client: srv.Client()}

	for file, want := range map[string]string{
		"002-retry-replays-stored-response.yaml": "same_as 0: body differs",
		"005-changed-amount-is-rejected.yaml":    "status: want 422, got 201",
		"006-missing-key.yaml":                   "status: want 400, got 201",
		"008-concurrent-duplicates.yaml":         "statuses 201: want 1, got 20",
		"012-final-decline-is-replayed.yaml":     "header Idempotent-Replayed: want \"true\", got absent",
	} {
		t.Run(strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
			c, err := cases.ParseFile(filepath.Join("../../../testdata/cases", file))
			if err != nil {
				t.Fatal(err)
			}
			err = runner.Run(ctx, c)
			if err == nil {
				t.Fatal("the case passed against a service without idempotency")
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("failure %v\ndoes not say %q", err, want)
			}
		})
	}
}
