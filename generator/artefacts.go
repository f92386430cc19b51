package generator

import (
	"github.com/idemgen/idemgen/internal/model"
)

// Contract renders the client-facing Markdown contract of doc (templates/contract.md.tmpl).
func Contract(doc *model.Document) ([]byte, error) { return nil, nil }

// SQL renders the idempotency store schema (templates/schema.sql.tmpl around runtime.SchemaSQL).
func SQL() ([]byte, error) { return nil, nil }
