package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// ChargeRequest is a charge sent to the provider.
type ChargeRequest struct {
	Tenant      string `json:"tenant"`
	Key         string `json:"key"` // the client's idempotency key: for the audit only
	ProviderKey string `json:"provider_key"`
	Attempt     string `json:"attempt"`
	Amount      int64  `json:"amount"`
}

// Provider is a fake payment provider served over HTTP by the test process, so that its record
// of calls survives the replicas it kills. Like Stripe, it deduplicates on the idempotency key it
// is given, and refuses that key reused with other parameters (400).
type Provider struct {
	mu      sync.Mutex
	charges map[string]ChargeRequest // by provider key: the first charge
	refs    map[string]string
	calls   []Call
	seq     int
}

// NewProvider returns a provider that has received no call.
func NewProvider() *Provider {
	return &Provider{charges: map[string]ChargeRequest{}, refs: map[string]string{}}
}

// ServeHTTP serves POST /charge.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var c ChargeRequest
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	call := Call{Key: c.Tenant + "/" + c.Key, ProviderKey: c.ProviderKey, Attempt: c.Attempt, Amount: c.Amount}
	first, seen := p.charges[c.ProviderKey]
	switch {
	case !seen:
		p.seq++
		p.charges[c.ProviderKey] = c
		p.refs[c.ProviderKey] = fmt.Sprintf("prv_%d", p.seq)
		call.Outcome = "charged"
	case first.Tenant != c.Tenant || first.Amount != c.Amount:
		call.Outcome = "refused"
		p.calls = append(p.calls, call)
		http.Error(w, "idempotency key reused with different parameters", http.StatusBadRequest)
		return
	default:
		call.Outcome = "deduplicated"
	}
	p.calls = append(p.calls, call)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"reference": p.refs[c.ProviderKey]})
}

// Calls returns every call received so far.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// ProviderClient is the service's side of the provider.
type ProviderClient struct {
	URL  string
	HTTP *http.Client
}

// Charge charges c and returns the provider's reference.
func (pc *ProviderClient) Charge(ctx context.Context, c ChargeRequest) (string, error) {
	body, _ := json.Marshal(c)
	req, err := http.NewRequestWithContext(ctx, "POST", pc.URL+"/charge", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := pc.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("provider: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("provider: %d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var out struct {
		Reference string `json:"reference"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("provider: %w", err)
	}
	return out.Reference, nil
}
