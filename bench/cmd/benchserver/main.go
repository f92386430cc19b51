// Command benchserver serves every variant of the benchmark harness from one process
// (bench/internal/benchsrv has the list): the conformance service, the baselines, the A/B
// runtimes, the middleware and, with -redis host:port, the Redis store's variants, on one pool.
//
// It connects with DATABASE_URL, migrates, and listens on -addr until killed.
package main

import (
	"flag"
	"log"

	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/bench/internal/benchsrv"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	conns := flag.Int("conns", 64, "database pool size")
	redisAddr := flag.String("redis", "", "host:port of a standalone Redis for the /redis/ variants; empty: none")
	flushDelay := flag.Duration("redis-flush-delay", 0, "rueidis ClientOption.MaxFlushDelay")
	noPipelining := flag.Bool("redis-no-pipelining", false, "rueidis ClientOption.DisableAutoPipelining")
	flag.Parse()
	opt := rueidis.ClientOption{InitAddress: []string{*redisAddr}, DisableCache: true, MaxFlushDelay: *flushDelay, DisableAutoPipelining: *noPipelining}
	if *redisAddr == "" {
		opt.InitAddress = nil
	}
	if err := benchsrv.Run(benchsrv.Options{Addr: *addr, Conns: int32(*conns), Redis: opt}); err != nil {
		log.Fatalf("benchserver: %v", err)
	}
}
