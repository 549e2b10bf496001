// Package fdtest runs a process out of file descriptors on purpose, for
// tests of what recovers once they are back. The exhaustion happens in a
// child: the test binary re-executed to run only the calling test, with a
// low RLIMIT_NOFILE, so that the parent test process and the other tests
// keep their descriptors. It is for _test.go files only.
package fdtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv marks the re-executed test binary.
const childEnv = "FDTEST_CHILD"

// childTimeout bounds a child's run.
const childTimeout = 2 * time.Minute

// InChild reports whether this process is a child that RunInChild started.
func InChild() bool { return os.Getenv(childEnv) == "1" }

// RunInChild re-executes the test binary to run only t (by its full name,
// subtests included) with InChild true and env added to its environment,
// and fails t with the child's output when the child fails.
func RunInChild(t *testing.T, env ...string) {
	t.Helper()
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.v", "-test.count=1", "-test.run="+strings.Join(parts, "/"))
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// Exhaust lowers the soft RLIMIT_NOFILE to limit (it only lowers) and
// opens /dev/null until the process has no descriptor left. release
// closes them again. Call it only in a child (InChild).
func Exhaust(tb testing.TB, limit uint64) (release func()) {
	tb.Helper()
	if !InChild() {
		tb.Fatal("fdtest.Exhaust outside a child of RunInChild")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatalf("Getrlimit: %v", err)
	}
	lim.Cur = min(lim.Cur, limit)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatalf("Setrlimit: %v", err)
	}
	var held []*os.File
	release = func() {
		for _, f := range held {
			_ = f.Close()
		}
		held = nil
	}
	for range lim.Cur {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			return release
		}
		if err != nil {
			release()
			tb.Fatalf("open %s: %v", os.DevNull, err)
		}
		held = append(held, f)
	}
	release()
	tb.Fatalf("still opening files after %d", lim.Cur)
	return nil
}
