package conform

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteHTML writes the report as one self-contained HTML page: the totals, each operation's
// checks with their verdicts, a failure's exchanges, and each faulted check's history: every
// key drawn as a timeline (one bar per attempt, from call to return, coloured by what the
// answer meant), with porcupine's interactive drawing below it when the run kept it
// (Options.Visualize).
func WriteHTML(w io.Writer, rep *Report) error {
	pass, fail, skip := rep.Counts()
	type group struct {
		Title   string
		Results []*Result
	}
	var groups []*group
	for i := range rep.Results {
		res := &rep.Results[i]
		title := res.Operation + " — " + res.Method + " " + res.Path
		if res.Check == CheckCase {
			title = "cases (--cases)"
		}
		if len(groups) == 0 || groups[len(groups)-1].Title != title {
			groups = append(groups, &group{Title: title})
		}
		g := groups[len(groups)-1]
		g.Results = append(g.Results, res)
	}
	data := struct {
		R                *Report
		Pass, Fail, Skip int
		Groups           []*group
		Took             string
	}{rep, pass, fail, skip, groups, time.Duration(rep.Took).Round(time.Millisecond).String()}
	return htmlPage.Execute(w, data)
}

var htmlPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"exchanges": func(es []*Exchange) string {
		var b strings.Builder
		for _, e := range es {
			writeExchange(&b, e, "")
			b.WriteByte('\n')
		}
		return b.String()
	},
	"timeline": timeline,
	"lower":    func(s Status) string { return strings.ToLower(string(s)) },
	"name": func(r *Result) string {
		if r.Check == CheckCase {
			return r.Name
		}
		return string(r.Check)
	},
	"holds": func(c Check) string { return info(c).Holds },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>idemgen conform: {{.R.Spec}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%} td{padding:.3em .5em;vertical-align:top;border-bottom:1px solid #eee}
.badge{font-weight:600;padding:0 .4em;border-radius:3px;color:#fff}
.pass{background:#2a7d3a}.fail{background:#b3261e}.skip{background:#888}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}
.why{color:#444}.holds{color:#777;font-size:12px}
svg text{font:11px system-ui,sans-serif}
details{margin:.5em 0} iframe{width:100%;height:32em;border:1px solid #ddd}
</style></head><body>
<h1>idemgen conform</h1>
<p><code>{{.R.Spec}}</code> against <code>{{.R.BaseURL}}</code>, seed {{.R.Seed}}:
<span class="badge pass">{{.Pass}} passed</span> <span class="badge fail">{{.Fail}} failed</span>
<span class="badge skip">{{.Skip}} skipped</span>, {{.R.Requests}} requests in {{.Took}}.</p>
{{range .R.Notes}}<p class="why">note: {{.}}</p>{{end}}
{{range .Groups}}<h2>{{.Title}}</h2><table>
{{range .Results}}<tr><td><span class="badge {{lower .Status}}">{{.Status}}</span></td>
<td><b>{{name .}}</b><div class="holds">{{holds .Check}}</div>
{{if .Why}}<div class="why">{{.Why}}</div>{{end}}
{{range .Notes}}<div class="holds">({{.}})</div>{{end}}
{{if .Exchanges}}<details {{if eq .Status "FAIL"}}open{{end}}><summary>the exchange that shows it</summary><pre>{{exchanges .Exchanges}}</pre></details>{{end}}
{{with .History}}<div>history: {{.Verdict}}, {{len .Attempts}} attempts on {{.Keys}} key(s)</div>{{timeline .}}
{{if .Visualization}}<details><summary>porcupine's drawing (hover an attempt; for an illegal history, the longest order it found)</summary><iframe srcdoc="{{.Visualization}}"></iframe></details>{{end}}{{end}}
</td></tr>{{end}}</table>{{end}}
</body></html>
`))

// kindColours colour the attempts by what their answer meant.
var kindColours = map[string]string{
	"ok": "#2a7d3a", "replay": "#6aa84f", "409": "#e69138", "422": "#8e7cc3",
	"unknown": "#999999", "500": "#b3261e", "503-not-processed": "#cc4125", "other": "#444444",
}

// timeline draws each key of a history as a row of bars from call to return.
func timeline(h *HistoryResult) template.HTML {
	if len(h.Attempts) == 0 {
		return ""
	}
	var end Duration
	byKey := map[string][]Attempt{}
	for _, a := range h.Attempts {
		end = max(end, a.Return)
		byKey[a.Key] = append(byKey[a.Key], a)
	}
	keys := sortedKeys(byKey)
	const width, rowH, left = 900.0, 18.0, 10.0
	scale := (width - 2*left) / float64(max(end, 1))
	var b strings.Builder
	y := 4.0
	for _, k := range keys {
		as := byKey[k]
		sort.SliceStable(as, func(i, j int) bool { return as[i].Call < as[j].Call })
		fmt.Fprintf(&b, `<text x="%g" y="%g">key %s</text>`, left, y+11, template.HTMLEscapeString(k))
		y += rowH
		for _, a := range as {
			x := left + float64(a.Call)*scale
			wd := max(2, float64(a.Return-a.Call)*scale)
			label := fmt.Sprintf("%s %d %s", a.Body, a.Status, a.Kind)
			title := fmt.Sprintf("%s: %s via %s, %v → %v: %d %s", a.ID, a.Body, a.Via, time.Duration(a.Call).Round(time.Millisecond), time.Duration(a.Return).Round(time.Millisecond), a.Status, a.Kind)
			if a.ClientSaw != "" {
				title += " (client saw " + a.ClientSaw + ")"
				label += " ✕"
			}
			fmt.Fprintf(&b, `<g><title>%s</title><rect x="%.1f" y="%g" width="%.1f" height="%g" fill="%s" rx="2"/><text x="%.1f" y="%g">%s</text></g>`,
				template.HTMLEscapeString(title), x, y, wd, rowH-4, kindColours[a.Kind], x+wd+3, y+11, template.HTMLEscapeString(label))
			y += rowH
		}
		y += 4
	}
	return template.HTML(fmt.Sprintf(`<svg width="%g" height="%g" role="img" aria-label="history timeline">%s</svg>`, width+200, y, b.String()))
}
