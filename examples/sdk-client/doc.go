// Package sdkclient shows idemgen in the OpenAPI toolchain: `idemgen spec` writes the petstore
// spec as idemgen enforces it (api/petstore.idempotent.yaml: the key header with its rules,
// Idempotent-Replayed, the problem responses), and oapi-codegen's client generator turns that
// into a typed Go client (client/client.gen.go) whose idempotency key is a typed header
// parameter and whose 409, 422 and 400 answers decode into the RFC 9457 problem schema. The
// test drives the client against the server idemgen generates from the same spec, on a real
// PostgreSQL.
package sdkclient

//go:generate go tool idemgen spec ../../testdata/specs/petstore.yaml --out api/petstore.idempotent.yaml
//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config client.cfg.yaml api/petstore.idempotent.yaml
