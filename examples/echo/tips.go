package main

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
)

// The tips API (testdata/specs/nulls.yaml), served by echo handlers behind the same adapter as
// the payments: echo's JSON serializer reads the body the adapter fingerprinted, into
// conformance.TipBody, which keeps a null member apart from an absent one, so testdata/cases-nulls
// holds on echo. (c.Bind would refuse PATCH's application/merge-patch+json: echo's binder takes
// application/json only.)

// CreateTip is POST /v1/tips.
func (s *Service) CreateTip(c echo.Context) error {
	return s.tip(c, func(b conformance.TipBody) (int, any, error) {
		tx, err := db(c)
		if err != nil {
			return 0, nil, err
		}
		tenant, err := tenantOf(c)
		if err != nil {
			return 0, nil, err
		}
		return conformance.CreateTip(c.Request().Context(), tx, tenant, b)
	})
}

// UpdateTip is PATCH /v1/tips/:id, a JSON merge patch.
func (s *Service) UpdateTip(c echo.Context) error {
	return s.tip(c, func(b conformance.TipBody) (int, any, error) {
		tx, err := db(c)
		if err != nil {
			return 0, nil, err
		}
		tenant, err := tenantOf(c)
		if err != nil {
			return 0, nil, err
		}
		return conformance.UpdateTip(c.Request().Context(), tx, tenant, c.Param("id"), b)
	})
}

// tip reads the body and writes run's answer.
func (s *Service) tip(c echo.Context, run func(conformance.TipBody) (int, any, error)) error {
	var b conformance.TipBody
	if err := c.Echo().JSONSerializer.Deserialize(c, &b); err != nil {
		return &apiError{http.StatusBadRequest, "tip-invalid", "Tip invalid", err.Error()}
	}
	status, doc, err := run(b)
	if err != nil {
		return err
	}
	conformance.WriteTip(c.Response(), status, doc)
	return nil
}
