package procstat

import (
	"crypto/sha256"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestCPUTimeGrowsWithWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat is Linux's")
	}
	before := CPUTime(os.Getpid())
	b := make([]byte, 1<<20)
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		s := sha256.Sum256(b)
		b[0] = s[0]
	}
	if got := CPUTime(os.Getpid()) - before; got < Tick {
		t.Fatalf("300 ms of hashing read as %v of CPU", got)
	}
	if CPUTime(0) != 0 || TreeCPUTime(0) != 0 {
		t.Fatal("pid 0 must read 0")
	}
}

func TestParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat is Linux's")
	}
	got, err := Parent(os.Getpid())
	if err != nil || got != os.Getppid() {
		t.Fatalf("Parent = %d, %v; want %d", got, err, os.Getppid())
	}
	// The test binary is a child of `go test`: the tree of our parent includes our CPU.
	if tree, own := TreeCPUTime(os.Getppid()), CPUTime(os.Getpid()); tree < own {
		t.Fatalf("parent's tree %v < this process's %v", tree, own)
	}
	if _, err := Parent(1 << 30); err == nil {
		t.Fatal("a missing process has a parent")
	}
}
