package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// pidFile records a running `start` or `worker` so that stop, shutdown and
// restart can find it. One per job and role on a machine.
type pidFile struct {
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Cmd  string   `json:"cmd"`
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

func pidPath(job, cmd string) string { return filepath.Join(runDir(), job+"."+cmd+".pid") }

// writePID claims the pid file of job; it refuses when a live process holds it.
func writePID(job, cmd string, args []string) (remove func(), err error) {
	path := pidPath(job, cmd)
	if old, err := readPID(path); err == nil && alive(old.PID) {
		return nil, fmt.Errorf("job %q already runs as pid %d (stop it with `cluster-serving stop`)", job, old.PID)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	data, _ := json.Marshal(pidFile{PID: os.Getpid(), Args: args, Cmd: cmd})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	return func() {
		if cur, err := readPID(path); err == nil && cur.PID == os.Getpid() {
			os.Remove(path)
		}
	}, nil
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

func signalJob(job string, sig syscall.Signal, timeout time.Duration, stdout io.Writer) ([]pidFile, error) {
	var found []pidFile
	for _, cmd := range []string{"start", "worker", "bridge", "http"} {
		p, err := readPID(pidPath(job, cmd))
		if err != nil || !alive(p.PID) {
			continue
		}
		if err := syscall.Kill(p.PID, sig); err != nil {
			return found, fmt.Errorf("signal pid %d: %w", p.PID, err)
		}
		fmt.Fprintf(stdout, "sent %s to %s of job %q (pid %d)\n", sig, cmd, job, p.PID)
		found = append(found, p)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no running process of job %q on this machine (looked in %s)", job, runDir())
	}
	deadline := time.Now().Add(timeout)
	for _, p := range found {
		for alive(p.PID) {
			if time.Now().After(deadline) {
				return found, fmt.Errorf("pid %d still runs after %s", p.PID, timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprintf(stdout, "pid %d exited\n", p.PID)
	}
	return found, nil
}

// cmdRestart stops the job's start process, then runs `start` again with the
// arguments it had, in the foreground of this process.
func cmdRestart(args []string, stdout, stderr io.Writer) error {
	job, timeout, err := controlFlags("restart", args, stderr)
	if err != nil {
		return err
	}
	found, err := signalJob(job, syscall.SIGINT, timeout, stdout)
	if err != nil {
		return err
	}
	for _, p := range found {
		if p.Cmd == "start" {
			fmt.Fprintf(stdout, "starting again: cluster-serving start %v\n", p.Args)
			return run(append([]string{"start"}, p.Args...), stdout, stderr)
		}
	}
	return errors.New("no start process was running; start it with `cluster-serving start`")
}
