package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// provider is a fake payment provider, shaped like Stripe's charges API where it matters here:
// POST /v1/charges charges a card once per Idempotency-Key (a retry with the same key gets the
// same charge back; the key reused with other parameters is a 400), the card "tok_decline" is
// declined (402, a charge with status failed), the card "tok_slow" is charged at once and
// answered after slowAnswer (time to kill the service by hand in its call phase, README), and
// it exports its own daily report of charges (WriteReport): the file `idemgen reconcile`
// matches against the service's records.
type provider struct {
	mu      sync.Mutex
	byKey   map[string]*providerCharge
	charges []*providerCharge
	// report, when set, is rewritten after every charge (the example's main, without a real
	// provider).
	report string
}

// providerCharge is one charge as the provider keeps it.
type providerCharge struct {
	ID       string    `json:"id"`
	Key      string    `json:"-"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	Source   string    `json:"-"`
	Status   string    `json:"status"`
	Created  time.Time `json:"-"`
}

// slowAnswer is how long the provider takes to answer a charge of the card "tok_slow" (after
// it charged it): within the service's 10 s client timeout.
const slowAnswer = 8 * time.Second

func newProvider() *provider { return &provider{byKey: map[string]*providerCharge{}} }

// ServeHTTP serves POST /v1/charges.
func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	var in struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		Source   string `json:"source"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || key == "" || in.Amount <= 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	c, seen := p.byKey[key]
	switch {
	case !seen:
		c = &providerCharge{ID: fmt.Sprintf("ch_%06d", len(p.charges)+1), Key: key, Amount: in.Amount,
			Currency: strings.ToLower(in.Currency), Source: in.Source, Status: "succeeded", Created: time.Now().UTC()}
		if in.Source == "tok_decline" {
			c.Status = "failed"
		}
		p.byKey[key] = c
		p.charges = append(p.charges, c)
		if p.report != "" {
			if err := p.writeReportFile(p.report); err != nil {
				fmt.Fprintln(os.Stderr, "fake provider: report:", err)
			}
		}
	case c.Amount != in.Amount || c.Currency != strings.ToLower(in.Currency) || (c.Source != "" && c.Source != in.Source):
		p.mu.Unlock()
		http.Error(w, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`, http.StatusBadRequest)
		return
	}
	out := *c
	p.mu.Unlock()
	if out.Source == "tok_slow" {
		select {
		case <-time.After(slowAnswer):
		case <-r.Context().Done():
			return // the caller gave up (or died): the charge stands
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if out.Status == "failed" {
		w.WriteHeader(http.StatusPaymentRequired)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// loadReport reads the charges of an earlier run from the report file, when there is one, so
// that a restarted example's fake provider still knows them (and deduplicates their keys, as
// a real provider does across the service's restarts). The report has no card: a loaded
// charge's key reused with another card is not refused.
func (p *provider) loadReport(file string) error {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for i, row := range rows {
		if i == 0 || len(row) != 6 {
			continue // the header
		}
		amount, err1 := strconv.ParseInt(row[2], 10, 64)
		created, err2 := time.Parse(time.RFC3339Nano, row[5])
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("%s line %d: %w", file, i+1, err)
		}
		c := &providerCharge{ID: row[0], Key: row[1], Amount: amount, Currency: row[3], Status: row[4], Created: created}
		p.byKey[c.Key] = c
		p.charges = append(p.charges, c)
	}
	return nil
}

// charged returns the provider's charges, in the order they were made.
func (p *provider) charged() []providerCharge {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]providerCharge, len(p.charges))
	for i, c := range p.charges {
		out[i] = *c
	}
	return out
}

// WriteReport writes the provider's report: CSV with a header, one line per charge, as a
// provider's export looks (its own charge id first; amounts in minor units; currencies in lower
// case; creation times in RFC 3339).
func (p *provider) WriteReport(w io.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writeReport(w)
}

func (p *provider) writeReport(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "idempotency_key", "amount", "currency", "status", "created"})
	for _, c := range p.charges {
		_ = cw.Write([]string{c.ID, c.Key, strconv.FormatInt(c.Amount, 10), c.Currency, c.Status, c.Created.Format(time.RFC3339Nano)})
	}
	cw.Flush()
	return cw.Error()
}

// writeReportFile replaces file with the report (mu held), through a temporary file so that a
// reader never sees half of it.
func (p *provider) writeReportFile(file string) error {
	var b bytes.Buffer
	if err := p.writeReport(&b); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".report-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// providerClient is the service's side of the provider.
type providerClient struct {
	url  string
	http *http.Client
}

// errDeclined is a charge the provider declined: final, the client is told (402).
var errDeclined = errors.New("the provider declined the card")

// charge charges amount of currency to source under the idempotency key key and returns the
// provider's charge (with errDeclined for a decline).
func (pc *providerClient) charge(ctx context.Context, key string, amount int64, currency, source string) (providerCharge, error) {
	body, _ := json.Marshal(map[string]any{"amount": amount, "currency": currency, "source": source})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.url+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return providerCharge{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := pc.http.Do(req)
	if err != nil {
		return providerCharge{}, fmt.Errorf("provider: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var c providerCharge
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPaymentRequired:
		if err := json.Unmarshal(b, &c); err != nil {
			return providerCharge{}, fmt.Errorf("provider: %w", err)
		}
		if c.Status == "failed" {
			return c, errDeclined
		}
		return c, nil
	}
	return providerCharge{}, fmt.Errorf("provider: %d %s", resp.StatusCode, bytes.TrimSpace(b))
}
