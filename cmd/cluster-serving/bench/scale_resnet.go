package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// scaleResNet measures, for each worker count n of p, one `start` serving
// the ResNet-50-shaped model with n sessions of one intra-op thread each
// (modelParallelism n, maxBatch 1) through the NATS door with JSON images
// at 2n callers, then n raw ONNX Runtime processes of one thread each,
// side by side: n processes, not n sessions in one, as the serving side's
// sessions share nothing either. A count that fails gets its row's note.
// Runs last 2 × p.d: at ~10 images/s per worker a run of 5 s counts ~50
// images of one worker, the base of every speed-up (on 16 cores it read
// 0.80 × raw where 2 workers read 1.06).
func (r *runner) scaleResNet(p scalePlan) []resNetScaleRow {
	t0, d := time.Now(), 2*p.d
	body := imageRequest(resNetInput, 224, 224)
	var rows []resNetScaleRow
	for _, n := range p.workers {
		row := resNetScaleRow{workers: n}
		res, err := r.resNetServing(p.resnet, n, body, d)
		if err == nil {
			row.serving, row.p50, row.errs = res.rate(), res.pct(0.5), res.errs
			row.raw, err = r.rawProcesses(p.resnet, n, d)
		}
		if err != nil {
			row.note = notMeasured(err)
		}
		rows = append(rows, row)
		r.progress(t0, "ResNet-50, %2d workers: serving %.2f images/s, raw %d processes %.2f images/s %s",
			n, row.serving, n, row.raw, row.note)
	}
	return rows
}

// resNetServing runs one start with n one-thread sessions of model and
// loads its NATS door with body at 2n callers for d, after a warm-up
// that gives every session its first (slow) run.
func (r *runner) resNetServing(model string, n int, body []byte, d time.Duration) (loadResult, error) {
	c, err := r.startChild(model, map[string]string{
		"threadPerModel": "1", "modelParallelism": strconv.Itoa(n), "maxBatch": "1"})
	if err != nil {
		return loadResult{}, err
	}
	defer c.stop()
	do, closeDo, err := natsOp(c.url, mesh.PredictSubject(c.job), body)
	if err != nil {
		return loadResult{}, err
	}
	defer closeDo()
	if w := runLoad(2*n, 2*time.Minute, 4*n, do); w.errs > 0 || w.n == 0 {
		return loadResult{}, fmt.Errorf("warm-up: %d answered, last error %v", w.n, w.lastErr)
	}
	if err := c.waitIdle(time.Minute); err != nil {
		return loadResult{}, err
	}
	return runLoad(2*n, d, 0, do), nil
}

// rawProcesses runs n processes of this binary's hidden part rawchild
// (one thread, batch 1) on model: each loads and warms up, says ready,
// and all start their run of d together; it returns their images/s
// summed.
func (r *runner) rawProcesses(model string, n int, d time.Duration) (float64, error) {
	type proc struct {
		cmd    *exec.Cmd
		in     io.WriteCloser
		out    *bufio.Scanner
		stderr bytes.Buffer
	}
	procs := make([]*proc, 0, n)
	defer func() {
		for _, p := range procs {
			p.in.Close()
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	for range n {
		p := &proc{cmd: exec.Command(r.bin, "bench", "-only", "rawchild", "-resnet", model, "-threads", "1", "-batch", "1", "-d", d.String())}
		p.cmd.Stderr = &p.stderr
		var err error
		if p.in, err = p.cmd.StdinPipe(); err != nil {
			return 0, err
		}
		out, err := p.cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		p.out = bufio.NewScanner(out)
		if err := startProc(p.cmd); err != nil {
			return 0, err
		}
		procs = append(procs, p)
	}
	readLine := func(p *proc, prefix string) (string, error) {
		if !p.out.Scan() || !strings.HasPrefix(p.out.Text(), prefix) {
			return "", fmt.Errorf("raw ONNX Runtime process: no %q line: %s", prefix, strings.TrimSpace(p.stderr.String()))
		}
		return strings.TrimSpace(strings.TrimPrefix(p.out.Text(), prefix)), nil
	}
	for _, p := range procs {
		if _, err := readLine(p, "ready"); err != nil {
			return 0, err
		}
	}
	for _, p := range procs {
		if _, err := io.WriteString(p.in, "go\n"); err != nil {
			return 0, err
		}
	}
	sum := 0.0
	for _, p := range procs {
		s, err := readLine(p, "images/s")
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// rawChild is the hidden part rawchild of rawProcesses: raw ONNX Runtime
// on o.resnet with o.threads threads and batch o.batch. It prints
// "ready" once warm, waits for a line on in, runs for o.d and prints
// "images/s <rate>".
func rawChild(o *options, in io.Reader, out io.Writer) error {
	if o.resnet == "" {
		return errors.New("rawchild: -resnet is required")
	}
	raw, err := newRawRunner(o.resnet, o.batch, o.threads, 224, 224)
	if err != nil {
		return err
	}
	defer raw.close()
	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("rawchild: waiting for the start: %w", err)
	}
	rate, _, err := raw.run(o.d)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "images/s %f\n", rate)
	return nil
}
