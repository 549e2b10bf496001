package bench

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// startWorker starts a `cluster-serving worker` of start's job, with
// keys, joining start's embedded NATS (natsUrl); it returns once the
// worker says it joined. stop ends it as it ends a start.
func (r *runner) startWorker(start *child, model string, keys map[string]string) (*child, error) {
	dir, err := os.MkdirTemp("", "cs-bench-worker-*")
	if err != nil {
		return nil, err
	}
	w := &child{url: start.url, job: start.job, dir: dir, logs: filepath.Join(dir, "stderr")}
	lines := []string{"modelPath: " + model, "jobName: " + start.job, "natsUrl: " + start.url,
		"queueStorage: " + r.storage, "logLevel: warn", "metricsListen: off"}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		lines = append(lines, k+": "+keys[k])
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "stdout")
	stdout, err1 := os.Create(out)
	stderr, err2 := os.Create(w.logs)
	defer stdout.Close() // the worker has its own copies
	defer stderr.Close()
	if err := errors.Join(err1, err2); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	w.cmd = exec.Command(r.bin, "worker", "-c", cfg)
	w.cmd.Stdout, w.cmd.Stderr = stdout, stderr
	w.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir)
	if err := startProc(w.cmd); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return w, w.waitLine(out, "joined", time.Minute)
}

// waitLine waits until file (the child's stdout) holds text, the child
// has exited, or limit passed; the last two stop the child and say why.
func (c *child) waitLine(file, text string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if b, _ := os.ReadFile(file); strings.Contains(string(b), text) {
			return nil
		}
		if exited(c.cmd.Process.Pid) || time.Now().After(deadline) {
			logs, _ := os.ReadFile(c.logs)
			c.stop()
			return fmt.Errorf("%s did not say %q: %s", strings.Join(c.cmd.Args[1:], " "), text, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exited reports whether process pid, our child, has ended (a zombie
// not yet waited for, or gone).
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// scaleCPU is the CPU time of a layout's processes: the start, its extra
// workers summed, and this process (the load's callers, and the trivial
// and stored responders when those rows run).
type scaleCPU struct{ start, workers, bench time.Duration }

// sub is c - o.
func (c scaleCPU) sub(o scaleCPU) scaleCPU {
	return scaleCPU{c.start - o.start, c.workers - o.workers, c.bench - o.bench}
}

// total is every process's CPU.
func (c scaleCPU) total() time.Duration { return c.start + c.workers + c.bench }

// snapScale reads the CPU so far of start, of workers and of this process
// (an unreadable one counts 0).
func snapScale(start *child, workers []*child) scaleCPU {
	var s scaleCPU
	s.start, _ = procCPU(start.cmd.Process.Pid)
	for _, w := range workers {
		cpu, _ := procCPU(w.cmd.Process.Pid)
		s.workers += cpu
	}
	s.bench = selfCPU()
	return s
}
