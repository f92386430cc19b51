package cases

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Runner sends the requests of cases to a service over HTTP.
type Runner struct {
	// BaseURL is the service's URL without a trailing slash ("http://127.0.0.1:8080").
	BaseURL string
	// Client sends the requests; nil uses a client with a 60-second timeout per request.
	Client *http.Client
}

// Failure is a case that did not hold: the step (or the final effects check) and every
// expectation that failed there, with what came back instead.
type Failure struct {
	Case *Case
	// Step is the index of the failing step, or -1 when the effects check failed.
	Step int
	// What names the request ("POST /v1/payments", with the copy count for a parallel step)
	// or the effects query.
	What string
	// Problems lists each failed expectation with what came back.
	Problems []string
	// Got shows the response(s) the expectations were checked against.
	Got string
}

func (f *Failure) Error() string {
	var b strings.Builder
	where, file := "effects", f.Case.File
	if f.Step >= 0 {
		where = fmt.Sprintf("step %d", f.Step)
		file = fmt.Sprintf("%s:%d", file, f.Case.Steps[f.Step].Line)
	}
	fmt.Fprintf(&b, "case %s (%s) failed at %s, %s:", f.Case.Name, file, where, f.What)
	for _, p := range f.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	if f.Got != "" {
		b.WriteString("\n  got: ")
		b.WriteString(strings.ReplaceAll(f.Got, "\n", "\n       "))
	}
	return b.String()
}

// Run runs one case: its steps in order, each parallel step's copies at once, then the effects
// check. The tenants t1, t2, … of the file become names unique to this run (in requests and in
// the effects queries), so a case never sees another case's records, whatever the database
// already holds. It returns a *Failure when an expectation fails, or another error when the
// service could not be reached or a reference could not be resolved.
func (r *Runner) Run(ctx context.Context, c *Case) error {
	tenants, err := newTenants(c.Name)
	if err != nil {
		return err
	}
	results := make([]*Response, len(c.Steps))
	for i := range c.Steps {
		s := &c.Steps[i]
		if s.Wait > 0 {
			select {
			case <-time.After(s.Wait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		req, err := resolveRequest(s.Request, results, tenants)
		if err != nil {
			return &Failure{Case: c, Step: i, What: s.Request.Method + " " + s.Request.Path, Problems: []string{err.Error()}}
		}
		what := req.Method + " " + req.Path
		if s.Parallel == 1 {
			resp, err := r.send(ctx, req)
			if err != nil {
				return &Failure{Case: c, Step: i, What: what, Problems: []string{err.Error()}}
			}
			results[i] = resp
			if probs := checkSingle(&s.Expect, resp, results); len(probs) > 0 {
				return &Failure{Case: c, Step: i, What: what, Problems: probs, Got: showResponse(resp)}
			}
			continue
		}
		what = fmt.Sprintf("%s x%d in parallel", what, s.Parallel)
		resps, err := r.sendParallel(ctx, req, s.Parallel)
		if err != nil {
			return &Failure{Case: c, Step: i, What: what, Problems: []string{err.Error()}}
		}
		if probs := checkParallel(&s.Expect, resps); len(probs) > 0 {
			return &Failure{Case: c, Step: i, What: what, Problems: probs, Got: showResponses(resps)}
		}
	}
	return r.checkEffects(ctx, c, tenants)
}

// tenants maps the tenants of a case file (t1, t2, …) to names unique to one run.
type tenants struct {
	prefix string
}

func newTenants(caseName string) (tenants, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return tenants{}, fmt.Errorf("fresh tenants: %w", err)
	}
	num, _, _ := strings.Cut(caseName, "-")
	return tenants{prefix: "c" + num + "-" + hex.EncodeToString(b[:]) + "-"}, nil
}

func (t tenants) name(fileTenant string) string { return t.prefix + fileTenant }

// bearer matches the file tenants in an Authorization value.
var bearer = regexp.MustCompile(`(?i)\b(Bearer[ \t]+)(t[0-9]+)\b`)

func (t tenants) rewrite(headerValue string) string {
	return bearer.ReplaceAllString(headerValue, "${1}"+t.prefix+"${2}")
}

// outRequest is a request with references and tenants resolved.
type outRequest struct {
	Method, Path string
	Header       []HeaderLine
	Body         []byte
}

func resolveRequest(in Request, results []*Response, t tenants) (*outRequest, error) {
	out := &outRequest{Method: in.Method}
	var err error
	if out.Path, err = substitute(in.Path, results); err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	for _, h := range in.Header {
		v, err := substitute(h.Value, results)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", h.Name, err)
		}
		if strings.EqualFold(h.Name, "Authorization") {
			v = t.rewrite(v)
		}
		out.Header = append(out.Header, HeaderLine{h.Name, v})
	}
	if in.Body != nil {
		b, err := substitute(string(in.Body), results)
		if err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		out.Body = []byte(b)
	}
	return out, nil
}

// substitute replaces each ${N.field} with that field of step N's JSON response body: a string
// as its text, any other value as its JSON text.
func substitute(s string, results []*Response) (string, error) {
	var firstErr error
	out := refPattern.ReplaceAllStringFunc(s, func(ref string) string {
		m := refPattern.FindStringSubmatch(ref)
		n, _ := strconv.Atoi(m[1])
		v, err := lookup(results, n, m[2])
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", ref, err)
		}
		return v
	})
	return out, firstErr
}

func lookup(results []*Response, n int, field string) (string, error) {
	if n >= len(results) || results[n] == nil {
		return "", fmt.Errorf("step %d has no response", n)
	}
	v, err := decodeJSON(results[n].Body)
	if err != nil {
		return "", fmt.Errorf("step %d's body is not JSON: %v", n, err)
	}
	for _, part := range strings.Split(field, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("step %d's body has no %s", n, field)
		}
		if v, ok = obj[part]; !ok {
			return "", fmt.Errorf("step %d's body has no %s", n, field)
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return string(x), nil
	default:
		return showValue(x), nil
	}
}

func (r *Runner) client() *http.Client {
	if r.Client != nil {
		return r.Client
	}
	return &http.Client{Timeout: 60 * time.Second}
}

// send sends one request; every header line of the file becomes its own line on the wire.
func (r *Runner) send(ctx context.Context, in *outRequest) (*Response, error) {
	var body io.Reader
	if in.Body != nil {
		body = bytes.NewReader(in.Body)
	}
	req, err := http.NewRequestWithContext(ctx, in.Method, r.BaseURL+in.Path, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for _, h := range in.Header {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := r.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read response (status %d): %w", resp.StatusCode, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// sendParallel sends n copies of one request released together, and waits for all of them.
func (r *Runner) sendParallel(ctx context.Context, in *outRequest, n int) ([]*Response, error) {
	resps := make([]*Response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resps[i], errs[i] = r.send(ctx, in)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("copy %d: %w", i, err)
		}
	}
	return resps, nil
}

// checkEffects compares the listed counters of GET /_effects for each tenant the case states.
func (r *Runner) checkEffects(ctx context.Context, c *Case, t tenants) error {
	want := map[string]map[string]int64{}
	if c.Effects != nil {
		want["t1"] = c.Effects
	}
	for k, v := range c.EffectsByTenant {
		want[k] = v
	}
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	var probs []string
	var got []string
	for _, tenant := range names {
		counts, raw, err := r.effects(ctx, t.name(tenant))
		if err != nil {
			return &Failure{Case: c, Step: -1, What: "GET /_effects for " + tenant, Problems: []string{err.Error()}}
		}
		got = append(got, tenant+": "+raw)
		keys := make([]string, 0, len(want[tenant]))
		for k := range want[tenant] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			g, ok := counts[k]
			switch {
			case !ok:
				probs = append(probs, fmt.Sprintf("%s.%s: want %d, the service reports no such counter", tenant, k, want[tenant][k]))
			case g != want[tenant][k]:
				probs = append(probs, fmt.Sprintf("%s.%s: want %d, got %d", tenant, k, want[tenant][k], g))
			}
		}
	}
	if len(probs) > 0 {
		return &Failure{Case: c, Step: -1, What: "GET /_effects", Problems: probs, Got: strings.Join(got, "\n")}
	}
	return nil
}

func (r *Runner) effects(ctx context.Context, tenant string) (map[string]int64, string, error) {
	resp, err := r.send(ctx, &outRequest{
		Method: http.MethodGet, Path: "/_effects",
		Header: []HeaderLine{{"Authorization", "Bearer " + tenant}},
	})
	if err != nil {
		return nil, "", err
	}
	if resp.Status != http.StatusOK {
		return nil, "", fmt.Errorf("status %d: %s", resp.Status, quoteBody(resp.Body))
	}
	var counts map[string]int64
	if err := json.Unmarshal(resp.Body, &counts); err != nil {
		return nil, "", fmt.Errorf("want a JSON object of counts: %v in %s", err, quoteBody(resp.Body))
	}
	return counts, string(bytes.TrimSpace(resp.Body)), nil
}

// showResponse renders a response for a failure message: status, headers (sorted) and body.
func showResponse(r *Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", r.Status)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		if k == "Date" || k == "Content-Length" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s: %s", k, strings.Join(r.Header[k], ", "))
	}
	fmt.Fprintf(&b, "\n%s", quoteBody(r.Body))
	return b.String()
}

func showResponses(rs []*Response) string {
	parts := []string{distribution(rs)}
	// One example of each distinct (status, replayed) outcome is enough to see what went wrong.
	seen := map[string]bool{}
	for i, r := range rs {
		k := fmt.Sprint(r.Status, r.Replayed())
		if seen[k] {
			continue
		}
		seen[k] = true
		parts = append(parts, fmt.Sprintf("copy %d: %s", i, showResponse(r)))
	}
	return strings.Join(parts, "\n")
}
