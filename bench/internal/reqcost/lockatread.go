//go:build !reqcost_old

package reqcost

import (
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/bench/internal/baseline"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Options are the scenarios of an opt-in configuration, counted by benchcount (and so by
// bench/ab) but not guarded: the Middleware on ClaimWithStatement{LockAtRead: true}.
var Options = []Scenario{{MiddlewareLockAtRead, Replay}, {MiddlewareLockAtRead, Mismatch}, {MiddlewareLockAtRead, NewKey}}

// middlewareLockAtRead is the handler of the MiddlewareLockAtRead path. bench/ab/counts.sh builds
// this harness into older revisions, some without ClaimWithStatement.LockAtRead or
// baseline.MiddlewareWith: there it builds with the tag reqcost_old (lockatread_old.go).
func middlewareLockAtRead(pool *pgxpool.Pool) (http.Handler, error) {
	return baseline.MiddlewareWith(pool, pgstore.ClaimWithStatement{LockAtRead: true})
}
