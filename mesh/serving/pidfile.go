package serving

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// PIDFile records a running serving process (start, worker, bridge, http)
// so that stop, shutdown and restart can find it. `start` owns the job's
// embedded NATS server and ports, so a machine runs one per job, in
// <job>.start.pid. Any number of the other roles may run side by side
// (several workers of one job on one machine is how one fills its cores),
// each in <job>.<role>.<pid>.pid.
type PIDFile struct {
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Cmd  string   `json:"cmd"`
	Job  string   `json:"job"`
}

// PIDDir is the folder of a machine's pid files (cmd picks it: under
// XDG_RUNTIME_DIR, else the user's cache).
type PIDDir string

// PIDRoles are the commands that write a pid file, in the order stop
// signals them.
var PIDRoles = []string{"start", "worker", "bridge", "http"}

// path is where the process of role with pid records itself.
func (d PIDDir) path(job, role string, pid int) string {
	if role == "start" {
		return filepath.Join(string(d), job+".start.pid")
	}
	return filepath.Join(string(d), fmt.Sprintf("%s.%s.%d.pid", job, role, pid))
}

// Claim claims this process's pid file for job, after removing the
// job's stale ones (their process is gone). A `start` is refused while
// another `start` of the job runs here; the other roles always coexist.
// remove deletes the file again, if it is still this process's.
func (d PIDDir) Claim(job, role string, args []string) (remove func(), err error) {
	entries, err := d.Live(job)
	if err != nil {
		return nil, err
	}
	if role == "start" {
		for _, e := range entries {
			if e.Cmd == "start" && e.PID != os.Getpid() {
				return nil, fmt.Errorf("job %q already runs on this machine: `cluster-serving start` is pid %d (args %v). "+
					"Stop it with `cluster-serving stop -job %s` (or kill %d); to add a worker for the job beside it, run `cluster-serving worker`",
					job, e.PID, telemetry.RedactArgs(e.Args), job, e.PID)
			}
		}
	}
	path := d.path(job, role, os.Getpid())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	data, _ := json.Marshal(PIDFile{PID: os.Getpid(), Args: args, Cmd: role, Job: job})
	// Written aside and renamed: another process cleaning stale files
	// must never read a half-written one and delete it. Owner-only: the
	// args may hold a -nats URL with a password.
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".tmp-%d.pid", os.Getpid()))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("pid file: %w", err)
	}
	return func() {
		if cur, err := readPID(path); err == nil && cur.PID == os.Getpid() {
			os.Remove(path)
		}
	}, nil
}

// Live returns the pid files of job's live processes in d, start first,
// and removes those whose process has exited.
func (d PIDDir) Live(job string) ([]PIDFile, error) {
	dir := string(d)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pid files: %w", err)
	}
	var out []PIDFile
	for _, ent := range ents {
		role, ok := pidFileRole(job, ent.Name())
		if !ok {
			continue
		}
		path := filepath.Join(dir, ent.Name())
		p, err := readPID(path)
		if err != nil || !alive(p.PID) {
			os.Remove(path) // stale: its process died without cleaning up
			continue
		}
		p.Cmd = role
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b PIDFile) int {
		return slices.Index(PIDRoles, a.Cmd) - slices.Index(PIDRoles, b.Cmd)
	})
	return out, nil
}

// pidFileRole reports whether name is a pid file of job, and of which
// role: <job>.<role>.pid, or <job>.<role>.<pid>.pid. A job named "a.b"
// is not mistaken for job "a": "b" is no role.
func pidFileRole(job, name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, job+".")
	if !ok {
		return "", false
	}
	rest, ok = strings.CutSuffix(rest, ".pid")
	if !ok {
		return "", false
	}
	role, pid, hasPID := strings.Cut(rest, ".")
	if !slices.Contains(PIDRoles, role) {
		return "", false
	}
	if hasPID {
		if _, err := strconv.Atoi(pid); err != nil {
			return "", false
		}
	}
	return role, true
}

// readPID reads the pid file at path.
func readPID(path string) (PIDFile, error) {
	var p PIDFile
	data, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	err = json.Unmarshal(data, &p)
	return p, err
}

// alive reports whether process pid runs (and may be signalled). A
// zombie, a process that exited and that its parent has not reaped yet
// (a `shutdown` from the parent of the processes it stops, a test
// harness), still takes signals and does not run.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc here: the signal is all there is
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// Signal sends sig to every live process of job in d and waits until
// they all exit, for at most timeout, saying what it does on stdout.
func (d PIDDir) Signal(job string, sig syscall.Signal, timeout time.Duration, stdout io.Writer) ([]PIDFile, error) {
	entries, err := d.Live(job)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("no running process of job %q on this machine (looked in %s)", job, d)
	}
	var found []PIDFile
	for _, e := range entries {
		if err := syscall.Kill(e.PID, sig); err != nil {
			return found, fmt.Errorf("signal %s pid %d: %w", e.Cmd, e.PID, err)
		}
		fmt.Fprintf(stdout, "sent %s to %s of job %q (pid %d)\n", sig, e.Cmd, job, e.PID)
		found = append(found, e)
	}
	deadline := time.Now().Add(timeout)
	for _, p := range found {
		for alive(p.PID) {
			if time.Now().After(deadline) {
				return found, fmt.Errorf("%s pid %d still runs after %s", p.Cmd, p.PID, timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprintf(stdout, "pid %d exited\n", p.PID)
	}
	return found, nil
}
