//go:build reqcost_old

package reqcost

import (
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Options: none in a revision without ClaimWithStatement.LockAtRead.
var Options []Scenario

// middlewareLockAtRead: a revision older than ClaimWithStatement.LockAtRead has no such path
// (nil: the rig serves nothing there).
func middlewareLockAtRead(*pgxpool.Pool) (http.Handler, error) { return nil, nil }
