package conformance

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
)

// Provider is a fake external payment provider living in the process. Like a real provider
// (Stripe's and Adyen's idempotency keys) it deduplicates on the key its caller gives: a second
// charge under a key it has already charged returns the earlier charge and is not a new call.
// It exists so that lease mode can be shown to reach the outside world once per idempotency key.
type Provider struct {
	mu      sync.Mutex
	charges map[string]providerCharge // by idempotency key
	calls   map[string]int64          // charges actually made, by tenant
}

type providerCharge struct {
	tenant    string
	amount    int64
	reference string
}

// NewProvider returns a provider that has made no charges.
func NewProvider() *Provider {
	return &Provider{charges: map[string]providerCharge{}, calls: map[string]int64{}}
}

// Charge charges amount (minor units) for tenant under key and returns the provider's reference.
// A key seen before returns the earlier reference; reusing it for another tenant or amount is
// an error, as a real provider refuses a key reused with different parameters.
func (p *Provider) Charge(ctx context.Context, tenant, key string, amount int64) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("provider: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.charges[key]; ok {
		if c.tenant != tenant || c.amount != amount {
			return "", fmt.Errorf("provider: key reused with different parameters (tenant %q amount %d, first %q %d)", tenant, amount, c.tenant, c.amount)
		}
		return c.reference, nil
	}
	c := providerCharge{tenant: tenant, amount: amount, reference: "prv_" + uuid.NewString()}
	p.charges[key] = c
	p.calls[tenant]++
	return c.reference, nil
}

// Calls returns how many charges the provider really made for tenant.
func (p *Provider) Calls(tenant string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[tenant]
}
