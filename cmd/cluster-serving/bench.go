package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// cmdBench prints the figures of the closing notes from one run: every
// serving figure comes with a baseline measured in the same run on the same
// machine, and the ratio between them.
//
// Serving is measured against a child `cluster-serving start` process (the
// real binary, embedded NATS, one worker), so its resident memory can be read
// too; the load generator runs in this process.
func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	resnet := fs.String("resnet", "", "ResNet-50-shaped model (make bench generates it)")
	tiny := fs.String("tiny", "infer/testdata/add_f32.onnx", "tiny model (a few µs per call)")
	dur := fs.Duration("d", 10*time.Second, "how long each throughput run lasts")
	batch := fs.Int("batch", 8, "maxBatch for ResNet-50, and the raw baseline's batch size")
	threads := fs.Int("threads", 0, "intra-op threads (0: all cores)")
	soakSize := fs.Int("soak-size", 64, "image side of the memory soak requests (the model takes any H×W; 224 is the full size)")
	soakN := fs.Int("soak", 10000, "requests of the memory soak (RSS read at 1,000 and at this count)")
	storage := fs.String("storage", "file", "queueStorage of the serving process: file or memory")
	only := fs.String("only", "", "run only these parts, comma-separated: tiny,redis,resnet,memory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	want := func(part string) bool { return *only == "" || slices.Contains(strings.Split(*only, ","), part) }
	benchStorage = *storage
	if *threads == 0 {
		*threads = runtimeCores()
	}
	lib, err := infer.FindLibrary("", os.Getenv("ONNXRUNTIME_LIB"))
	if err != nil {
		return err
	}
	if err := infer.Init(lib); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster-serving bench — %d cores, %d intra-op threads, GOMAXPROCS default\n\n", runtimeCores(), *threads)

	if want("tiny") {
		if err := benchTiny(stdout, bin, *tiny, *dur); err != nil {
			return fmt.Errorf("tiny model: %w", err)
		}
	}
	if want("redis") {
		if err := benchRedisTiny(stdout, bin, *tiny, *dur); err != nil {
			return fmt.Errorf("redis door: %w", err)
		}
	}
	if want("resnet") || want("memory") {
		if *resnet == "" {
			return errors.New("-resnet is required (make bench generates the model)")
		}
	}
	if want("resnet") {
		// Three times longer: at ~20 images/s a run of d counts only ~25 batches.
		if err := benchResNet(stdout, bin, *resnet, 3**dur, *batch, *threads); err != nil {
			return fmt.Errorf("resnet: %w", err)
		}
	}
	if want("memory") {
		if err := benchMemory(stdout, bin, *resnet, *batch, *threads, *soakSize, *soakN); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	return nil
}

func runtimeCores() int { return runtime.NumCPU() }

// benchStorage is the queueStorage every child process gets.
var benchStorage = "file"

// child is a `cluster-serving start` process serving one model.
type child struct {
	cmd     *exec.Cmd
	url     string
	httpURL string
	job     string
	dir     string
	logs    *bytes.Buffer
}

func startChild(bin, model string, extra map[string]string) (*child, error) {
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
	fmt.Fprintf(&cfg, "queueStorage: %s\n", benchStorage)
	hp, err := freePort()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&cfg, "httpInterface: 127.0.0.1\nhttpPort: %d\nmetricsListen: off\n", hp)
	for k, v := range extra {
		fmt.Fprintf(&cfg, "%s: %s\n", k, v)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	c := &child{url: fmt.Sprintf("nats://127.0.0.1:%d", port), httpURL: fmt.Sprintf("http://127.0.0.1:%d", hp), job: job, dir: dir, logs: &bytes.Buffer{}}
	c.cmd = exec.Command(bin, "start", "-c", cfgPath)
	c.cmd.Stdout = io.Discard
	c.cmd.Stderr = &lockedWriter{w: c.logs}
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
			c.stop()
			return nil, fmt.Errorf("child did not become ready: %v\n%s", err, c.logs)
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
func (c *child) rssKiB() (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.Atoi(strings.Fields(rest)[0])
		}
	}
	return 0, errors.New("no VmRSS")
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// imageRequest is one {"instances":[{"input": 3×h×w}]} with 0–255 values,
// like pixels: the realistic size of a JSON image request.
func imageRequest(name string, h, w int) []byte {
	var b bytes.Buffer
	b.Grow(3 * h * w * 4)
	fmt.Fprintf(&b, `{"instances":[{%q:`, name)
	r := rand.New(rand.NewPCG(1, 2))
	b.WriteByte('[')
	for c := range 3 {
		if c > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for y := range h {
			if y > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			for x := range w {
				if x > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Itoa(r.IntN(256)))
			}
			b.WriteByte(']')
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}]}`)
	return b.Bytes()
}

func rawThroughput(model string, batch, threads, h, w int, d time.Duration) (float64, error) {
	sess, err := infer.NewSession(model, threads)
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	data := make([]float32, batch*3*h*w)
	for i := range data {
		data[i] = float32(i % 256)
	}
	in := []infer.Tensor{{DType: infer.Float32, Shape: []int64{int64(batch), 3, int64(h), int64(w)}, Data: data}}
	if _, err := sess.Run(in); err != nil { // warm-up
		return 0, err
	}
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		if _, err := sess.Run(in); err != nil {
			return 0, err
		}
		n += batch
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func benchMemory(w io.Writer, bin, model string, batch, threads, size, total int) error {
	c, err := startChild(bin, model, map[string]string{
		"threadPerModel": strconv.Itoa(threads), "modelParallelism": "1", "maxBatch": strconv.Itoa(batch)})
	if err != nil {
		return err
	}
	defer c.stop()
	body := imageRequest("input", size, size)
	do, closeDo, err := natsOp(c.url, mesh.PredictSubject(c.job), body)
	if err != nil {
		return err
	}
	defer closeDo()
	fmt.Fprintf(w, "== memory of `cluster-serving start` serving the ResNet-50-shaped model (requests 3×%d×%d)\n", size, size)
	start := time.Now()
	r1 := runLoad(2*batch, time.Hour, 1000, do)
	rss1, err := c.rssKiB()
	if err != nil {
		return err
	}
	r2 := runLoad(2*batch, time.Hour, total-1000, do)
	rss2, err := c.rssKiB()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "RSS after %6d requests: %7.1f MiB\n", r1.n, float64(rss1)/1024)
	fmt.Fprintf(w, "RSS after %6d requests: %7.1f MiB\n", r1.n+r2.n, float64(rss2)/1024)
	fmt.Fprintf(w, "growth: %+.2f%% (target <= 5%%); errors %d; %s\n\n", 100*(float64(rss2)/float64(rss1)-1), r1.errs+r2.errs, time.Since(start).Round(time.Second))
	return nil
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
