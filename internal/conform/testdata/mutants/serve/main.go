// Command serve runs one server of the mutant corpus, to point idemgen conform at by hand:
//
//	go run ./internal/conform/testdata/mutants/serve -mutant race -addr 127.0.0.1:8099
//	idemgen conform internal/conform/testdata/mutants/payments.yaml --base-url http://127.0.0.1:8099 \
//	    --header 'Authorization: Bearer a' --delay-header 'X-Test-Delay: 150ms'
//
// GET /_effects answers the committed effect count, for --effects-cmd 'curl -s URL/_effects'.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/idemgen/idemgen/internal/conform/testdata/mutants"
)

func main() {
	name := flag.String("mutant", "good", "the server to run (good, or a mutant's name)")
	addr := flag.String("addr", "127.0.0.1:8099", "address to listen on")
	flag.Parse()
	for _, m := range mutants.All() {
		if m.Name != *name {
			continue
		}
		h, k := mutants.New(m)
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("GET /_effects", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "%d\n", k.Effects()) })
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("%s (%s) on http://%s", m.Name, m.Bug, ln.Addr())
		log.Fatal(http.Serve(ln, mux))
	}
	fmt.Fprintf(os.Stderr, "serve: no server %q; the corpus:\n", *name)
	for _, m := range mutants.All() {
		fmt.Fprintf(os.Stderr, "  %-14s %s\n", m.Name, m.Bug)
	}
	os.Exit(2)
}
