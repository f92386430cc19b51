// Package procstat reads the CPU time of local processes from Linux's /proc/PID/stat (proc(5)):
// one process's, and a PostgreSQL server's, which is the postmaster's and every child's. The
// benchmark commands use it for "CPU µs per request" columns; on a system without /proc every
// reading is 0.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Tick is the clock tick of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const Tick = 10 * time.Millisecond

// Fields returns the fields of /proc/PID/stat after the command name, starting with the state
// (so fields[1] is the parent pid, fields[11..14] utime, stime, cutime, cstime in clock ticks);
// nil when the process does not exist. The command name is skipped by its closing parenthesis,
// since it may itself hold spaces and parentheses.
func Fields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return nil
	}
	return strings.Fields(s[i+2:])
}

// sum adds the fields at idx, in clock ticks, as a duration.
func sum(f []string, idx ...int) time.Duration {
	var t int64
	for _, i := range idx {
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			t += n
		}
	}
	return time.Duration(t) * Tick
}

// CPUTime is the user+system CPU time the process has used; 0 for pid 0 or a missing process.
func CPUTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	return sum(Fields(pid), 11, 12)
}

// TreeCPUTime is the CPU time of a PostgreSQL server: the postmaster's own and its reaped
// children's (cutime, cstime: backends that have exited), plus every live child's (backends,
// WAL writer, checkpointer, autovacuum). A child that exits between the read of the postmaster
// and the scan of /proc is missed, so a short window can read low.
func TreeCPUTime(postmaster int) time.Duration {
	if postmaster == 0 {
		return 0
	}
	t := sum(Fields(postmaster), 11, 12, 13, 14)
	entries, _ := os.ReadDir("/proc")
	parent := strconv.Itoa(postmaster)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := Fields(pid)
		if len(f) > 12 && f[1] == parent {
			t += sum(f, 11, 12)
		}
	}
	return t
}

// Parent returns the parent process id of pid. A PostgreSQL backend's parent is the
// postmaster, whose children are every process of the server; an error means pid is not on
// this machine (a remote database).
func Parent(pid int) (int, error) {
	f := Fields(pid)
	if len(f) < 2 {
		return 0, fmt.Errorf("process %d is not on this machine", pid)
	}
	return strconv.Atoi(f[1])
}
