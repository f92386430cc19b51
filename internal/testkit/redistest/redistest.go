// Package redistest gives tests Redis: clients of the standalone server and the 3-master
// cluster that the project's test command starts (scripts/with-redis.sh exports
// IDEMGEN_TEST_REDIS_ADDR and IDEMGEN_TEST_REDIS_CLUSTER), a key prefix of their own on those
// shared servers, and private servers and clusters that failure tests may kill, pause and
// restart (started from IDEMGEN_REDIS_SERVER, or redis-server on PATH).
//
// Without the servers, tests that need them fail when IDEMGEN_REQUIRE_DB=1 or CI=true (so CI
// can never pass by skipping them) and are skipped otherwise, with a message naming the command
// that runs them, as internal/testkit/pgtest does for PostgreSQL.
package redistest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Environment variables set by scripts/with-redis.sh.
const (
	// EnvAddr holds host:port of the shared standalone server.
	EnvAddr = "IDEMGEN_TEST_REDIS_ADDR"
	// EnvCluster holds host:port of the shared cluster's masters, comma-separated.
	EnvCluster = "IDEMGEN_TEST_REDIS_CLUSTER"
	// EnvServer holds the redis-server binary for private servers.
	EnvServer = "IDEMGEN_REDIS_SERVER"
)

func required() bool {
	return os.Getenv("IDEMGEN_REQUIRE_DB") == "1" || os.Getenv("CI") == "true"
}

func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + " is not set: run the tests with `make test` (or scripts/with-redis.sh go test ./...)"
	if required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Topology names one of the shared Redis deployments.
type Topology string

const (
	Standalone Topology = "standalone"
	Cluster    Topology = "cluster"
)

// Topologies lists both, for tests that run against each.
var Topologies = []Topology{Standalone, Cluster}

// Addrs returns the addresses of the shared deployment topo, or skips (fails under CI) when the
// environment does not name it.
func Addrs(t testing.TB, topo Topology) []string {
	t.Helper()
	env := EnvAddr
	if topo == Cluster {
		env = EnvCluster
	}
	v := os.Getenv(env)
	if v == "" {
		missing(t, env)
	}
	return strings.Split(v, ",")
}

// NewClient returns a client of the shared deployment topo, closed when the test ends.
func NewClient(t testing.TB, topo Topology) rueidis.Client {
	t.Helper()
	return Connect(t, Addrs(t, topo)...)
}

// Connect returns a client of the servers at addrs (a cluster when they run in cluster mode),
// closed when the test ends.
func Connect(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("redistest: connect %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Prefix returns a key prefix no other test uses, so that tests on the shared servers never
// see each other's keys.
func Prefix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("redistest: random prefix: %v", err)
	}
	return "test:" + hex.EncodeToString(b[:]) + ":"
}

// Server is a private redis-server process of one test, in a temporary folder, with AOF on.
type Server struct {
	// Addr is its host:port.
	Addr string
	t    testing.TB
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// ServerOptions configures StartServer.
type ServerOptions struct {
	// AppendFsync is the appendfsync setting: "always", "everysec" (default) or "no".
	AppendFsync string
	// Cluster starts the server in cluster mode (see StartCluster).
	Cluster bool
	// Config are more lines of redis.conf ("maxmemory 4mb", "rename-command CONFIG \"\"").
	Config []string
}

func serverBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvServer); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, EnvServer)
	}
	return bin
}

// StartServer starts a private server on a free loopback port; it is killed and its folder
// removed when the test ends.
func StartServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	if opts.AppendFsync == "" {
		opts.AppendFsync = "everysec"
	}
	s := &Server{t: t, bin: serverBinary(t), dir: t.TempDir()}
	conf := []string{
		"bind 127.0.0.1", "dir " + s.dir, "logfile " + filepath.Join(s.dir, "server.log"),
		`save ""`, "appendonly yes", "appendfsync " + opts.AppendFsync,
	}
	if opts.Cluster {
		conf = append(conf, "cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 2000")
	}
	conf = append(conf, opts.Config...)
	var err error
	for range 5 {
		if s.port, err = freePort(opts.Cluster); err != nil {
			continue
		}
		c := append([]string{fmt.Sprintf("port %d", s.port)}, conf...)
		if err = os.WriteFile(filepath.Join(s.dir, "redis.conf"), []byte(strings.Join(c, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: start redis-server: %v\n%s", err, s.log())
	}
	t.Cleanup(func() { s.kill() })
	return s
}

// start runs the server with its config and waits until it answers PING.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, filepath.Join(s.dir, "redis.conf"))
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited")
		default:
		}
		if ping(s.Addr) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("redis-server did not answer within 10s")
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server dies too
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Kill kills the server with SIGKILL (no shutdown, no final fsync), as a crash would.
func (s *Server) Kill() { s.kill() }

// Restart starts the server again on the same port and folder: it reloads its AOF (and, in
// cluster mode, its nodes.conf).
func (s *Server) Restart() {
	s.t.Helper()
	s.kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart redis-server: %v\n%s", err, s.log())
	}
}

// Pause stops the server's process (SIGSTOP): connections stay open and nothing answers, as with
// a server stalled by a fork, swap or a slow disk.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

// Command runs one command on this server alone (a new connection each time) and returns its
// reply as text, for set-up and assertions.
func (s *Server) Command(args ...string) (string, error) {
	return command(s.Addr, args...)
}

// ClusterT is a private Redis Cluster of one test: its masters, each owning a third of the slots.
type ClusterT struct {
	Nodes []*Server
}

// Addrs returns the masters' addresses.
func (c *ClusterT) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// StartCluster starts a private cluster of n masters (no replicas) and waits until it serves
// every slot.
func StartCluster(t testing.TB, n int, opts ServerOptions) *ClusterT {
	t.Helper()
	opts.Cluster = true
	c := &ClusterT{}
	for range n {
		c.Nodes = append(c.Nodes, StartServer(t, opts))
	}
	for i, s := range c.Nodes {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if _, err := s.Command("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			t.Fatalf("redistest: ADDSLOTSRANGE: %v", err)
		}
		if i > 0 {
			if _, err := s.Command("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(c.Nodes[0].port)); err != nil {
				t.Fatalf("redistest: CLUSTER MEET: %v", err)
			}
		}
	}
	c.WaitOK(t)
	return c
}

// WaitOK waits until every node says cluster_state:ok.
func (c *ClusterT) WaitOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.Nodes {
		for {
			info, err := s.Command("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok: %v %s", s.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// freePort returns a loopback port that is free (and, for cluster mode, whose bus port +10000
// is free too).
func freePort(cluster bool) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		if !cluster {
			l.Close()
			return p, nil
		}
		if p+10000 > 65535 {
			l.Close()
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		l.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port")
}

func ping(addr string) error {
	r, err := command(addr, "PING")
	if err == nil && r != "PONG" {
		err = fmt.Errorf("PING answered %q", r)
	}
	return err
}

// command sends one command in RESP2 over a fresh connection and returns the reply: a simple
// string, an integer or a bulk string as text, an error reply as an error. (A client library
// would keep reconnecting to a killed server; set-up wants one plain attempt.)
func command(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
