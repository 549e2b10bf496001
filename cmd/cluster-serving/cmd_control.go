package main

import (
	"encoding/json"
	"errors"
	"flag"
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

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// pidFile records a running serving process (start, worker, bridge, http)
// so that stop, shutdown and restart can find it. `start` owns the job's
// embedded NATS server and ports, so a machine runs one per job, in
// <job>.start.pid. Any number of the other roles may run side by side
// (several workers of one job on one machine is how one fills its cores),
// each in <job>.<role>.<pid>.pid.
type pidFile struct {
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Cmd  string   `json:"cmd"`
	Job  string   `json:"job"`
}

// pidEntry is a pid file found on disk.
type pidEntry struct {
	path string
	pidFile
}

func runDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "cluster-serving")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "cluster-serving", "run")
	}
	return filepath.Join(os.TempDir(), "cluster-serving")
}

// serveRoles are the commands that write a pid file, in the order stop
// signals them.
var serveRoles = []string{"start", "worker", "bridge", "http"}

// pidPath is where the process of role with pid records itself.
func pidPath(job, role string, pid int) string {
	if role == "start" {
		return filepath.Join(runDir(), job+".start.pid")
	}
	return filepath.Join(runDir(), fmt.Sprintf("%s.%s.%d.pid", job, role, pid))
}

// writePID claims this process's pid file for job, after removing the
// job's stale ones (their process is gone). A `start` is refused while
// another `start` of the job runs here; the other roles always coexist.
// remove deletes the file again, if it is still this process's.
func writePID(job, role string, args []string) (remove func(), err error) {
	entries, err := jobPIDs(job)
	if err != nil {
		return nil, err
	}
	if role == "start" {
		for _, e := range entries {
			if e.Cmd == "start" && e.PID != os.Getpid() {
				return nil, fmt.Errorf("job %q already runs on this machine: `cluster-serving start` is pid %d (args %v). "+
					"Stop it with `cluster-serving stop -job %s` (or kill %d); to add a worker for the job beside it, run `cluster-serving worker`",
					job, e.PID, redactArgs(e.Args), job, e.PID)
			}
		}
	}
	path := pidPath(job, role, os.Getpid())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	data, _ := json.Marshal(pidFile{PID: os.Getpid(), Args: args, Cmd: role, Job: job})
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

// jobPIDs returns the pid files of job's live processes on this machine,
// start first, and removes those whose process has exited.
func jobPIDs(job string) ([]pidEntry, error) {
	dir := runDir()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pid files: %w", err)
	}
	var out []pidEntry
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
		out = append(out, pidEntry{path, p})
	}
	slices.SortStableFunc(out, func(a, b pidEntry) int {
		return slices.Index(serveRoles, a.Cmd) - slices.Index(serveRoles, b.Cmd)
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
	if !slices.Contains(serveRoles, role) {
		return "", false
	}
	if hasPID {
		if _, err := strconv.Atoi(pid); err != nil {
			return "", false
		}
	}
	return role, true
}

func readPID(path string) (pidFile, error) {
	var p pidFile
	data, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	err = json.Unmarshal(data, &p)
	return p, err
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// controlFlags are the flags of stop, shutdown and restart: which job.
func controlFlags(name string, args []string, stderr io.Writer) (job string, wait time.Duration, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("c", "", "config.yaml of the job (its jobName picks the process)")
	jobFlag := fs.String("job", "", "job name (default: jobName of -c, else "+mesh.DefaultJob+")")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the process to exit")
	if err := fs.Parse(args); err != nil {
		return "", 0, err
	}
	job = *jobFlag
	if job == "" && *cfgPath != "" {
		cfg, err := serving.LoadFile(*cfgPath)
		if err != nil {
			return "", 0, err
		}
		job = cfg.JobName
	}
	if job == "" {
		job = mesh.DefaultJob
	}
	return job, *timeout, nil
}

// signalCommand is `stop` or `shutdown`: it sends sig to the job's
// processes on this machine (start, worker, bridge, http) and waits until
// they exit.
func signalCommand(sig syscall.Signal, name string) func([]string, io.Writer, io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		job, timeout, err := controlFlags(name, args, stderr)
		if err != nil {
			return err
		}
		_, err = signalJob(job, sig, timeout, stdout)
		return err
	}
}

// signalJob sends sig to every live process of job on this machine and
// waits until they all exit, for at most timeout.
func signalJob(job string, sig syscall.Signal, timeout time.Duration, stdout io.Writer) ([]pidFile, error) {
	entries, err := jobPIDs(job)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("no running process of job %q on this machine (looked in %s)", job, runDir())
	}
	var found []pidFile
	for _, e := range entries {
		if err := syscall.Kill(e.PID, sig); err != nil {
			return found, fmt.Errorf("signal %s pid %d: %w", e.Cmd, e.PID, err)
		}
		fmt.Fprintf(stdout, "sent %s to %s of job %q (pid %d)\n", sig, e.Cmd, job, e.PID)
		found = append(found, e.pidFile)
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

// cmdRestart stops every process of the job on this machine, then runs
// `start` again with the arguments it had, in the foreground of this
// process. Without a start among them, it runs the one stopped process
// again, or, when it stopped several (workers side by side), prints their
// command lines: one foreground cannot hold them all.
func cmdRestart(args []string, stdout, stderr io.Writer) error {
	job, timeout, err := controlFlags("restart", args, stderr)
	if err != nil {
		return err
	}
	found, err := signalJob(job, syscall.SIGINT, timeout, stdout)
	if err != nil {
		return err
	}
	again := found[0] // jobPIDs puts start first
	if again.Cmd != "start" && len(found) > 1 {
		fmt.Fprintln(stdout, "stopped several processes; start each again in its own terminal:")
		for _, p := range found {
			fmt.Fprintf(stdout, "  %s\n", shellJoin(append([]string{selfPath(), p.Cmd}, redactArgs(p.Args)...)...))
		}
		return nil
	}
	for _, p := range found[1:] {
		fmt.Fprintf(stdout, "not restarted here (run it again yourself): %s\n", shellJoin(append([]string{selfPath(), p.Cmd}, redactArgs(p.Args)...)...))
	}
	fmt.Fprintf(stdout, "starting again: cluster-serving %s %s\n", again.Cmd, shellJoin(redactArgs(again.Args)...))
	return run(append([]string{again.Cmd}, again.Args...), stdout, stderr)
}

// redactArgs is args as printed: the password of a URL (-nats) redacted.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.Contains(a, "://") {
			out[i] = telemetry.RedactURL(a)
		}
	}
	return out
}
