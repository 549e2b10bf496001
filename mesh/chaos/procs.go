package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process the harness starts, kills and restarts with
// the same command line. Its stdout and stderr go to a log file that grows
// over restarts. Methods are safe for concurrent use.
type Proc struct {
	Name        string
	MetricsPort int // its Prometheus port (metricsListen); 0 if none
	bin         string
	args        []string
	env         []string
	logPath     string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts int
}

// newProc describes a process; Start runs it.
func newProc(name, logDir, bin string, env []string, args ...string) *Proc {
	return &Proc{Name: name, bin: bin, args: args, env: env, logPath: filepath.Join(logDir, name+".log")}
}

// Start runs the process. Setpgid puts it (and anything it forks) in a
// group of its own that Kill signals as a whole; Pdeathsig kills it when
// the test binary dies, even by a go test timeout that runs no cleanup.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !closed(p.done) {
		return fmt.Errorf("%s: already running", p.Name)
	}
	out, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy
	fmt.Fprintf(out, "=== %s start %s\n", time.Now().Format(time.RFC3339Nano), p.Name)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	p.starts++
	return nil
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Pid is the process id of the running process, 0 when none runs.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || closed(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

// Alive says whether the process runs.
func (p *Proc) Alive() bool { return p.Pid() != 0 }

// Kill sends SIGKILL to the process group and waits for the process.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits up to grace, then kills.
func (p *Proc) Stop(grace time.Duration) {
	if !p.signal(syscall.SIGTERM, grace) {
		p.Kill()
	}
}

// signal signals the group and waits up to wait; it says whether the
// process is gone.
func (p *Proc) signal(sig syscall.Signal, wait time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// loggedEveryStart says whether line appears in the log once per start
// so far: a process that logs it when ready has become ready again.
func (p *Proc) loggedEveryStart(line string) bool {
	p.mu.Lock()
	starts := p.starts
	p.mu.Unlock()
	b, err := os.ReadFile(p.logPath)
	return err == nil && strings.Count(string(b), line) >= starts
}

// Restart kills the process if it runs and starts it again.
func (p *Proc) Restart() error {
	p.Kill()
	return p.Start()
}

// Logs returns the last n bytes of the process's log.
func (p *Proc) Logs(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// procSet kills every process it holds, in reverse order of adding.
type procSet struct {
	mu    sync.Mutex
	procs []*Proc
}

func (s *procSet) add(p *Proc) *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = append(s.procs, p)
	return p
}

func (s *procSet) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Kill()
	}
}

// errNotReady is returned when a process does not become ready in time.
var errNotReady = errors.New("chaos: not ready")
