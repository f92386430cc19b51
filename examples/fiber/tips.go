package main

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
)

// The tips API (testdata/specs/nulls.yaml), served by fiber handlers behind the same adapter as
// the payments: c.BodyParser reads the body the adapter fingerprinted (application/json and
// application/merge-patch+json alike) into conformance.TipBody, which keeps a null member apart
// from an absent one, so testdata/cases-nulls holds on fiber.

// CreateTip is POST /v1/tips.
func (s *Service) CreateTip(c *fiber.Ctx) error {
	return s.tip(c, func(b conformance.TipBody) (int, any, error) {
		tx, err := db(c)
		if err != nil {
			return 0, nil, err
		}
		tenant, err := tenantOf(c)
		if err != nil {
			return 0, nil, err
		}
		return conformance.CreateTip(c.UserContext(), tx, tenant, b)
	})
}

// UpdateTip is PATCH /v1/tips/:id, a JSON merge patch.
func (s *Service) UpdateTip(c *fiber.Ctx) error {
	return s.tip(c, func(b conformance.TipBody) (int, any, error) {
		tx, err := db(c)
		if err != nil {
			return 0, nil, err
		}
		tenant, err := tenantOf(c)
		if err != nil {
			return 0, nil, err
		}
		return conformance.UpdateTip(c.UserContext(), tx, tenant, c.Params("id"), b)
	})
}

// tip binds the body and writes run's answer.
func (s *Service) tip(c *fiber.Ctx, run func(conformance.TipBody) (int, any, error)) error {
	var b conformance.TipBody
	if err := c.BodyParser(&b); err != nil {
		return &apiError{http.StatusBadRequest, "tip-invalid", "Tip invalid", err.Error()}
	}
	status, doc, err := run(b)
	if err != nil {
		return err
	}
	ct, body := conformance.TipAnswer(status, doc)
	c.Set(fiber.HeaderContentType, ct)
	return c.Status(status).Send(body)
}
