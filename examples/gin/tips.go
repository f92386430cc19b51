package main

import (
	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
)

// The tips API (testdata/specs/nulls.yaml), served by gin handlers behind the same adapter as
// the payments: c.ShouldBindJSON reads the body the adapter fingerprinted into
// conformance.TipBody, which keeps a null member apart from an absent one, so
// testdata/cases-nulls holds on gin.

// CreateTip is POST /v1/tips.
func (s *Service) CreateTip(c *gin.Context) {
	s.tip(c, func(b conformance.TipBody) (int, any, error) {
		tx, err := db(c)
		if err != nil {
			return 0, nil, err
		}
		tenant, err := tenantOf(c)
		if err != nil {
			return 0, nil, err
		}
		return conformance.CreateTip(c.Request.Context(), tx, tenant, b)
	})
}

// UpdateTip is PATCH /v1/tips/:id, a JSON merge patch.
func (s *Service) UpdateTip(c *gin.Context) {
	s.tip(c, func(b conformance.TipBody) (int, any, error) {
		tx, err := db(c)
		if err != nil {
			return 0, nil, err
		}
		tenant, err := tenantOf(c)
		if err != nil {
			return 0, nil, err
		}
		return conformance.UpdateTip(c.Request.Context(), tx, tenant, c.Param("id"), b)
	})
}

// tip binds the body and writes run's answer; an error is recorded for renderErrors.
func (s *Service) tip(c *gin.Context, run func(conformance.TipBody) (int, any, error)) {
	var b conformance.TipBody
	if !bind(c, &b, c.ShouldBindJSON) {
		return
	}
	status, doc, err := run(b)
	if err != nil {
		_ = c.Error(err)
		c.Abort()
		return
	}
	conformance.WriteTip(c.Writer, status, doc)
}
