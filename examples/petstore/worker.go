package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// worker runs adoption jobs from the outbox table (adoption_jobs) that adoptPet fills. Several
// workers, in one process or many, may run at once: a job is claimed with FOR UPDATE SKIP
// LOCKED under a lease, and every write of a job checks that the claim is still the worker's
// (attempts is its fencing token), so a worker that stalled past its lease cannot overwrite the
// one that took the job over. Each step is a small transaction of its own: no transaction stays
// open while the job runs.
type worker struct {
	pool *pgxpool.Pool
	// poll is the pause between looks at an empty outbox; step is how long each of the
	// adoption's checks takes (minutes in a real shelter); lease is how long a claimed job is
	// the worker's before another may take it over.
	poll, step, lease time.Duration
	log               *slog.Logger
}

// adoptionSteps returns the checks of an adoption, in order; progress moves by an equal share
// per step and reaches 100 when the last is done.
func adoptionSteps() []string {
	return []string{"checking references", "home visit", "signing the papers"}
}

// run processes jobs until ctx ends, then returns ctx.Err().
func (w *worker) run(ctx context.Context) error {
	for {
		did, err := w.runOne(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("adoption job failed; it is retried when its lease ends", "error", err)
		}
		if did && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(w.poll):
		}
	}
}

// runOne claims the oldest runnable job and runs it to the end; did is false when there was
// none.
func (w *worker) runOne(ctx context.Context) (did bool, err error) {
	var job, adoptionID int64
	var token int32
	err = w.pool.QueryRow(ctx, `UPDATE adoption_jobs SET attempts = attempts + 1,
	locked_until = now() + $1::bigint * interval '1 millisecond'
WHERE id = (SELECT id FROM adoption_jobs
	WHERE done_at IS NULL AND (locked_until IS NULL OR locked_until <= now())
	ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, adoption_id, attempts`, w.lease.Milliseconds()).Scan(&job, &adoptionID, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim a job: %w", err)
	}
	steps := adoptionSteps()
	for i, step := range steps {
		progress := i * 100 / len(steps)
		ct, err := w.pool.Exec(ctx, `UPDATE adoptions SET status = 'running', progress = $2, step = $3
WHERE id = $1 AND EXISTS (SELECT 1 FROM adoption_jobs j WHERE j.id = $4 AND j.attempts = $5 AND j.done_at IS NULL)`,
			adoptionID, progress, step, job, token)
		if err != nil {
			return true, fmt.Errorf("adoption %d, %s: %w", adoptionID, step, err)
		}
		if ct.RowsAffected() == 0 {
			return true, fmt.Errorf("adoption %d: job %d was taken over", adoptionID, job)
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(w.step):
		}
	}
	// The end, in one transaction: the adoption approved, the pet sold, the job done.
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		ct, err := tx.Exec(ctx, `UPDATE adoption_jobs SET done_at = now(), locked_until = NULL
WHERE id = $1 AND attempts = $2 AND done_at IS NULL`, job, token)
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			return fmt.Errorf("job %d was taken over", job)
		}
		var pet int64
		if err := tx.QueryRow(ctx, `UPDATE adoptions SET status = 'approved', progress = 100, step = 'done',
	completed_at = now() WHERE id = $1 RETURNING pet_id`, adoptionID).Scan(&pet); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE pets SET status = 'sold', doc = jsonb_set(doc, '{status}', '"sold"') WHERE id = $1`, pet)
		return err
	})
	if err != nil {
		return true, fmt.Errorf("adoption %d, finishing: %w", adoptionID, err)
	}
	return true, nil
}
