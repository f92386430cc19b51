package faults

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// cluster is a PostgreSQL server of the scenario's own, so that it can be stopped, started and
// frozen without disturbing the shared test server. The binaries come from IDEMGEN_PG_BINDIR
// (scripts/with-postgres.sh exports it). As root the server runs as the postgres user, since
// initdb refuses root.
type cluster struct {
	t      *testing.T
	bindir string
	dir    string
	port   int
	asUser []string
	frozen []int
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	bindir := os.Getenv("IDEMGEN_PG_BINDIR")
	if bindir == "" {
		msg := "IDEMGEN_PG_BINDIR is not set: run with scripts/with-postgres.sh (make test, make faults)"
		if os.Getenv("IDEMGEN_REQUIRE_DB") == "1" || os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	c := emptyCluster(t, bindir)
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.start()
	return c
}

// own gives the cluster's folder to the user the server runs as (postgres, as root).
func (c *cluster) own() {
	c.t.Helper()
	if os.Getuid() != 0 {
		return
	}
	c.asUser = []string{"runuser", "-u", "postgres", "--"}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if out, err := exec.Command("chown", "postgres", c.dir).CombinedOutput(); err != nil {
		c.t.Fatalf("chown: %v %s", err, out)
	}
}

// remove stops the server, if it runs, and deletes its folder (its log printed first when the
// test failed).
func (c *cluster) remove() {
	c.thaw()
	c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	if c.t.Failed() {
		if log, err := os.ReadFile(filepath.Join(c.dir, "server.log")); err == nil {
			c.t.Logf("private PostgreSQL log (%s):\n%s", c.dir, tail(string(log), 40))
		}
	}
	os.RemoveAll(c.dir)
}

// freeTCPPort returns a loopback port that was free a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *cluster) run(name string, args ...string) ([]byte, error) {
	argv := append(append([]string{}, c.asUser...), filepath.Join(c.bindir, name))
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	// In the cluster's own folder, which the postgres user owns: in a checkout under a folder
	// only root may enter (mktemp -d), psql warns that it cannot change into the working
	// directory, and the warning would be read as the query's value.
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

func (c *cluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *cluster) start() {
	c.t.Helper()
	out, err := c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=100", c.port, c.dir), "start")
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		c.t.Fatalf("start: %v\n%s\n%s", err, out, log)
	}
}

// stop stops the server with pg_ctl's fast mode: sessions are terminated, transactions in
// progress roll back, the server shuts down cleanly.
func (c *cluster) stop() {
	c.t.Helper()
	if out, err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop"); err != nil {
		c.t.Fatalf("stop: %v\n%s", err, out)
	}
}

// freeze stops every process of the server with SIGSTOP: the postmaster first, so that it forks
// no new backend, then its children. Connections stay open and nothing answers; a new connection
// waits in the listen queue.
func (c *cluster) freeze() int {
	c.t.Helper()
	pm := c.postmaster()
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		c.t.Fatalf("SIGSTOP postmaster %d: %v", pm, err)
	}
	c.frozen = []int{pm}
	for _, pid := range children(pm) {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
			c.frozen = append(c.frozen, pid)
		}
	}
	return len(c.frozen)
}

// thaw resumes what freeze stopped: the children, then the postmaster.
func (c *cluster) thaw() {
	for i := len(c.frozen) - 1; i >= 0; i-- {
		syscall.Kill(c.frozen[i], syscall.SIGCONT)
	}
	c.frozen = nil
}

func (c *cluster) postmaster() int {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		c.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		c.t.Fatalf("postmaster.pid: %v", err)
	}
	return pid
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses; it ends at the last ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
