package main

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The tips API (testdata/specs/nulls.yaml), a Huma API of its own on the same ServeMux, behind
// idemhuma over its generated table (golden/nulls): Huma validates and binds the body the
// middleware fingerprinted into input structs whose members keep a null apart from an absent
// one (tipNote, tipAmount: conformance.Opt with the schema Huma validates against), so
// testdata/cases-nulls holds through Huma's own binding. It is an API apart so that the
// payments API's exported spec (openapi.yaml) stays the conformance API.

// tipNote is a nullable, optional string member: absent, null or a value.
type tipNote struct{ conformance.Opt[string] }

// Schema is the member's schema for Huma's validation and spec: a nullable string.
func (tipNote) Schema(huma.Registry) *huma.Schema {
	n := 200
	return &huma.Schema{Type: huma.TypeString, Nullable: true, MaxLength: &n}
}

// tipAmount is an amount member of a merge patch: absent, null or a value.
type tipAmount struct{ conformance.Opt[int64] }

// Schema is the member's schema: a nullable integer of at least 1.
func (tipAmount) Schema(huma.Registry) *huma.Schema {
	one := 1.0
	return &huma.Schema{Type: huma.TypeInteger, Nullable: true, Minimum: &one}
}

type createTipInput struct {
	Body struct {
		Amount int64   `json:"amount" minimum:"1"`
		Note   tipNote `json:"note,omitempty" required:"false"`
	}
}

type updateTipInput struct {
	TipID string `path:"tip_id"`
	Body  struct {
		Amount tipAmount `json:"amount,omitempty" required:"false"`
		Note   tipNote   `json:"note,omitempty" required:"false"`
	} `contentType:"application/merge-patch+json"`
}

type tipOutput struct {
	Status int
	Body   conformance.Tip
}

// newTipsAPI mounts the tips API on mux behind mw (after the service's authentication).
func newTipsAPI(mux *http.ServeMux, mw ...func(huma.Context, func(huma.Context))) huma.API {
	cfg := huma.DefaultConfig("Tips", "1.0.0")
	cfg.OpenAPIPath, cfg.DocsPath, cfg.SchemasPath = "", "", "" // the payments API serves those
	api := humago.New(mux, cfg)
	api.UseMiddleware(append([]func(huma.Context, func(huma.Context)){authenticate(api)}, mw...)...)
	huma.Register(api, huma.Operation{
		OperationID: "createTip", Method: http.MethodPost, Path: "/v1/tips", DefaultStatus: http.StatusCreated,
		Summary: "Leave a tip", Extensions: map[string]any{"x-idempotent": true},
	}, func(ctx context.Context, in *createTipInput) (*tipOutput, error) {
		return tipAnswer(ctx, func(tx pgstore.DBTX, tenant string) (int, any, error) {
			return conformance.CreateTip(ctx, tx, tenant, conformance.TipBody{Amount: conformance.Opt[int64]{Set: true, Value: in.Body.Amount}, Note: in.Body.Note.Opt})
		})
	})
	huma.Register(api, huma.Operation{
		OperationID: "updateTip", Method: http.MethodPatch, Path: "/v1/tips/{tip_id}",
		Summary: "Change a tip", Extensions: map[string]any{"x-idempotent": true},
	}, func(ctx context.Context, in *updateTipInput) (*tipOutput, error) {
		return tipAnswer(ctx, func(tx pgstore.DBTX, tenant string) (int, any, error) {
			return conformance.UpdateTip(ctx, tx, tenant, in.TipID, conformance.TipBody{Amount: in.Body.Amount.Opt, Note: in.Body.Note.Opt})
		})
	})
	return api
}

// tipsMiddleware is idemhuma over the tips API's generated table.
func tipsMiddleware(cfg runtime.Config) (func(huma.Context, func(huma.Context)), error) {
	return idemhuma.New[pgstore.DBTX](cfg, nulls.Routes(), idemhuma.Options{Logger: cfg.Logger})
}

// tipAnswer runs a tips business function in the request's transaction and turns its answer
// into Huma's: the tip, or a refusal in the API's error model.
func tipAnswer(ctx context.Context, run func(tx pgstore.DBTX, tenant string) (int, any, error)) (*tipOutput, error) {
	tx, err := db(ctx)
	if err != nil {
		return nil, err
	}
	tenant, err := tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	status, doc, err := run(tx, tenant)
	if err != nil {
		return nil, err
	}
	if t, ok := doc.(conformance.Tip); ok {
		return &tipOutput{Status: status, Body: t}, nil
	}
	d, _ := doc.(map[string]any)
	title, _ := d["title"].(string)
	detail, _ := d["detail"].(string)
	return nil, problem(status, title, title, detail)
}
