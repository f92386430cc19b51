package conform

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText writes the readable report: per operation each check's verdict, a failure's
// reason with the smallest exchange that shows it, a skip's reason, then the totals.
func WriteText(w io.Writer, rep *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "idemgen conform: %s against %s (seed %d)\n", rep.Spec, rep.BaseURL, rep.Seed)
	last := "\x00"
	for i := range rep.Results {
		res := &rep.Results[i]
		group := res.Operation
		if res.Check == CheckCase {
			group = "cases"
		}
		if group != last {
			last = group
			if res.Check == CheckCase {
				b.WriteString("\ncases (--cases)\n")
			} else {
				fmt.Fprintf(&b, "\n%s  %s %s\n", res.Operation, res.Method, res.Path)
			}
		}
		name := string(res.Check)
		if res.Check == CheckCase {
			name = res.Name
		}
		fmt.Fprintf(&b, "  %s %s", res.Status, name)
		if res.Why != "" {
			fmt.Fprintf(&b, ": %s", indent(res.Why, "       "))
		}
		b.WriteByte('\n')
		for _, n := range res.Notes {
			if res.Status == Pass {
				fmt.Fprintf(&b, "       (%s)\n", n)
			}
		}
		if res.Status == Fail {
			for _, e := range res.Exchanges {
				writeExchange(&b, e, "       ")
			}
		}
	}
	pass, fail, skip := rep.Counts()
	fmt.Fprintf(&b, "\n%d checks: %d passed, %d failed, %d skipped; %d requests in %v\n", pass+fail+skip, pass, fail, skip, rep.Requests, time.Duration(rep.Took).Round(time.Millisecond))
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, u := range rep.Unchecked {
		if u.Operation == "" {
			fmt.Fprintf(&b, "NOT CHECKED: %s\n", u.Why)
			continue
		}
		fmt.Fprintf(&b, "NOT CHECKED: %s: %s\n", u.Operation, indent(u.Why, "  "))
	}
	if rep.Incomplete() {
		b.WriteString("the run is incomplete: an operation could not be checked at all (exit 2)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func indent(s, pad string) string { return strings.ReplaceAll(s, "\n", "\n"+pad) }

// writeExchange writes one exchange as a client sees it: > request lines, < response lines.
func writeExchange(b *strings.Builder, e *Exchange, pad string) {
	fmt.Fprintf(b, "%s# %s", pad, e.Label)
	if e.Via != "" {
		fmt.Fprintf(b, " (%s)", e.Via)
	}
	b.WriteByte('\n')
	if e.Method != "" {
		fmt.Fprintf(b, "%s> %s %s\n", pad, e.Method, e.Target)
		for _, h := range e.Header {
			fmt.Fprintf(b, "%s> %s: %s\n", pad, h.Name, h.Value)
		}
		if e.Body != "" {
			fmt.Fprintf(b, "%s> %s\n", pad, indent(e.Body, pad+"> "))
		}
	}
	if !e.ok() {
		fmt.Fprintf(b, "%s< (no answer: %s)\n", pad, e.Err)
		return
	}
	fmt.Fprintf(b, "%s< %d\n", pad, e.Status)
	for _, h := range e.RespHeader {
		fmt.Fprintf(b, "%s< %s: %s\n", pad, h.Name, h.Value)
	}
	if e.RespBody != "" {
		fmt.Fprintf(b, "%s< %s\n", pad, indent(e.RespBody, pad+"< "))
	}
}

// jsonVersion is the version of WriteJSON's shape; it changes only when a field changes
// meaning or disappears.
const jsonVersion = 1

// WriteJSON writes the report as one JSON document (docs/conform.md describes it).
func WriteJSON(w io.Writer, rep *Report) error {
	pass, fail, skip := rep.Counts()
	doc := struct {
		Version int `json:"version"`
		*Report
		Passed  int `json:"passed"`
		Failed  int `json:"failed"`
		Skipped int `json:"skipped"`
	}{jsonVersion, rep, pass, fail, skip}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// WriteJUnit writes the report as JUnit XML: a test suite per operation (and one for the
// cases), a test case per check, failures and skips with their reasons; a failure's body
// shows its exchanges.
func WriteJUnit(w io.Writer, rep *Report) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	}
	type skipped struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Time      string   `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Skipped   *skipped `xml:"skipped,omitempty"`
	}
	type suite struct {
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Time     string     `xml:"time,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	type suites struct {
		XMLName xml.Name `xml:"testsuites"`
		Name    string   `xml:"name,attr"`
		Suites  []*suite `xml:"testsuite"`
	}
	out := suites{Name: "idemgen conform " + rep.Spec}
	byName := map[string]*suite{}
	secs := func(d Duration) string { return fmt.Sprintf("%.3f", time.Duration(d).Seconds()) }
	for i := range rep.Results {
		res := &rep.Results[i]
		name, class, test := res.Operation, res.Operation, string(res.Check)
		if res.Check == CheckCase {
			name, class, test = "cases", "cases", res.Name
		}
		s := byName[name]
		if s == nil {
			s = &suite{Name: name}
			byName[name] = s
			out.Suites = append(out.Suites, s)
		}
		tc := testcase{Name: test, Classname: class, Time: secs(res.Took)}
		switch res.Status {
		case Fail:
			var b strings.Builder
			for _, e := range res.Exchanges {
				writeExchange(&b, e, "")
			}
			tc.Failure = &failure{Message: res.Why, Body: b.String()}
			s.Failures++
		case Skip:
			tc.Skipped = &skipped{Message: res.Why}
			s.Skipped++
		}
		s.Tests++
		s.Cases = append(s.Cases, tc)
	}
	for _, u := range rep.Unchecked {
		name := u.Operation
		if name == "" {
			name = "run"
		}
		s := byName[name]
		if s == nil {
			s = &suite{Name: name}
			byName[name] = s
			out.Suites = append(out.Suites, s)
		}
		s.Cases = append(s.Cases, testcase{Name: "checked", Classname: name, Time: "0.000", Failure: &failure{Message: "not checked: " + u.Why}})
		s.Tests++
		s.Failures++
	}
	for _, s := range out.Suites {
		var t time.Duration
		for _, c := range s.Cases {
			var f float64
			fmt.Sscanf(c.Time, "%f", &f)
			t += time.Duration(f * float64(time.Second))
		}
		s.Time = secs(Duration(t))
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
