package conform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/internal/cases"
)

// runCases runs the request-sequence cases of CasesDir with the project's case runner (the
// format of testdata/cases/README.md): each case is one result.
func (r *runner) runCases(ctx context.Context) {
	list, err := cases.LoadDir(r.o.CasesDir)
	if err != nil {
		res := Result{Check: CheckCase, Name: r.o.CasesDir, Status: Fail, Why: fmt.Sprintf("--cases: %v", err)}
		r.progress(&res)
		r.rep.Results = append(r.rep.Results, res)
		return
	}
	// The cases' requests count in the report's total as the checks' do.
	runner := &cases.Runner{BaseURL: r.o.BaseURL, Client: &http.Client{Transport: countingTransport{r.c.http.Transport, &r.c.sent}, Timeout: r.o.RequestTimeout}}
	for _, c := range list {
		res := Result{Check: CheckCase, Name: c.Name, Status: Pass}
		began := time.Now()
		if ctx.Err() != nil {
			res.Status, res.Why = Skip, fmt.Sprintf("the run's --timeout (%v) ended before this case", r.o.Timeout)
		} else if err := runner.Run(ctx, c); err != nil {
			res.Status, res.Why = Fail, err.Error()
			var f *cases.Failure
			if errors.As(err, &f) {
				res.Why = strings.TrimPrefix(err.Error(), "case "+c.Name+" ")
			}
		}
		res.Took = Duration(time.Since(began))
		r.progress(&res)
		r.rep.Results = append(r.rep.Results, res)
	}
}

// countingTransport counts the requests it sends in n.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}
