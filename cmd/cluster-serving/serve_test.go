package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// These tests run the real binary: `cluster-serving start` with its embedded
// NATS server and a second `cluster-serving worker` process joining it, on
// the real ONNX Runtime library and a generated model (infer/testdata).

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cs-bin-*")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cluster-serving")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func requireORT(t testing.TB) string { return infertest.RequireLibrary(t) }

type proc struct {
	cmd  *exec.Cmd
	out  string // the file of its stdout and stderr
	done chan struct{}
}

func (p *proc) logs() string {
	b, _ := os.ReadFile(p.out)
	return string(b)
}

// freePorts asks the kernel for n distinct free loopback ports (see
// infertest.FreePorts).
func freePorts(t testing.TB, n int) []int { return infertest.FreePorts(t, n) }

// writeFile writes data to path (a config, a token file, a model) or
// fails the test, and returns path.
func writeFile[D string | []byte](t testing.TB, path string, data D, perm os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	return path
}

// skipIfShort skips, under go test -short, a test that spawns the binary.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("spawns processes")
	}
}

// spawn runs the binary with args; it is killed at cleanup if still running.
func spawn(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{out: filepath.Join(t.TempDir(), "out"), done: make(chan struct{})}
	out, err := os.Create(p.out)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the process has its own copy
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = out
	p.cmd.Stdout = out
	p.cmd.Env = append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("logs of %v:\n%s", args, p.logs())
		}
	})
	return p
}

func (p *proc) signalAndWait(t *testing.T, sig syscall.Signal) {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("process did not exit after %v", sig)
	}
}

// testJob writes a config for the add_f32 model (y = 2x + 1) and returns its path.
func testJob(t *testing.T, extra string) (cfgPath, url, job string, env []string) {
	t.Helper()
	return testJobModel(t, "add_f32.onnx", extra)
}

// testJobModel writes a config for the model file of infer/testdata and
// returns its path, its NATS URL, its job and the env its processes need
// (a pid file directory of the test's own).
func testJobModel(t *testing.T, modelFile, extra string) (cfgPath, url, job string, env []string) {
	t.Helper()
	requireORT(t)
	dir := t.TempDir()
	ports := freePorts(t, 2)
	port := ports[0]
	model, err := filepath.Abs("../../infer/testdata/" + modelFile)
	if err != nil {
		t.Fatal(err)
	}
	job = "t" + strconv.Itoa(port)
	if !strings.Contains(extra, "httpPort:") {
		// start serves HTTP by default on 10020: keep tests off that port.
		hp := ports[1]
		extra += fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d\n", hp)
	}
	if !strings.Contains(extra, "metricsListen:") {
		extra += "metricsListen: off\n" // tests run side by side: no shared port
	}
	cfg := fmt.Sprintf("modelPath: %s\njobName: %s\nnatsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nthreadPerModel: 1\n%s",
		model, job, port, filepath.Join(dir, "js"), extra)
	cfgPath = filepath.Join(dir, "config.yaml")
	writeFile(t, cfgPath, cfg, 0o644)
	return cfgPath, fmt.Sprintf("nats://127.0.0.1:%d", port), job, []string{"XDG_RUNTIME_DIR=" + dir}
}

// waitReady waits until the job's mesh service answers a ping over a
// connection made with opts (credentials, for a server that asks), and
// returns that connection.
func waitReady(t *testing.T, url string, p *proc, opts ...nats.Option) *nats.Conn {
	t.Helper()
	var nc *nats.Conn
	waitProc(t, p, 60*time.Second, "the mesh service", func() bool {
		c, err := nats.Connect(url, opts...)
		if err != nil {
			return false
		}
		if _, err := c.Request("$SRV.PING."+mesh.ServiceName, nil, time.Second); err != nil {
			c.Close()
			return false
		}
		nc = c
		return true
	})
	t.Cleanup(nc.Close)
	return nc
}

// waitProc polls cond every 20ms until it holds; it fails the test, with
// p's logs, when p exits first or cond still does not hold after d.
func waitProc(t *testing.T, p *proc, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("process exited before %s:\n%s", what, p.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s:\n%s", d, what, p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// predictAdd sends x and checks the answer is 2x+1, as ONNX Runtime computes it
// for add_f32 (checked against a direct session run in infer's tests).
func predictAdd(nc *nats.Conn, job string, x [4]float32, timeout time.Duration) error {
	body := fmt.Sprintf(`{"instances":[{"x":[%g,%g,%g,%g]}]}`, x[0], x[1], x[2], x[3])
	reply, err := nc.Request(mesh.PredictSubject(job), []byte(body), timeout)
	if err != nil {
		return err
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		return fmt.Errorf("error %s: %s", code, reply.Header.Get("Nats-Service-Error"))
	}
	got, err := decodePrediction(reply.Data)
	if err != nil {
		return err
	}
	for i := range x {
		if want := 2*x[i] + 1; got[i] != want {
			return fmt.Errorf("x=%v: got %v, want element %d = %v", x, got, i, want)
		}
	}
	return nil
}

// decodePrediction unwraps {"predictions":["{\"value\":\"{\\\"data\\\":...}\"}"]}.
func decodePrediction(body []byte) ([]float32, error) {
	var resp struct{ Predictions []string }
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Predictions) != 1 {
		return nil, fmt.Errorf("reply %s: %v", body, err)
	}
	var v struct{ Value string }
	if err := json.Unmarshal([]byte(resp.Predictions[0]), &v); err != nil {
		return nil, fmt.Errorf("prediction %s: %v", resp.Predictions[0], err)
	}
	var t struct {
		Data  []float32
		Shape []int
	}
	if err := json.Unmarshal([]byte(v.Value), &t); err != nil {
		return nil, fmt.Errorf("value %s: %v", v.Value, err)
	}
	return t.Data, nil
}

var processedRE = regexp.MustCompile(`processed=(\d+)`)

func processed(t *testing.T, p *proc) int {
	m := processedRE.FindAllStringSubmatch(p.logs(), -1)
	if len(m) == 0 {
		t.Fatalf("no processed= line in logs:\n%s", p.logs())
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// startAndWorker runs `start` and a second `worker` process of one job and
// returns them with a caller connection once both serve.
func startAndWorker(t *testing.T, extra string) (start, worker *proc, nc *nats.Conn, job string) {
	t.Helper()
	cfg, url, job, env := testJob(t, extra)
	start = spawn(t, env, "start", "-c", cfg)
	nc = waitReady(t, url, start)
	worker = spawn(t, env, "worker", "-c", cfg, "-nats", url)
	waitLog(t, worker, "joined")
	return start, worker, nc, job
}

// sendAdds sends total add_f32 requests (x built from the request number
// by input) from conc goroutines, reports each wrong or missing answer as
// a test error, and counts answers in answered.
func sendAdds(t *testing.T, nc *nats.Conn, job string, total, conc int, timeout time.Duration,
	input func(i float32) [4]float32, answered *atomic.Int64) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				if err := predictAdd(nc, job, input(float32(i)), timeout); err != nil {
					t.Errorf("request %d: %v", i, err)
				}
				answered.Add(1)
			}
		})
	}
	wg.Wait()
}

func TestStartAndSecondWorkerShareTheLoad(t *testing.T) {
	skipIfShort(t)
	start, worker, nc, job := startAndWorker(t, "")
	const total = 1000
	var answered atomic.Int64
	sendAdds(t, nc, job, total, 32, 30*time.Second, func(f float32) [4]float32 { return [4]float32{f, -f, f / 4, 0.5} }, &answered)
	worker.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
	a, b := processed(t, start), processed(t, worker)
	t.Logf("start served %d, worker served %d", a, b)
	if a+b != total {
		t.Errorf("got %d+%d = %d served, want %d (each exactly once)", a, b, a+b, total)
	}
	if a == 0 || b == 0 {
		t.Errorf("got start=%d worker=%d, want both to serve", a, b)
	}
}

func waitLog(t *testing.T, p *proc, s string) {
	t.Helper()
	waitProc(t, p, 60*time.Second, fmt.Sprintf("%q in its logs", s), func() bool { return strings.Contains(p.logs(), s) })
}

func TestWorkerKilledMidBatchLosesNothing(t *testing.T) {
	skipIfShort(t)
	// A short ackWait so that the killed worker's messages come back quickly.
	start, worker, nc, job := startAndWorker(t, "ackWait: 1500\n")
	const total = 600
	var answered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		sendAdds(t, nc, job, total, 64, 60*time.Second, func(f float32) [4]float32 { return [4]float32{f, 1, 2, 3} }, &answered)
	}()
	// Kill the worker hard while requests are in flight.
	for answered.Load() < total/4 {
		time.Sleep(time.Millisecond)
	}
	_ = worker.cmd.Process.Kill()
	<-worker.done
	<-done
	if got := answered.Load(); got != total {
		t.Errorf("got %d answers, want %d", got, total)
	}
	start.signalAndWait(t, syscall.SIGTERM)
}

func TestStopCommands(t *testing.T) {
	skipIfShort(t)
	cfg, url, job, env := testJob(t, "")
	start := spawn(t, env, "start", "-c", cfg)
	nc := waitReady(t, url, start)
	if err := predictAdd(nc, job, [4]float32{1, 2, 3, 4}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// A second start of the same job is refused while the first runs.
	dup := spawn(t, env, "start", "-c", cfg)
	<-dup.done
	for _, want := range []string{"already runs", fmt.Sprintf("pid %d", start.cmd.Process.Pid), "cluster-serving stop -job " + job, "cluster-serving worker"} {
		if !strings.Contains(dup.logs(), want) {
			t.Errorf("second start: got %q, want an error saying %q", dup.logs(), want)
		}
	}
	sd := spawn(t, env, "shutdown", "-c", cfg)
	<-sd.done
	if sd.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("shutdown failed:\n%s", sd.logs())
	}
	select {
	case <-start.done:
	case <-time.After(30 * time.Second):
		t.Fatal("start still runs after shutdown")
	}
	if !strings.Contains(start.logs(), "stopped") {
		t.Errorf("no 'stopped' line in logs:\n%s", start.logs())
	}
}

func TestInitWritesAConfigThatStarts(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "config.yaml")
	var so, se bytes.Buffer
	if err := run([]string{"init", "-o", out, "-model", "/m"}, &so, &se); err != nil {
		t.Fatal(err)
	}
	cfg, err := serving.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ModelPath != "/m" {
		t.Errorf("got modelPath %q, want /m", cfg.ModelPath)
	}
	if err := run([]string{"init", "-o", out}, &so, &se); err == nil {
		t.Error("init over an existing file: got no error, want one")
	}
}
