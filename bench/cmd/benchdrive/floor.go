package main

// The floor comparison: a new key through idemgen against the floor (baseline.Floor: the plain
// transaction that also inserts a record of idemgen's size into a copy of the store's table,
// without reading, locking or checking any key) and against the plain transaction, with the
// A/B variants of the same handler without the stored-bytes cap and with generic plans, all
// measured in the same run, interleaved over rounds.

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// floorRows are the floor comparison's ratios: numerator and denominator variants.
var floorRows = []struct {
	label    string
	num, den string
}{
	{"floor / plain transaction", vFloor, vPlain},
	{"idemgen new key / floor", vStmtNew, vFloor},
	{"idemgen new key / plain transaction", vStmtNew, vPlain},
	{"partitioned: floor / plain transaction", vFloorPart, vPlain},
	{"partitioned: idemgen new key / floor", vPartNew, vFloorPart},
	{"idemgen new key without the stored-bytes cap / with it", vNoCapNew, vStmtNew},
	{"idemgen new key without the stored-bytes cap / floor", vNoCapNew, vFloor},
	{"idemgen new key with generic plans / custom plans", vGenericNew, vStmtNew},
}

// printFloor prints the floor comparison, when the run measured its variants: per ratio and
// figure, the median of the per-round ratios and their range.
func printFloor(w io.Writer, levels []int, results map[string]map[int][]sample) {
	if len(results[vFloor]) == 0 && len(results[vFloorPart]) == 0 {
		return
	}
	figures := []struct {
		name string
		f    func(sample) float64
	}{
		{"req/s", func(s sample) float64 { return s.rps }},
		{"server + PostgreSQL CPU/req", func(s sample) float64 { return s.cpuUS + s.dbCPUUS }},
		{"WAL B/req", func(s sample) float64 { return s.walB }},
		{"round trips/req", func(s sample) float64 { return s.rt }},
	}
	fmt.Fprintf(w, "\n### The floor: a new key against storing the response with the business writes (median of per-round ratios, range in brackets)\n\n")
	header := "| ratio | conc |"
	for _, fig := range figures {
		header += " " + fig.name + " |"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, "|---|---:|"+strings.Repeat("---:|", len(figures)))
	for _, row := range floorRows {
		for _, c := range levels {
			a, b := results[row.num][c], results[row.den][c]
			if len(a) == 0 || len(b) == 0 {
				continue
			}
			cells := make([]string, 0, len(figures))
			for _, fig := range figures {
				cells = append(cells, spread(a, b, fig.f))
			}
			fmt.Fprintf(w, "| %s | %d | %s |\n", row.label, c, strings.Join(cells, " | "))
		}
	}
}

// spread is the median and range of the per-round ratios f(a)/f(b), or "—".
func spread(a, b []sample, f func(sample) float64) string {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if d := f(b[i]); d > 0 {
			rs = append(rs, f(a[i])/d)
		}
	}
	if len(rs) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(rs), slices.Min(rs), slices.Max(rs))
}
