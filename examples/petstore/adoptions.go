package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/examples/petstore/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Adoption is the example's long-running operation (docs/runtime.md, "Long-running
// operations"). adoptPet does only what must happen exactly once, in the transaction that
// stores its idempotency record: it reserves the pet, creates the adoption and enqueues its job
// in an outbox table, and answers 202 Accepted with the adoption's status resource in Location.
// The runtime stores that 202 with those rows, so every retry with the key replays the same
// 202 and the same Location, and never enqueues a second job. A worker (worker.go) runs the
// job later; the status resource (getAdoption) shows its progress.

// adoption is the Adoption schema as the store answers it.
type adoption struct {
	ID          int64      `json:"id"`
	PetID       int64      `json:"petId"`
	Adopter     string     `json:"adopter"`
	Status      string     `json:"status"`
	Progress    int32      `json:"progress"`
	Step        string     `json:"step"`
	StatusURL   string     `json:"statusUrl"`
	CreatedAt   time.Time  `json:"createdAt"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
}

// Adoption statuses.
const (
	adoptionQueued   = "queued"
	adoptionRunning  = "running"
	adoptionApproved = "approved"
)

// adoptPet is the business function of the idempotent adoptPet operation.
func (s *store) adoptPet(ctx context.Context, tx pgstore.DBTX, p api.AdoptPetParams, body api.AdoptPetBody) (runtime.Response, error) {
	owner := clientOf(ctx)
	var petStatus *string
	err := tx.QueryRow(ctx, `SELECT status FROM pets WHERE id = $1 FOR UPDATE`, p.PetID).Scan(&petStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return problem(http.StatusNotFound, "pet-not-found", fmt.Sprintf("no pet %d", p.PetID)), nil
	}
	if err != nil {
		return runtime.Response{}, fmt.Errorf("find pet: %w", err)
	}
	if petStatus == nil || *petStatus != "available" {
		// 409 is not a final status (replay.statuses): it is not stored, and a retry with the
		// same key looks at the pet again.
		return problem(http.StatusConflict, "pet-unavailable", fmt.Sprintf("pet %d is not available for adoption", p.PetID)), nil
	}
	if _, err := tx.Exec(ctx, `UPDATE pets SET status = 'pending', doc = jsonb_set(doc, '{status}', '"pending"') WHERE id = $1`, p.PetID); err != nil {
		return runtime.Response{}, fmt.Errorf("reserve pet: %w", err)
	}
	var home *string
	if body.Home != nil {
		h := string(*body.Home)
		home = &h
	}
	var a adoption
	err = tx.QueryRow(ctx, `INSERT INTO adoptions (owner, pet_id, adopter, home, status, progress, step)
VALUES ($1, $2, $3, $4, 'queued', 0, 'waiting for a worker') RETURNING id, created_at`, owner, p.PetID, body.Adopter, home).Scan(&a.ID, &a.CreatedAt)
	if err != nil {
		return runtime.Response{}, fmt.Errorf("create adoption: %w", err)
	}
	// The outbox: the job commits with the adoption and the stored 202, or not at all.
	if _, err := tx.Exec(ctx, `INSERT INTO adoption_jobs (adoption_id) VALUES ($1)`, a.ID); err != nil {
		return runtime.Response{}, fmt.Errorf("enqueue adoption: %w", err)
	}
	a.PetID, a.Adopter, a.Status, a.Step = p.PetID, body.Adopter, adoptionQueued, "waiting for a worker"
	a.StatusURL = adoptionURL(a.ID)
	resp, err := runtime.JSON(http.StatusAccepted, a)
	if err != nil {
		return runtime.Response{}, err
	}
	resp.Header.Set("Location", a.StatusURL)
	return resp, nil
}

func adoptionURL(id int64) string { return "/adoptions/" + strconv.FormatInt(id, 10) }

// maxWait caps a status request's Prefer: wait.
const maxWait = 30 * time.Second

// getAdoption is the status resource: the adoption of the calling client, with its progress.
// With `Prefer: wait=N` (RFC 7240 section 4.3) it waits up to N seconds (at most maxWait) for
// the adoption to finish, so a client can long-poll instead of polling fast.
func (s *store) getAdoption(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("adoptionId"), 10, 64)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "invalid-id", "adoptionId must be an integer")
		return
	}
	owner, err := apiKeyScope(r)
	if err != nil {
		writeProblem(w, http.StatusUnauthorized, "unauthenticated", "send your api_key header")
		return
	}
	ctx := r.Context()
	deadline := time.Now().Add(preferWait(r.Header.Values("Prefer")))
	for {
		a, err := readAdoption(ctx, s.pool, owner, id)
		if errors.Is(err, pgx.ErrNoRows) {
			writeProblem(w, http.StatusNotFound, "adoption-not-found", fmt.Sprintf("no adoption %d", id))
			return
		}
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, "internal", "the adoption could not be read")
			return
		}
		if a.Status == adoptionApproved || !time.Now().Before(deadline) {
			resp, err := runtime.JSON(http.StatusOK, a)
			if err != nil {
				writeProblem(w, http.StatusInternalServerError, "internal", "the adoption could not be encoded")
				return
			}
			if a.Status != adoptionApproved {
				w.Header().Set("Retry-After", "1") // a polling hint: still running
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(resp.Body)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// preferWait reads RFC 7240's wait preference: "wait=N" seconds, capped at maxWait; 0 without it.
func preferWait(values []string) time.Duration {
	for _, v := range values {
		for pref := range strings.SplitSeq(v, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n <= 0 {
				continue
			}
			return min(time.Duration(n)*time.Second, maxWait)
		}
	}
	return 0
}

func readAdoption(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, owner string, id int64) (adoption, error) {
	var a adoption
	err := q.QueryRow(ctx, `SELECT id, pet_id, adopter, status, progress, step, created_at, completed_at
FROM adoptions WHERE id = $1 AND owner = $2`, id, owner).
		Scan(&a.ID, &a.PetID, &a.Adopter, &a.Status, &a.Progress, &a.Step, &a.CreatedAt, &a.CompletedAt)
	a.StatusURL = adoptionURL(a.ID)
	return a, err
}

// clientKey is the context key of the calling client (its api_key), set by withClient.
type clientKey struct{}

// withClient puts the caller's api_key in the request's context, where business functions
// that own rows per client (adoptPet) find it: the generated handlers pass the request's context
// on to them.
func withClient(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k, err := apiKeyScope(r); err == nil {
			r = r.WithContext(context.WithValue(r.Context(), clientKey{}, k))
		}
		next.ServeHTTP(w, r)
	})
}

// clientOf returns the api_key withClient stored ("" outside a request: the runtime refuses a
// request without one before any business function runs).
func clientOf(ctx context.Context) string {
	k, _ := ctx.Value(clientKey{}).(string)
	return k
}
