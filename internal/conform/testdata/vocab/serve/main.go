// Command serve runs one server of the vocab corpus, to point idemgen conform at by hand:
//
//	go run ./internal/conform/testdata/vocab/serve -vocab problem -bug race -addr 127.0.0.1:8098
//	idemgen conform internal/conform/testdata/vocab/problem.yaml --base-url http://127.0.0.1:8098 \
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
	"slices"

	"github.com/idemgen/idemgen/internal/conform/testdata/vocab"
)

func main() {
	v := flag.String("vocab", "problem", "the vocabulary: problem, plain or stripe")
	bug := flag.String("bug", "", "the bug mode (\"\" for the correct layer)")
	addr := flag.String("addr", "127.0.0.1:8098", "address to listen on")
	flag.Parse()
	if _, ok := vocab.Bugs[vocab.Bug(*bug)]; (*bug != "" && !ok) || !slices.Contains(vocab.Vocabs, vocab.Vocab(*v)) {
		fmt.Fprintf(os.Stderr, "serve: -vocab is one of %v; -bug is \"\" or one of:\n", vocab.Vocabs)
		for b, check := range vocab.Bugs {
			fmt.Fprintf(os.Stderr, "  %-14s caught by %s\n", b, check)
		}
		os.Exit(2)
	}
	h, k := vocab.New(vocab.Server{Vocab: vocab.Vocab(*v), Bug: vocab.Bug(*bug)})
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET /_effects", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "%d\n", k.Effects()) })
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("vocab %s, bug %q, on http://%s", *v, *bug, ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
