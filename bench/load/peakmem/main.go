// Command peakmem loads stripe-spec3.yaml once, either bare through kin-openapi or through
// idemgen's loader with a config marking every POST, so /usr/bin/time -v can report each
// one's peak resident memory in a process of its own (bench/load/RESULTS.md).
//
//	go build -o /tmp/peakmem ./bench/load/peakmem
//	/tmp/peakmem -mode posts-config testdata/specs/vendor/stripe-spec3.yaml > /tmp/stripe-posts.yaml
//	/usr/bin/time -v /tmp/peakmem -mode bare    testdata/specs/vendor/stripe-spec3.yaml
//	/usr/bin/time -v /tmp/peakmem -mode idemgen -config /tmp/stripe-posts.yaml testdata/specs/vendor/stripe-spec3.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/spec"
)

func main() {
	mode := flag.String("mode", "idemgen", "bare, idemgen, or posts-config (print a config marking every POST)")
	cfg := flag.String("config", "", "idemgen.yaml (idemgen mode)")
	flag.Parse()
	path := flag.Arg(0)
	switch *mode {
	case "bare":
		doc, err := openapi3.NewLoader().LoadFromFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("bare:", doc.Paths.Len(), "paths")
	case "idemgen":
		res, err := spec.Load(context.Background(), spec.Options{Path: path, ConfigPath: *cfg})
		if err != nil || res.Doc == nil {
			fmt.Fprintln(os.Stderr, err, res.Diags.Sorted())
			os.Exit(1)
		}
		fmt.Println("idemgen:", len(res.Doc.Operations), "marked,", res.Diags.Len(), "diagnostics")
	case "posts-config":
		res, err := spec.Load(context.Background(), spec.Options{Path: path})
		if err != nil || res.Doc == nil {
			fmt.Fprintln(os.Stderr, err, res.Diags.Sorted())
			os.Exit(1)
		}
		fmt.Println("version: 1\noperations:")
		for _, op := range res.Doc.Unmarked {
			if op.Method == "POST" {
				fmt.Printf("  %q: true\n", "POST "+op.Path)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "-mode must be bare, idemgen or posts-config")
		os.Exit(2)
	}
}
