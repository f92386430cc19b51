package conformance

import (
	"context"
	"encoding/json"

	"github.com/idemgen/idemgen/runtime/pgstore"

	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/runtime"
)

// handlers adapts the generated handler types of package api to the service's business
// methods: this file is what a user writes for their own API.
func (s *service) handlers() api.Handlers {
	return api.Handlers{
		CreatePayment: func(ctx context.Context, tx pgstore.DBTX, _ api.CreatePaymentParams, b api.CreatePaymentBody) (runtime.Response, error) {
			return s.createPayment(ctx, tx, paymentInput{Amount: b.Amount, Currency: b.Currency, To: b.To, Description: b.Description})
		},
		CreateRefund: func(ctx context.Context, tx pgstore.DBTX, p api.CreateRefundParams, b api.CreateRefundBody) (runtime.Response, error) {
			return s.createRefund(ctx, tx, refundInput{PaymentID: p.PaymentID, Amount: b.Amount, Reason: b.Reason})
		},
		CreateOrder: func(ctx context.Context, tx pgstore.DBTX, _ api.CreateOrderParams, b api.CreateOrderBody) (runtime.Response, error) {
			return s.createOrder(ctx, tx, orderInput{PayerName: b.Payer.Name, Lines: len(b.Lines)})
		},
		CreateTransfer: func(ctx context.Context, tx pgstore.DBTX, _ api.CreateTransferParams, b api.CreateTransferBody) (runtime.Response, error) {
			return s.createTransfer(ctx, tx, transferInput{Amount: b.Amount, Destination: b.Destination})
		},
		CreateCharge: func(ctx context.Context, tx pgstore.DBTX, _ api.CreateChargeParams, b api.CreateChargeBody) (runtime.Response, error) {
			in := chargeInput{Amount: b.Amount, Currency: b.Currency, Description: b.Description}
			var err error
			if in.Metadata, err = unsettableJSON(b.Metadata); err != nil {
				return runtime.Response{}, err
			}
			if in.Shipping, err = unsettableJSON(b.Shipping); err != nil {
				return runtime.Response{}, err
			}
			if b.Items != nil {
				if in.Items, err = json.Marshal(b.Items); err != nil {
					return runtime.Response{}, err
				}
			}
			return s.createCharge(ctx, tx, in)
		},
		CreateProviderCharge: func(ctx context.Context, lease *runtime.Lease, _ api.CreateProviderChargeParams, b api.CreateProviderChargeBody) (runtime.CompleteFunc[pgstore.DBTX], error) {
			return s.createProviderCharge(ctx, lease, b.Amount)
		},
	}
}
