package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The HTTP load can come from wrk (Debian package wrk, 4.x), a C load generator whose CPU per
// request is a fraction of a Go http.Client's. The load generator shares the machine's cores
// with the server and PostgreSQL, so a cheaper one leaves the measured variants more of the
// machine, and their throughput ratios come closer to the ratios of their own costs. benchdrive
// uses wrk when -wrk names it; the Go generator (package load) stays for -short and for machines
// without wrk.

// wrkScript is the Lua program wrk runs for one measurement. It builds each request (a fresh
// idempotency key per request for the fresh variants), counts responses by status ("replayed"
// for Idempotent-Replayed: true, idemgen's marker, or Idempotency-Replayed: true, the peer's: see
// bench/peer) and prints one result line that wrkResult parses.
const wrkScript = `
local path, body, tenant, prefix, fresh, hot = %q, %q, %q, %q, %t, %d
local headers = {["Authorization"] = "Bearer " .. tenant, ["Content-Type"] = "application/json",
                 ["Idempotency-Key"] = prefix .. "-replayed-0000"}
local fixed = nil -- built on first use: wrk adds the Host header only once the script has loaded
local hots = {}   -- the storm's requests, one per hot key, built on first use
local n = 0
counts = {}
threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function request()
  if hot > 0 then
    n = n + 1
    local i = n %% hot
    if not hots[i] then
      headers["Idempotency-Key"] = prefix .. "-hot-" .. i
      hots[i] = wrk.format("POST", path, headers, body)
    end
    return hots[i]
  end
  if not fresh then
    fixed = fixed or wrk.format("POST", path, headers, body)
    return fixed
  end
  n = n + 1
  -- a random-looking leading part spreads the keys over the index, as clients' UUIDs do;
  -- the counter keeps them unique
  headers["Idempotency-Key"] = string.format("%%s-%%08x%%08x", prefix, math.random(0, 2147483647), n)
  return wrk.format("POST", path, headers, body)
end

function response(status, hdrs, _)
  local k = tostring(status)
  if hdrs["Idempotent-Replayed"] == "true" or hdrs["Idempotency-Replayed"] == "true" then
    k = "replayed"
  end
  counts[k] = (counts[k] or 0) + 1
end

function done(summary, latency, _)
  local parts = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("counts")) do
      parts[#parts + 1] = k .. "=" .. v
    end
  end
  local e = summary.errors
  io.write(string.format("WRKRESULT requests=%%d duration_us=%%d p50_us=%%d p99_us=%%d errors=%%d statuses=%%s\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, table.concat(parts, ",")))
end
`

// wrkOutcome is what one wrk run measured.
type wrkOutcome struct {
	requests int64
	elapsed  time.Duration
	p50, p99 time.Duration
	errors   int64
	statuses map[string]int64
	cpu      time.Duration // wrk's own user + system CPU time
}

// runWrk drives variant v at conc connections (one wrk thread) for d, rounded up to whole
// seconds (wrk's -d unit).
func runWrk(ctx context.Context, wrk, base string, v variant, run string, conc int, d time.Duration) (wrkOutcome, error) {
	dir, err := os.MkdirTemp("", "benchdrive-wrk")
	if err != nil {
		return wrkOutcome{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "variant.lua")
	base, path := v.target(base)
	lua := fmt.Sprintf(wrkScript, path, v.body, "bench-"+run, "key-"+run, v.fresh, v.hot)
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		return wrkOutcome{}, err
	}
	secs := max(1, int((d+time.Second-1)/time.Second))
	cmd := exec.CommandContext(ctx, wrk, "-t1", "-c"+strconv.Itoa(conc), "-d"+strconv.Itoa(secs)+"s",
		"--timeout", "10s", "-s", script, base+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return wrkOutcome{}, fmt.Errorf("wrk: %v: %s%s", err, stderr.String(), stdout.String())
	}
	out, err := parseWrk(stdout.String())
	if err != nil {
		return wrkOutcome{}, fmt.Errorf("wrk: %v in %q", err, stdout.String())
	}
	out.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return out, nil
}

// parseWrk reads the WRKRESULT line of wrkScript's done().
func parseWrk(s string) (wrkOutcome, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "WRKRESULT ")
		if !ok {
			continue
		}
		o := wrkOutcome{statuses: map[string]int64{}}
		for _, f := range strings.Fields(rest) {
			k, v, _ := strings.Cut(f, "=")
			if k == "statuses" {
				for _, kv := range strings.Split(v, ",") {
					if status, n, ok := strings.Cut(kv, "="); ok {
						c, err := strconv.ParseInt(n, 10, 64)
						if err != nil {
							return o, fmt.Errorf("status count %q", kv)
						}
						o.statuses[status] += c
					}
				}
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return o, fmt.Errorf("field %q", f)
			}
			switch k {
			case "requests":
				o.requests = n
			case "duration_us":
				o.elapsed = time.Duration(n) * time.Microsecond
			case "p50_us":
				o.p50 = time.Duration(n) * time.Microsecond
			case "p99_us":
				o.p99 = time.Duration(n) * time.Microsecond
			case "errors":
				o.errors = n
			}
		}
		return o, nil
	}
	return wrkOutcome{}, fmt.Errorf("no WRKRESULT line")
}
