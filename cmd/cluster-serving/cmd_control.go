package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// runDir is the folder of this machine's pid files.
func runDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "cluster-serving")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "cluster-serving", "run")
	}
	return filepath.Join(os.TempDir(), "cluster-serving")
}

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
		_, err = serving.PIDDir(runDir()).Signal(job, sig, timeout, stdout)
		return err
	}
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
	found, err := serving.PIDDir(runDir()).Signal(job, syscall.SIGINT, timeout, stdout)
	if err != nil {
		return err
	}
	again := found[0] // Signal puts start first
	if again.Cmd != "start" && len(found) > 1 {
		fmt.Fprintln(stdout, "stopped several processes; start each again in its own terminal:")
		for _, p := range found {
			fmt.Fprintf(stdout, "  %s\n", shellJoin(append([]string{selfPath(), p.Cmd}, telemetry.RedactArgs(p.Args)...)...))
		}
		return nil
	}
	for _, p := range found[1:] {
		fmt.Fprintf(stdout, "not restarted here (run it again yourself): %s\n", shellJoin(append([]string{selfPath(), p.Cmd}, telemetry.RedactArgs(p.Args)...)...))
	}
	fmt.Fprintf(stdout, "starting again: cluster-serving %s %s\n", again.Cmd, shellJoin(telemetry.RedactArgs(again.Args)...))
	return run(append([]string{again.Cmd}, again.Args...), stdout, stderr)
}

// writePID claims this process's pid file for job in runDir (see
// serving.PIDDir.Claim).
func writePID(job, role string, args []string) (remove func(), err error) {
	return serving.PIDDir(runDir()).Claim(job, role, args)
}
