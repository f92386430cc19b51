package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"
)

// A restarted fake provider reads its charges back from its report: a key it charged before
// the restart gets the same charge, not a second one, and new charges number on.
func TestProviderRestartKeepsItsCharges(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.csv")
	ctx := context.Background()
	charge := func(p *provider, key string) providerCharge {
		t.Helper()
		srv := httptest.NewServer(p)
		defer srv.Close()
		c, err := (&providerClient{url: srv.URL, http: &http.Client{Timeout: 5 * time.Second}}).charge(ctx, key, 1250, "EUR", "tok_visa")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := newProvider()
	first.report = report
	charge(first, "pk-0")
	before := charge(first, "pk-1")

	again := newProvider()
	if err := again.loadReport(report); err != nil {
		t.Fatal(err)
	}
	again.report = report
	if c := charge(again, "pk-1"); c.ID != before.ID {
		t.Errorf("the same key after a restart: charge %s, want %s", c.ID, before.ID)
	}
	if c := charge(again, "pk-2"); c.ID != "ch_000003" {
		t.Errorf("a new key after a restart: charge %s, want ch_000003", c.ID)
	}
	if got := again.charged(); len(got) != 3 {
		t.Errorf("%d charges, want 3: %+v", len(got), got)
	}
	if err := newProvider().loadReport(filepath.Join(t.TempDir(), "none.csv")); err != nil {
		t.Errorf("no report yet: %v", err)
	}
}
