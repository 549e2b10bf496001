package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

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
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	job := fmt.Sprintf("bench%d", port)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "modelPath: %s\njobName: %s\nnatsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nlogLevel: warn\n",
		model, job, port, filepath.Join(dir, "js"))
	fmt.Fprintf(&cfg, "queueStorage: %s\n", r.storage)
	hp, err := freePort()
	if err != nil {
		return nil, err
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
	if err := c.cmd.Start(); err != nil {
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

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
