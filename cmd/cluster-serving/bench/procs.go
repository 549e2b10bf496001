package bench

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
)

// errInterrupted is what Main returns when SIGINT or SIGTERM ended the
// run; every process it started has ended by then.
var errInterrupted = errors.New("bench: interrupted")

// startProc starts cmd as a child that ends with the bench: on Linux it
// gets the parent-death signal (dieWithParent), and children.endAll can
// kill it. Every process the bench starts goes through here. It is safe
// for concurrent use; after children.endAll(true) it returns
// errInterrupted and starts nothing.
//
// The kernel sends the parent-death signal when the *thread* that forked
// the child exits, not the process (go.dev/issue/27505). The runtime ends
// a thread whenever a goroutine locked to it returns without unlocking,
// which any code in the process, a library's included, may do; so a
// child forked on an arbitrary thread could be killed at a random moment.
// Every fork therefore runs on forkThread, one goroutine locked to its
// thread for the life of the process, whose thread never exits before it.
func startProc(cmd *exec.Cmd) error {
	dieWithParent(cmd)
	forkOnce.Do(func() { go forkThread() })
	q := forkReq{cmd: cmd, err: make(chan error, 1)}
	forkReqs <- q
	return <-q.err
}

// combinedOutput is cmd.CombinedOutput, started through startProc.
func combinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := startProc(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return b.Bytes(), err
}

// forkReq asks forkThread to start cmd; the result goes to err.
type forkReq struct {
	cmd *exec.Cmd
	err chan error
}

var (
	forkOnce sync.Once
	forkReqs = make(chan forkReq)
)

// forkThread starts every child of the bench, from one OS thread: it
// locks its goroutine to the thread and never unlocks nor returns, so
// the thread lives as long as the process (see startProc).
func forkThread() {
	runtime.LockOSThread()
	for q := range forkReqs {
		q.err <- children.start(q.cmd)
	}
}

// children is every process the bench started and has not waited for.
var children procSet

// procSet is a set of started processes that can all be ended at once,
// and then refuse new ones. It is safe for concurrent use.
type procSet struct {
	mu     sync.Mutex
	closed bool
	procs  []*os.Process
}

// start starts cmd and adds it, unless the set is closed.
func (s *procSet) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errInterrupted
	}
	// Forget the processes someone waited for: they are done, and a pid
	// freed by Wait may belong to another process by now.
	s.procs = slices.DeleteFunc(s.procs, waited)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.procs = append(s.procs, cmd.Process)
	return nil
}

// endAll kills every process of the set still running and returns once
// they have exited (at most after 5 s). With refuse, the set closes:
// later starts fail, as the bench is on its way out.
//
// SIGKILL, not SIGTERM first: an interrupted run keeps nothing from its
// children (their state lives in the run's temp dir, removed next), and a
// graceful stop of `start` could take its drain timeout or hang, while
// SIGKILL can be neither caught nor delayed.
func (s *procSet) endAll(refuse bool) {
	s.mu.Lock()
	s.closed = s.closed || refuse
	var killed []*os.Process
	for _, p := range s.procs {
		if p.Signal(syscall.SIGKILL) == nil {
			killed = append(killed, p)
		}
	}
	s.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range killed {
		for !waited(p) && !exited(p.Pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waited reports whether p was waited for (by cmd.Wait, anywhere).
func waited(p *os.Process) bool {
	return errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}
