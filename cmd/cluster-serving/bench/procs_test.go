package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// roleEnv makes the test binary, re-executed by a test below, play a
// bench parent instead of running the tests (see TestMain).
const roleEnv = "CLUSTER_SERVING_BENCH_PROCS_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "parent": // starts a child, says its pid, waits to be killed
		fmt.Println(startSleep())
		time.Sleep(time.Hour)
	case "interrupted": // the same, inside untilInterrupted, with a temp dir
		err := untilInterrupted(func() error {
			dir, err := os.MkdirTemp("", "cs-procs-test-*")
			if err != nil {
				return err
			}
			fmt.Println(startSleep(), dir)
			time.Sleep(time.Hour)
			return nil
		})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// startSleep starts `sleep 300` through startProc and returns its pid
// (-1 if it could not).
func startSleep() int {
	cmd := exec.Command("sleep", "300")
	if err := startProc(cmd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return -1
	}
	return cmd.Process.Pid
}

// TestChildDiesWithParent: a child of startProc ends when its parent is
// killed with SIGKILL, where no code of the parent runs.
func TestChildDiesWithParent(t *testing.T) {
	parent, fields := startParent(t, "parent")
	child := pidField(t, fields[0])
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	waitGone(t, child)
}

// TestInterruptEndsChildren: SIGINT or SIGTERM to a parent in
// untilInterrupted ends its child, removes its temp dir and exits it
// non-zero.
func TestInterruptEndsChildren(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			parent, fields := startParent(t, "interrupted")
			if len(fields) != 2 {
				t.Fatalf("parent said %q, want a pid and a dir", fields)
			}
			child, dir := pidField(t, fields[0]), fields[1]
			if err := parent.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			exit := make(chan error, 1)
			go func() { exit <- parent.Wait() }()
			select {
			case err := <-exit:
				if parent.ProcessState.ExitCode() == 0 {
					t.Errorf("parent exit: got %v, want non-zero", err)
				}
			case <-time.After(30 * time.Second):
				_ = parent.Process.Kill()
				t.Fatalf("parent still running 30 s after %v", sig)
			}
			// No wait: the parent returned only once its child was gone.
			if !exited(child) {
				_ = syscall.Kill(child, syscall.SIGKILL)
				t.Errorf("child %d: running after its parent exited", child)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temp dir %s: got %v, want it removed", dir, err)
			}
		})
	}
}

// TestChildOutlivesStartingThread: a child started from a goroutine
// that exits locked to its thread, which the runtime then ends, lives
// on: the fork ran on startProc's own thread, so no parent-death signal
// comes (go.dev/issue/27505).
func TestChildOutlivesStartingThread(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread ends with the goroutine
		started <- startProc(cmd)
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if exited(cmd.Process.Pid) {
			t.Fatal("child ended with the thread of the goroutine that started it")
		}
	}
}

// startParent re-executes the test binary in role and returns it with
// the fields of the first line it prints (the child's pid first).
func startParent(t *testing.T, role string) (*exec.Cmd, []string) {
	t.Helper()
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), roleEnv+"="+role)
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("parent said nothing: %v", err)
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		t.Fatal("parent said an empty line")
	}
	return parent, fields
}

// pidField reads a pid the parent printed; on a bad one it fails t.
func pidField(t *testing.T, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		t.Fatalf("parent's child pid: got %q", s)
	}
	return pid
}

// waitGone returns once process pid has exited, or fails t after 10 s
// and kills it.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !exited(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d still running 10 s after its parent was killed", pid)
		}
	}
}
