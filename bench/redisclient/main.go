// Command redisclient measures the two Redis clients idemgen could build its Redis store on,
// github.com/redis/go-redis/v9 and github.com/redis/rueidis, on the operations the store makes,
// against the servers of scripts/with-redis.sh (standalone and a 3-master cluster):
//
//	read    EVALSHA of a script that returns a 400-byte value, its PTTL and the server's TIME
//	        (the replay cache's lookup) over 64 hot keys
//	getpttl GET and PTTL of the same keys in one pipeline, without Lua
//	claim   EVALSHA of a script that writes a hash of 5 fields on a fresh key with a PEXPIRE
//	        (the lease store's claim)
//	csc     a cached GET of a hot key through the client's own client-side cache (rueidis
//	        DoCache; go-redis's experimental ClientSideCacheConfig, standalone only)
//
// at concurrency 1 and 32, in rounds that alternate the clients. It prints, per client,
// topology, operation and concurrency: operations per second, this process's CPU per operation
// (getrusage) and the Redis servers' CPU per operation (INFO cpu), medians over rounds.
//
// It is a module of its own so that idemgen's module depends on one client only:
//
//	scripts/with-redis.sh sh -c 'cd bench/redisclient && go run . -rounds 3 -duration 2s'
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

const readScript = `local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
return {v, redis.call('PTTL', KEYS[1]), t[1], t[2]}`

const claimScript = `local t = redis.call('TIME')
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'op', ARGV[1], 'fp', ARGV[2], 'st', 'r', 'tok', t[1] .. t[2], 'lu', ARGV[3])
redis.call('PEXPIRE', KEYS[1], 10000)
return 1`

// client is one library behind the three operations.
type client interface {
	read(ctx context.Context, key string) error
	getPTTL(ctx context.Context, key string) error
	claim(ctx context.Context, key string) error
	csc(ctx context.Context, key string) error
	set(ctx context.Context, key string, v []byte) error
	close()
}

type goRedis struct {
	c           goredis.UniversalClient
	cached      *goredis.Client // nil: no client-side caching (cluster)
	read1, clm1 *goredis.Script
}

func newGoRedis(addrs []string, cluster bool) (*goRedis, error) {
	g := &goRedis{read1: goredis.NewScript(readScript), clm1: goredis.NewScript(claimScript)}
	if cluster {
		g.c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	} else {
		g.c = goredis.NewClient(&goredis.Options{Addr: addrs[0]})
		g.cached = goredis.NewClient(&goredis.Options{Addr: addrs[0], Protocol: 3,
			ClientSideCacheConfig: &goredis.ClientSideCacheConfig{}})
	}
	return g, g.c.Ping(context.Background()).Err()
}

func (g *goRedis) read(ctx context.Context, key string) error {
	return g.read1.Run(ctx, g.c, []string{key}).Err()
}
func (g *goRedis) getPTTL(ctx context.Context, key string) error {
	p := g.c.Pipeline()
	p.Get(ctx, key)
	p.PTTL(ctx, key)
	_, err := p.Exec(ctx)
	return err
}
func (g *goRedis) claim(ctx context.Context, key string) error {
	return g.clm1.Run(ctx, g.c, []string{key}, "createPayment", "0123456789abcdef0123456789abcdef", "123").Err()
}
func (g *goRedis) csc(ctx context.Context, key string) error {
	if g.cached == nil {
		return errNotSupported
	}
	return g.cached.Get(ctx, key).Err()
}
func (g *goRedis) set(ctx context.Context, key string, v []byte) error {
	return g.c.Set(ctx, key, v, time.Hour).Err()
}
func (g *goRedis) close() {
	g.c.Close()
	if g.cached != nil {
		g.cached.Close()
	}
}

type rueidisClient struct {
	c           rueidis.Client
	read1, clm1 *rueidis.Lua
}

func newRueidis(addrs []string, flushDelay time.Duration) (*rueidisClient, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, MaxFlushDelay: flushDelay})
	if err != nil {
		return nil, err
	}
	return &rueidisClient{c: c, read1: rueidis.NewLuaScript(readScript), clm1: rueidis.NewLuaScript(claimScript)}, nil
}

func (r *rueidisClient) read(ctx context.Context, key string) error {
	return r.read1.Exec(ctx, r.c, []string{key}, nil).Error()
}
func (r *rueidisClient) getPTTL(ctx context.Context, key string) error {
	for _, res := range r.c.DoMulti(ctx, r.c.B().Get().Key(key).Build(), r.c.B().Pttl().Key(key).Build()) {
		if err := res.Error(); err != nil {
			return err
		}
	}
	return nil
}
func (r *rueidisClient) claim(ctx context.Context, key string) error {
	return r.clm1.Exec(ctx, r.c, []string{key}, []string{"createPayment", "0123456789abcdef0123456789abcdef", "123"}).Error()
}
func (r *rueidisClient) csc(ctx context.Context, key string) error {
	return r.c.DoCache(ctx, r.c.B().Get().Key(key).Cache(), time.Minute).Error()
}
func (r *rueidisClient) set(ctx context.Context, key string, v []byte) error {
	return r.c.Do(ctx, r.c.B().Set().Key(key).Value(rueidis.BinaryString(v)).Ex(time.Hour).Build()).Error()
}
func (r *rueidisClient) close() { r.c.Close() }

var errNotSupported = fmt.Errorf("not supported")

type sample struct{ ops, cliUS, srvUS float64 }

func main() {
	rounds := flag.Int("rounds", 3, "rounds (clients alternate within each)")
	duration := flag.Duration("duration", 2*time.Second, "time per measurement")
	concs := flag.String("concurrency", "1,32", "goroutines")
	clientList := flag.String("clients", "go-redis,rueidis", "clients to measure: go-redis, rueidis, rueidis-flush20us (MaxFlushDelay 20µs)")
	opList := flag.String("ops", "read,getpttl,claim,csc", "operations to measure")
	flag.Parse()
	topologies := map[string][]string{
		"standalone": {os.Getenv("IDEMGEN_TEST_REDIS_ADDR")},
		"cluster":    strings.Split(os.Getenv("IDEMGEN_TEST_REDIS_CLUSTER"), ","),
	}
	if topologies["standalone"][0] == "" || topologies["cluster"][0] == "" {
		fatalf("run under scripts/with-redis.sh")
	}
	var levels []int
	for _, f := range strings.Split(*concs, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			fatalf("bad -concurrency %q", f)
		}
		levels = append(levels, n)
	}
	ctx := context.Background()
	results := map[string][]sample{}
	var order []string
	value := make([]byte, 400)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for r := range *rounds {
		for _, topo := range []string{"standalone", "cluster"} {
			addrs := topologies[topo]
			clients := strings.Split(*clientList, ",")
			if r%2 == 1 {
				slices.Reverse(clients)
			}
			for _, name := range clients {
				var c client
				var err error
				switch name {
				case "go-redis":
					c, err = newGoRedis(addrs, topo == "cluster")
				case "rueidis":
					c, err = newRueidis(addrs, 0)
				case "rueidis-flush20us":
					c, err = newRueidis(addrs, 20*time.Microsecond)
				default:
					fatalf("unknown client %q", name)
				}
				if err != nil {
					fatalf("%s %s: %v", name, topo, err)
				}
				hot := make([]string, 64)
				for i := range hot {
					hot[i] = fmt.Sprintf("bench:{hot%d}", i)
					if err := c.set(ctx, hot[i], value); err != nil {
						fatalf("set: %v", err)
					}
				}
				var fresh atomic.Int64
				ops := []struct {
					name string
					f    func(ctx context.Context, i int64) error
				}{
					{"read", func(ctx context.Context, i int64) error { return c.read(ctx, hot[i%64]) }},
					{"getpttl", func(ctx context.Context, i int64) error { return c.getPTTL(ctx, hot[i%64]) }},
					{"claim", func(ctx context.Context, _ int64) error {
						return c.claim(ctx, fmt.Sprintf("bench:{claim-%d-%d}", time.Now().UnixNano(), fresh.Add(1)))
					}},
					{"csc", func(ctx context.Context, i int64) error { return c.csc(ctx, hot[i%64]) }},
				}
				for _, op := range ops {
					if !slices.Contains(strings.Split(*opList, ","), op.name) || op.f(ctx, 0) == errNotSupported {
						continue
					}
					for _, conc := range levels {
						label := fmt.Sprintf("%s|%s|%s|%d", name, topo, op.name, conc)
						if _, ok := results[label]; !ok {
							order = append(order, label)
						}
						s, err := measure(ctx, addrs, conc, *duration, op.f)
						if err != nil {
							fatalf("%s: %v", label, err)
						}
						results[label] = append(results[label], s)
					}
				}
				c.close()
			}
		}
	}
	fmt.Printf("| client | topology | operation | conc | ops/s | client CPU µs/op | Redis CPU µs/op |\n|---|---|---|---:|---:|---:|---:|\n")
	for _, label := range order {
		f := strings.Split(label, "|")
		ss := results[label]
		med := func(g func(sample) float64) float64 {
			var xs []float64
			for _, s := range ss {
				xs = append(xs, g(s))
			}
			slices.Sort(xs)
			return xs[len(xs)/2]
		}
		fmt.Printf("| %s | %s | %s | %s | %.0f | %.1f | %.1f |\n", f[0], f[1], f[2], f[3],
			med(func(s sample) float64 { return s.ops }), med(func(s sample) float64 { return s.cliUS }),
			med(func(s sample) float64 { return s.srvUS }))
	}
}

// measure runs f from conc goroutines for d.
func measure(ctx context.Context, addrs []string, conc int, d time.Duration, f func(context.Context, int64) error) (sample, error) {
	srv0 := serverCPU(ctx, addrs)
	cli0 := selfCPU()
	start := time.Now()
	deadline := start.Add(d)
	var n atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(g); time.Now().Before(deadline); i += int64(conc) {
				if err := f(ctx, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cli := selfCPU() - cli0
	srv := serverCPU(ctx, addrs) - srv0
	if err, _ := firstErr.Load().(error); err != nil {
		return sample{}, err
	}
	k := float64(n.Load())
	return sample{ops: k / elapsed.Seconds(), cliUS: float64(cli.Microseconds()) / k, srvUS: srv * 1e6 / k}, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU sums used_cpu_user and used_cpu_sys (seconds) of every node in addrs.
func serverCPU(ctx context.Context, addrs []string) float64 {
	var total float64
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		info, err := c.Info(ctx, "cpu").Result()
		c.Close()
		if err != nil {
			fatalf("INFO cpu %s: %v", a, err)
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
				x, _ := strconv.ParseFloat(v, 64)
				total += x
			}
		}
	}
	return total
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "redisclient: "+format+"\n", args...)
	os.Exit(1)
}
