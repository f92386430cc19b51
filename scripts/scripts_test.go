// Package scripts holds the tests of the shell scripts beside it: what `make test`, CI and a
// developer trying idemgen by hand rely on.
package scripts

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// with-postgres.sh --serve keeps a server up, prints how to connect, and on SIGTERM stops it,
// deletes its folder and exits 0.
func TestWithPostgresServe(t *testing.T) {
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(dirs) == 0 {
		if os.Getenv("IDEMGEN_REQUIRE_DB") == "1" {
			t.Fatal("no PostgreSQL server binaries")
		}
		t.Skip("no PostgreSQL server binaries (with-postgres.sh would install them)")
	}
	cmd := exec.Command("./with-postgres.sh", "--serve")
	cmd.Env = append(os.Environ(), "IDEMGEN_PG_PORT=") // a free port of its own
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	urlLine := regexp.MustCompile(`^\s*export DATABASE_URL='([^']+)'$`)
	logLine := regexp.MustCompile(`^(/\S+)/server\.log\. Connect with:$`)
	var url, dir string
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(2 * time.Minute)
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("with-postgres.sh --serve ended without printing the connection URL")
			}
			if m := urlLine.FindStringSubmatch(l); m != nil {
				url = m[1]
			}
			if m := logLine.FindStringSubmatch(l); m != nil {
				dir = m[1]
			}
		case <-timeout:
			t.Fatal("no connection URL after 2 minutes")
		}
	}
	go func() {
		for range lines {
		}
	}()
	if dir == "" || !strings.Contains(url, "127.0.0.1:") {
		t.Fatalf("printed URL %q, folder %q", url, dir)
	}

	// The server is up and stays up: connect, wait, connect again.
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			cancel()
			t.Fatalf("connect to the printed URL: %v", err)
		}
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Errorf("SELECT 1: %d %v", one, err)
		}
		_ = conn.Close(ctx)
		cancel()
		time.Sleep(time.Second)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("with-postgres.sh --serve after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("with-postgres.sh --serve did not stop within a minute of SIGTERM")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the server's folder %s is still there (%v)", dir, err)
	}
	if _, err := pgx.Connect(context.Background(), url); err == nil {
		t.Error("the server still answers after the script stopped")
	}
}

// with-postgres.sh refuses to run without a command or --serve, and --serve with one.
func TestWithPostgresUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--serve", "true"}} {
		err := exec.Command("./with-postgres.sh", args...).Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("with-postgres.sh %v: %v, want exit status 2", args, err)
		}
	}
}

// with-pgbouncer.sh starts PgBouncer in transaction pooling mode in front of DATABASE_URL's
// server: its command reaches a database through it (each statement on whichever server
// session the pooler gives it), and its exit status is the script's. Without DATABASE_URL or a
// command it refuses with exit status 2.
func TestWithPgBouncer(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{[]string{"DATABASE_URL="}, []string{"true"}},
		{[]string{"DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres"}, nil},
	} {
		cmd := exec.Command("./with-pgbouncer.sh", c.args...)
		cmd.Env = append(os.Environ(), c.env...)
		if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("with-pgbouncer.sh %v with %v: %v, want exit status 2", c.args, c.env, err)
		}
	}
	server := os.Getenv("IDEMGEN_TEST_DATABASE_URL")
	if server == "" {
		t.Skip("IDEMGEN_TEST_DATABASE_URL is not set: run the tests with scripts/with-postgres.sh")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("./with-pgbouncer.sh", exe, "-test.run=^TestHelperThroughPgBouncer$")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+server, "IDEMGEN_PGBOUNCER_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("with-pgbouncer.sh: %v, want the helper's exit status 3\n%s", err, out)
	}
	if !strings.Contains(string(out), "pool_mode=transaction") {
		t.Errorf("with-pgbouncer.sh did not say what it started:\n%s", out)
	}
}

// TestHelperThroughPgBouncer is the command TestWithPgBouncer runs under with-pgbouncer.sh:
// it connects through the pooler, checks that the session it gets is not the one the
// connection announced (the pooler's mark), and exits 3.
func TestHelperThroughPgBouncer(t *testing.T) {
	if os.Getenv("IDEMGEN_PGBOUNCER_HELPER") != "1" {
		t.Skip("run by TestWithPgBouncer")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("IDEMGEN_TEST_PGBOUNCER_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if pid == conn.PgConn().PID() {
		t.Fatalf("the session's process id %d is the one the connection announced: no pooler in between", pid)
	}
	os.Exit(3)
}

// apt_install (scripts/apt.sh) waits for dpkg's lock that another apt-get holds, instead of
// failing at once with "Could not get lock" as a bare apt-get does.
func TestAptInstallWaitsForTheLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it takes dpkg's lock")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("no apt-get")
	}
	const pkg = "bash" // installed everywhere: apt-get has nothing to do but take the lock
	lock, err := os.OpenFile("/var/lib/dpkg/lock-frontend", os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	// The same kind of lock apt and dpkg take (fcntl, not flock). Another apt-get may hold it
	// right now: wait for it, as the script would.
	fl := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}
	if err := syscall.FcntlFlock(lock.Fd(), syscall.F_SETLKW, &fl); err != nil {
		t.Fatal(err)
	}
	const hold = 4 * time.Second
	start := time.Now()
	go func() {
		time.Sleep(hold)
		fl.Type = syscall.F_UNLCK
		_ = syscall.FcntlFlock(lock.Fd(), syscall.F_SETLK, &fl)
	}()

	// A bare apt-get fails at once while the lock is held: the behaviour the script avoids.
	bare := exec.Command("apt-get", "install", "-y", "-qq", pkg)
	bare.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := bare.CombinedOutput(); err == nil || !strings.Contains(string(out), "lock") {
		t.Fatalf("a bare apt-get while the lock is held: %v %s (the test's premise is wrong)", err, out)
	}

	cmd := exec.Command("bash", "-c", `. ./apt.sh && apt_install "$1"`, "apt_install", pkg)
	cmd.Env = append(os.Environ(), "IDEMGEN_APT_WAIT=120")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("apt_install %s: %v\n%s", pkg, err, out)
	}
	if took := time.Since(start); took < hold {
		t.Errorf("apt_install returned after %s, before the lock was released (%s)", took, hold)
	}
}
