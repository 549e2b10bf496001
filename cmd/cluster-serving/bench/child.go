package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// child is a `cluster-serving start` process serving one model.
type child struct {
	cmd     *exec.Cmd
	url     string
	httpURL string
	job     string
	dir     string // removed by stop
	logs    string // the child's stderr, a file in dir
}

func (r *runner) startChild(model string, extra map[string]string) (*child, error) {
	dir, err := os.MkdirTemp("", "cs-bench-*")
	if err != nil {
		return nil, err
	}
	ports, err := freeport.Take(2) // NATS, HTTP
	if err != nil {
		return nil, err
	}
	port, hp := ports[0], ports[1]
	job := fmt.Sprintf("bench%d", port)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "modelPath: %s\njobName: %s\nnatsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nlogLevel: warn\n",
		model, job, port, filepath.Join(dir, "js"))
	if _, ok := extra["queueStorage"]; !ok {
		fmt.Fprintf(&cfg, "queueStorage: %s\n", r.storage)
	}
	if _, ok := extra["natsSync"]; !ok && r.sync != "" {
		fmt.Fprintf(&cfg, "natsSync: %s\n", r.sync)
	}
	fmt.Fprintf(&cfg, "httpInterface: 127.0.0.1\nhttpPort: %d\n", hp)
	if _, ok := extra["metricsListen"]; !ok {
		cfg.WriteString("metricsListen: off\n")
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		fmt.Fprintf(&cfg, "%s: %s\n", k, extra[k])
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	c := &child{url: fmt.Sprintf("nats://127.0.0.1:%d", port), httpURL: fmt.Sprintf("http://127.0.0.1:%d", hp), job: job, dir: dir,
		logs: filepath.Join(dir, "stderr")}
	logs, err := os.Create(c.logs)
	if err != nil {
		return nil, err
	}
	defer logs.Close() // the child has its own copy
	c.cmd = exec.Command(r.bin, "start", "-c", cfgPath)
	c.cmd.Stdout = io.Discard
	c.cmd.Stderr = logs
	c.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir)
	if err := startProc(c.cmd); err != nil {
		return nil, err
	}
	// Ready when the predict endpoint answers a ping of the micro service.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		nc, err := nats.Connect(c.url)
		if err == nil {
			_, err = nc.Request("$SRV.PING."+mesh.ServiceName, nil, time.Second)
			nc.Close()
			if err == nil {
				return c, nil
			}
		}
		if time.Now().After(deadline) || c.cmd.ProcessState != nil {
			logs, _ := os.ReadFile(c.logs)
			c.stop()
			return nil, fmt.Errorf("child did not become ready: %v\n%s", err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *child) stop() {
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(c.dir)
}

// rssKiB reads VmRSS of the child from /proc.
func (c *child) rssKiB() (int, error) { return c.status("VmRSS") }

// peakRSSKiB reads VmHWM of the child from /proc: its peak RSS so far.
func (c *child) peakRSSKiB() (int, error) { return c.status("VmHWM") }

// status reads one kB field of /proc/<pid>/status of the child.
func (c *child) status(field string) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.Atoi(strings.Fields(rest)[0])
		}
	}
	return 0, errors.New("no " + field + " in /proc/<pid>/status")
}

// cpuTicks is the child's user+system CPU time so far, in clock ticks.
func (c *child) cpuTicks() (int64, error) { return cpuTicks(c.cmd.Process.Pid) }

// cpuTicks is process pid's user+system CPU time so far, in clock ticks
// (fields 14 and 15 of /proc/<pid>/stat).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, may hold spaces: count after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("short /proc/<pid>/stat: %q", b)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return u + s, nil
}

// waitIdle returns once the child has used less than 5% of one core over
// a quarter of a second (at most after limit): the requests a load run
// left queued when it stopped are done, so they do not run into the
// next measurement.
func (c *child) waitIdle(limit time.Duration) error {
	const every = 250 * time.Millisecond
	deadline := time.Now().Add(limit)
	prev, err := c.cpuTicks()
	if err != nil {
		return err
	}
	for time.Now().Before(deadline) {
		time.Sleep(every)
		now, err := c.cpuTicks()
		if err != nil {
			return err
		}
		// Clock ticks are 1/100 s on Linux (USER_HZ): 5% of 250 ms is 1.25.
		if now-prev <= 1 {
			return nil
		}
		prev = now
	}
	return fmt.Errorf("the serving process was still busy %s after the load stopped", limit)
}
