package main

import (
	"encoding/json"

	"github.com/idemgen/idemgen/examples/acp/checkout"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// Checkout session statuses (agentic-checkout RFC section 4.1).
const (
	statusNotReady  = "not_ready_for_payment"
	statusReady     = "ready_for_payment"
	statusCompleted = "completed"
	statusCanceled  = "canceled"
)

// session is a checkout session as the API answers with it and the merchant stores it
// (CheckoutSession in ACP's document): amounts are integers in minor units.
type session struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Currency string `json:"currency"`
	// Buyer is absent until one is given, and null once an update cleared it (section 6.2:
	// null means "clear this field"), so a client reads back what it asked for.
	Buyer              json.RawMessage   `json:"buyer,omitempty"`
	LineItems          []lineItem        `json:"line_items"`
	FulfillmentDetails json.RawMessage   `json:"fulfillment_details,omitempty"`
	FulfillmentOptions []json.RawMessage `json:"fulfillment_options"`
	Totals             []total           `json:"totals"`
	Messages           []json.RawMessage `json:"messages"`
	Links              []json.RawMessage `json:"links"`
	Capabilities       json.RawMessage   `json:"capabilities"`
	Order              *order            `json:"order,omitempty"`
	CreatedAt          string            `json:"created_at,omitempty"`
	UpdatedAt          string            `json:"updated_at,omitempty"`
}

type lineItem struct {
	ID         string `json:"id"`
	Item       item   `json:"item"`
	Quantity   int64  `json:"quantity"`
	Name       string `json:"name,omitempty"`
	UnitAmount int64  `json:"unit_amount"`
}

type item struct {
	ID         string `json:"id"`
	Name       string `json:"name,omitempty"`
	UnitAmount int64  `json:"unit_amount"`
}

type total struct {
	Type        string `json:"type"`
	DisplayText string `json:"display_text"`
	Amount      int64  `json:"amount"`
}

type order struct {
	ID                string `json:"id"`
	CheckoutSessionID string `json:"checkout_session_id"`
	PermalinkURL      string `json:"permalink_url"`
}

// buyer is the stored buyer: the members the merchant keeps.
type buyer struct {
	FirstName   *string `json:"first_name,omitempty"`
	LastName    *string `json:"last_name,omitempty"`
	Email       string  `json:"email"`
	PhoneNumber *string `json:"phone_number,omitempty"`
}

// defaultUnitAmount is the price of an item the catalogue of this example does not price.
const defaultUnitAmount = 1000

// setItems replaces the line items, one unit of each item.
func (s *session) setItems(items []checkout.Item) {
	s.LineItems = make([]lineItem, 0, len(items))
	for i, it := range items {
		li := lineItem{ID: "li_" + string(rune('a'+i%26)) + it.ID, Item: item{ID: it.ID, UnitAmount: defaultUnitAmount}, Quantity: 1}
		if it.Name != nil {
			li.Item.Name, li.Name = *it.Name, *it.Name
		}
		if it.UnitAmount != nil {
			li.Item.UnitAmount = *it.UnitAmount
		}
		li.UnitAmount = li.Item.UnitAmount
		s.LineItems = append(s.LineItems, li)
	}
}

// patchBuyer applies the buyer member of a request (section 6.2): absent leaves the buyer,
// null clears it, an object sets the members it sends and clears those it sends as null.
func (s *session) patchBuyer(p *canonical.Nullable[checkout.Buyer]) {
	switch {
	case p == nil:
		return
	case p.Null:
		s.Buyer = json.RawMessage("null")
		return
	}
	var b buyer
	if len(s.Buyer) > 0 && string(s.Buyer) != "null" {
		_ = json.Unmarshal(s.Buyer, &b)
	}
	b.Email = p.Value.Email
	patchString(&b.FirstName, p.Value.FirstName)
	patchString(&b.LastName, p.Value.LastName)
	patchString(&b.PhoneNumber, p.Value.PhoneNumber)
	s.Buyer, _ = json.Marshal(b)
}

// patchFulfillment applies the fulfillment_details member: absent leaves them, null clears
// them, an object replaces the name, phone and email it sends.
func (s *session) patchFulfillment(p *canonical.Nullable[checkout.FulfillmentDetailsPatch]) {
	switch {
	case p == nil:
		return
	case p.Null:
		s.FulfillmentDetails = json.RawMessage("null")
		return
	}
	var f struct {
		Name        *string `json:"name,omitempty"`
		PhoneNumber *string `json:"phone_number,omitempty"`
		Email       *string `json:"email,omitempty"`
	}
	if len(s.FulfillmentDetails) > 0 && string(s.FulfillmentDetails) != "null" {
		_ = json.Unmarshal(s.FulfillmentDetails, &f)
	}
	patchString(&f.Name, p.Value.Name)
	patchString(&f.PhoneNumber, p.Value.PhoneNumber)
	patchString(&f.Email, p.Value.Email)
	s.FulfillmentDetails, _ = json.Marshal(f)
}

// patchString applies one three-state member to a stored optional string.
func patchString(dst **string, p *canonical.Nullable[string]) {
	switch {
	case p == nil:
	case p.Null:
		*dst = nil
	default:
		v := p.Value
		*dst = &v
	}
}

// refresh recomputes the totals and the status from the items and the buyer.
func (s *session) refresh() {
	var sub int64
	for _, li := range s.LineItems {
		sub += li.UnitAmount * li.Quantity
	}
	s.Totals = []total{
		{Type: "subtotal", DisplayText: "Subtotal", Amount: sub},
		{Type: "total", DisplayText: "Total", Amount: sub},
	}
	if s.Status == statusCompleted || s.Status == statusCanceled {
		return
	}
	s.Status = statusNotReady
	if len(s.LineItems) > 0 && len(s.Buyer) > 0 && string(s.Buyer) != "null" {
		s.Status = statusReady
	}
}

// total is the session's total amount.
func (s *session) total() int64 {
	for _, t := range s.Totals {
		if t.Type == "total" {
			return t.Amount
		}
	}
	return 0
}
