package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/idemgen/idemgen/runtime/reconcile"
	"github.com/idemgen/idemgen/runtime/store"
)

// reconcileReport reconciles the provider's report file with the records: every finding is
// logged (a desynchronisation at Warn), nothing is changed. A scheduled job runs it (with an
// Observer, its counts become the idemgen_reconcile_* metrics that docs/monitoring alerts on);
// an operator then resolves what it found, with `idemgen reconcile --resolve` or with
// resolveConfirmed.
func reconcileReport(ctx context.Context, st store.Reconcilable, file string, obs reconcile.Observer) (*reconcile.Result, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return reconcile.Run(ctx, st, f, reconcile.Options{Observer: obs, Finding: func(fd reconcile.Finding) error {
		level := slog.LevelInfo
		if fd.Class.Desync() {
			level = slog.LevelWarn
		}
		slog.Log(ctx, level, "reconciliation finding", "class", fd.Class, "provider_key", fd.ProviderKey,
			"record", fd.Record, "action", fd.Action, "detail", fd.Detail)
		return nil
	}})
}

// reconcileEvery runs reconcileReport every interval until ctx ends.
func reconcileEvery(ctx context.Context, st store.Reconcilable, file string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := reconcileReport(ctx, st, file, nil)
		if err != nil {
			slog.Error("reconciliation failed", "report", file, "error", err)
			continue
		}
		slog.Info("reconciliation done", "report", file, "lines", res.Lines, "resolvable", len(res.Resolvable),
			"charged_no_record", res.Counts[reconcile.ChargedNoRecord])
	}
}

// resolveConfirmed writes the resolutions an operator confirmed: an uncertain charge that the
// provider made completes with the API's own Charge built from the provider's line, so that a
// late retry replays what the first attempt would have answered; one it did not make is
// released.
func resolveConfirmed(ctx context.Context, st store.Reconcilable, res *reconcile.Result, operator, reason string) ([]reconcile.Resolution, error) {
	return reconcile.Resolve(ctx, st, res.Resolvable, reconcile.ResolveOptions{Operator: operator, Reason: reason, Response: chargeFromReport})
}

// chargeFromReport is the Charge response of a provider's report line (the columns of
// provider.WriteReport).
func chargeFromReport(f reconcile.Finding) (store.Response, error) {
	if f.Line == nil {
		return store.Response{}, fmt.Errorf("no report line for %s", f.ProviderKey)
	}
	var line struct {
		ID, Amount, Currency, Status string
	}
	if err := json.Unmarshal(f.Line.JSON(), &line); err != nil {
		return store.Response{}, err
	}
	amount, err := strconv.ParseInt(line.Amount, 10, 64)
	if err != nil {
		return store.Response{}, fmt.Errorf("report line %d: amount %q", f.Line.Number, line.Amount)
	}
	status := http.StatusCreated
	if line.Status != "succeeded" {
		status = http.StatusPaymentRequired
	}
	resp := chargeResponse(status, providerCharge{ID: line.ID, Amount: amount, Currency: line.Currency, Status: line.Status})
	header, _ := json.Marshal(resp.Header)
	return store.Response{Status: resp.Status, Header: header, Body: resp.Body}, nil
}
