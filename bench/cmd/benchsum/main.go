// Command benchsum reads `go test -bench` output (several -count runs) on stdin and prints a
// Markdown table: for each benchmark whose last name element is impl=NAME, the median ns/op,
// B/op and allocs/op of every implementation, and how many times faster impl=idemgen is than
// each other implementation measured on the same input (the ratio of the medians).
//
//	go test -run '^$' -bench . -benchmem -count 5 ./bench/canonical/ | go run ./bench/cmd/benchsum
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// line matches "BenchmarkX/body=y/impl=z-2   20   2985 ns/op ..." and captures the name
// without the GOMAXPROCS suffix and the metrics.
var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

type metrics struct{ ns, bytes, allocs []float64 }

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchsum:", err)
		os.Exit(1)
	}
}

func run(r io.Reader, w io.Writer) error {
	byName := map[string]*metrics{}
	var order []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[1]
		if byName[name] == nil {
			byName[name] = &metrics{}
			order = append(order, name)
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				byName[name].ns = append(byName[name].ns, v)
			case "B/op":
				byName[name].bytes = append(byName[name].bytes, v)
			case "allocs/op":
				byName[name].allocs = append(byName[name].allocs, v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(order) == 0 {
		return fmt.Errorf("no benchmark lines on stdin")
	}
	fmt.Fprintln(w, "| benchmark | impl | runs | median ns/op | B/op | allocs/op | idemgen faster by |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, name := range order {
		group, impl, ok := strings.Cut(name, "/impl=")
		if !ok {
			group, impl = name, "—"
		}
		m := byName[name]
		ratio := ""
		if own := byName[group+"/impl=idemgen"]; ok && impl != "idemgen" && own != nil && median(own.ns) > 0 {
			ratio = fmt.Sprintf("%.1f×", median(m.ns)/median(own.ns))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.0f | %.0f | %s |\n", strings.TrimPrefix(group, "Benchmark"), impl,
			len(m.ns), median(m.ns), median(m.bytes), median(m.allocs), ratio)
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
