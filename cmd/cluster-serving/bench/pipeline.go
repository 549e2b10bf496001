package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// The models of the pipeline part's generated repository.
const (
	pipeTiny      = "tiny"       // -tiny, called directly
	pipeOneStep   = "tiny_ens"   // a one-step ensemble of tiny
	pipeChain     = "chain"      // step_a → step_b → step_c, each a copy of -tiny
	pipeSlow      = "slow"       // writeSlowModel's, one request at a time per process
	pipeSlowChain = "slow_chain" // step_a → slow → step_c
	pipeResNet    = "resnet"     // -resnet, called directly
	pipeResNetEns = "resnet_ens" // a one-step ensemble of it
)

// pipeSteps are the steps of pipeChain, each a copy of the tiny model
// with a job of its own.
var pipeSteps = []string{"step_a", "step_b", "step_c"}

// pipeline runs `bench -only pipeline`: Triton ensembles served by a
// `cluster-serving start` of a generated model repository, each figure a
// ratio to its baseline in the same process and run, through the NATS
// door: a one-step ensemble against its model called directly (the
// tiny model; the ResNet-50-shaped one with -resnet), a three-step
// pipeline's p50 against its steps' called directly, and a pipeline whose
// slow step runs on three worker processes against one.
func (r *runner) pipeline(o *options) error {
	began := time.Now()
	fmt.Fprintf(r.w, "== pipelines (Triton ensembles), NATS door, %d cores, threadPerModel 1 (ResNet: %d), %s per run\n",
		runtime.NumCPU(), o.threads, o.d)
	if missing(o.tiny) {
		return fmt.Errorf("no tiny model at %q (-tiny; run from the repository root)", o.tiny)
	}
	// The start runs no worker of the slow model: slowScale adds worker
	// processes of it.
	serve := append([]string{pipeTiny, pipeOneStep, pipeChain, pipeSlowChain}, pipeSteps...)
	rc, err := r.startRepo(tinyRepo(o.tiny), map[string]string{"threadPerModel": "1", "serveModels": yamlList(serve)}, tinyBodies())
	if err != nil {
		return err
	}
	defer rc.close()
	if err := rc.await(append([]string{pipeTiny, pipeOneStep, pipeChain}, pipeSteps...)...); err != nil {
		return err
	}
	table{r.w}.header()
	if err := rc.oneStep(r.w, "tiny", pipeTiny, pipeOneStep, 5, o.d/4); err != nil {
		return err
	}
	if err := rc.chainLatency(r.w, o.d); err != nil {
		return err
	}
	if err := r.slowScale(rc, o.d); err != nil {
		return err
	}
	rc.close()
	if o.resnet == "" || missing(o.resnet) {
		fmt.Fprintf(r.w, "ResNet-50 rows skipped: no -resnet model %q (make bench generates it)\n", o.resnet)
	} else if err := r.pipelineResNet(o); err != nil {
		return fmt.Errorf("ResNet-50: %w", err)
	}
	fmt.Fprintf(r.w, "(pipelines: %s in all)\n\n", time.Since(began).Round(time.Second))
	return nil
}

// tinyRepo is the repository of the tiny rows: the tiny model alone and
// behind a one-step ensemble, three copies of it chained, and the slow
// model between two of them.
func tinyRepo(tiny string) []repoModel {
	models := []repoModel{
		{pipeTiny, copyTo(tiny), ""},
		{pipeOneStep, nil, chainConfig(pipeOneStep, 4, "x", "[ 4 ]", "y", "[ 4 ]", pipeTiny)},
		{pipeChain, nil, chainConfig(pipeChain, 4, "x", "[ 4 ]", "y", "[ 4 ]", pipeSteps...)},
		// One instance and no dynamic_batching: each process runs one
		// request of it at a time, alone, on one core (threadPerModel 1).
		// Not max_batch_size 0: an ensemble without a batch dim cannot take
		// JSON instances (the codec strips dim 0 of every record).
		{pipeSlow, writeSlowModel, "max_batch_size: 1\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n"},
		{pipeSlowChain, nil, chainConfig(pipeSlowChain, 1, "x", "[ 4 ]", "y", "[ 4 ]", pipeSteps[0], pipeSlow, pipeSteps[2])},
	}
	for _, s := range pipeSteps {
		models = append(models, repoModel{s, copyTo(tiny), ""})
	}
	return models
}

// tinyBodies is the request each model of tinyRepo is called with.
func tinyBodies() map[string][]byte {
	bodies := map[string][]byte{pipeTiny: tinyBody, pipeOneStep: tinyBody, pipeChain: tinyBody, pipeSlow: tinyBody, pipeSlowChain: tinyBody}
	for _, s := range pipeSteps {
		bodies[s] = tinyBody
	}
	return bodies
}

// oneStep measures the one-step ensemble ens against its model called
// directly, at 32 callers, rounds times for d each, and prints both, the
// ratio of their rates over all rounds (and its range over the rounds),
// and the ratio of their CPU per request in the serving process: what the
// rates' ratio tends to where the cores are the limit, whatever else
// runs on the machine.
func (rc *repoChild) oneStep(w io.Writer, label, direct, ens string, rounds int, d time.Duration) error {
	per, cpu, err := rc.rounds(rounds, 32, d, rc.ops[direct], rc.ops[ens])
	if err != nil {
		return err
	}
	t := table{w}
	var all [2]loadResult
	for i, name := range []string{": model called directly, 32 callers", ": one-step ensemble, 32 callers"} {
		all[i] = merged(per[i])
		t.row(label+name, all[i])
		fmt.Fprintf(w, "  %s\n", perRequest(cpuSnap{}, cpu[i], all[i].n))
		if all[i].n == 0 {
			return fmt.Errorf("%s%s: no request answered in %d runs of %s: lengthen -d", label, name, rounds, d)
		}
	}
	_, lo, hi := roundRatios(per, 1, 0)
	fmt.Fprintf(w, "%s: one-step ensemble / direct, req/s at 32 callers: %.3f (%d rounds, each round's %.3f-%.3f; target >= 0.8)\n",
		label, all[1].rate()/all[0].rate(), rounds, lo, hi)
	cpuPer := func(i int) float64 { return float64(cpu[i].server) / float64(all[i].n) }
	fmt.Fprintf(w, "%s: serving CPU per request, direct / one-step ensemble: %.3f (the req/s ratio where the cores are the limit)\n",
		label, cpuPer(0)/cpuPer(1))
	return nil
}

// chainLatency measures the three-step chain and each of its steps called
// directly, one caller, in 3 rounds of d/8 each, and prints the chain's
// p50 beside the sum of the steps' p50s.
func (rc *repoChild) chainLatency(w io.Writer, d time.Duration) error {
	ops := []op{rc.ops[pipeChain]}
	for _, s := range pipeSteps {
		ops = append(ops, rc.ops[s])
	}
	per, _, err := rc.rounds(3, 1, d/8, ops...)
	if err != nil {
		return err
	}
	t := table{w}
	chain := merged(per[0])
	t.row("3-step pipeline "+strings.Join(pipeSteps, "→")+", 1 caller", chain)
	var sum time.Duration
	for i, s := range pipeSteps {
		res := merged(per[i+1])
		t.row(s+" called directly, 1 caller", res)
		sum += res.pct(0.5)
	}
	p50 := chain.pct(0.5)
	fmt.Fprintf(w, "3-step pipeline p50 %s vs Σ p50(steps) %s: %+.3f ms (target <= +1 ms)\n",
		p50.Round(time.Microsecond), sum.Round(time.Microsecond), float64(p50-sum)/float64(time.Millisecond))
	return nil
}

// slowScale loads pipeSlowChain at 32 callers with its slow step on one
// `cluster-serving worker` process that serves only the slow model
// (serveModels), then on three, then on one again: the ratio is three
// processes' rate over the mean of the two runs on one. It prints each
// process's CPU over each run: where the requests and the cores went.
func (r *runner) slowScale(rc *repoChild, d time.Duration) error {
	const most = 3
	var workers []*child
	defer func() {
		for _, wk := range workers {
			wk.stop()
		}
	}()
	var res [3]loadResult
	var cpu [3]string
	for i, n := range []int{1, most, 1} {
		for len(workers) < n {
			wk, err := r.startWorker(rc.child, "", map[string]string{"modelRepository": rc.repo, "modelControl": "none",
				"threadPerModel": "1", "serveModels": yamlList([]string{pipeSlow})})
			if err != nil {
				return err
			}
			workers = append(workers, wk)
		}
		for ; len(workers) > n; workers = workers[:len(workers)-1] {
			workers[len(workers)-1].stop()
		}
		if err := rc.await(pipeSlow, pipeSlowChain); err != nil {
			return err
		}
		runLoad(32, time.Second, 0, rc.ops[pipeSlowChain]) // warm-up
		if err := allIdle(workers, rc.child); err != nil {
			return err
		}
		procs := append(slices.Clone(workers), rc.child)
		before, self := procsCPU(procs), selfCPU()
		res[i] = runLoad(32, d, 0, rc.ops[pipeSlowChain])
		cpu[i] = cpuShares(before, procsCPU(procs), selfCPU()-self, res[i].elapsed)
		if err := allIdle(workers, rc.child); err != nil {
			return err
		}
	}
	return r.slowReport(rc, res, cpu, d)
}

// slowReport prints slowScale's rows and ratio, and the slow step alone.
func (r *runner) slowReport(rc *repoChild, res [3]loadResult, cpu [3]string, d time.Duration) error {
	t := table{r.w}
	t.row("slow step called directly, 1 caller", runLoad(1, d/4, 0, rc.ops[pipeSlow]))
	for i, name := range []string{"1 process (before)", "3 processes", "1 process (after)"} {
		t.row("slow pipeline, slow step on "+name, res[i])
		fmt.Fprintf(r.w, "  CPU over the run, share of one core: %s\n", cpu[i])
	}
	base := (res[0].rate() + res[2].rate()) / 2
	fmt.Fprintf(r.w, "slow step on 3 worker processes / on 1, pipeline req/s at 32 callers: %.2f (target >= 2.5; %d cores for 3 single-threaded workers, the NATS server, the pipeline and the callers)\n",
		res[1].rate()/base, runtime.NumCPU())
	return nil
}

// allIdle waits until each of workers, then last, is idle
// (child.waitIdle): a step's workers before the process that waits for
// their answers.
func allIdle(workers []*child, last *child) error {
	for _, c := range append(workers[:len(workers):len(workers)], last) {
		if err := c.waitIdle(time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// procsCPU is each of cs's CPU so far (0 when unreadable).
func procsCPU(cs []*child) []time.Duration {
	out := make([]time.Duration, len(cs))
	for i, c := range cs {
		out[i], _ = procCPU(c.cmd.Process.Pid)
	}
	return out
}

// cpuShares says what share of one core each process used between a and
// b, over elapsed: the slow processes, then the start (the last of a and
// b), then this one (bench, its CPU over the run).
func cpuShares(a, b []time.Duration, bench, elapsed time.Duration) string {
	share := func(d time.Duration) string { return fmt.Sprintf("%.0f%%", 100*float64(d)/float64(elapsed)) }
	slow := make([]string, len(a)-1)
	for i := range slow {
		slow[i] = share(b[i] - a[i])
	}
	n := len(a) - 1
	return fmt.Sprintf("slow processes %s; start %s; bench %s", strings.Join(slow, ", "), share(b[n]-a[n]), share(bench))
}

// yamlList is names as a YAML flow sequence.
func yamlList(names []string) string { return "[ " + strings.Join(names, ", ") + " ]" }

// pipelineResNet measures a one-step ensemble of the ResNet-50-shaped
// model against the model called directly, on a repository of its own.
func (r *runner) pipelineResNet(o *options) error {
	cfg := fmt.Sprintf("max_batch_size: %d\ndynamic_batching { }\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n", o.batch)
	models := []repoModel{
		{pipeResNet, copyTo(o.resnet), cfg},
		{pipeResNetEns, nil, chainConfig(pipeResNetEns, o.batch, resNetInput, "[ 3, -1, -1 ]", "output", "[ 1000 ]", pipeResNet)},
	}
	body := imageRequest(resNetInput, 224, 224)
	rc, err := r.startRepo(models, map[string]string{"threadPerModel": fmt.Sprint(o.threads)},
		map[string][]byte{pipeResNet: body, pipeResNetEns: body})
	if err != nil {
		return err
	}
	defer rc.close()
	if err := rc.await(pipeResNet, pipeResNetEns); err != nil {
		return err
	}
	// Two rounds: each run leaves 32 images queued, seconds of work to
	// wait for.
	fmt.Fprintf(r.w, "ResNet-50-shaped model, 3×224×224 JSON, max_batch_size %d, %d threads, 2 rounds of %s:\n", o.batch, o.threads, o.d)
	return rc.oneStep(r.w, "ResNet-50", pipeResNet, pipeResNetEns, 2, o.d)
}

// repoModel is one model of a generated repository: write puts its ONNX
// file at the path it is given (nil: an ensemble, whose version
// directory stays empty); config is its config.pbtxt ("": none, the
// graph's defaults).
type repoModel struct {
	name   string
	write  func(path string) error
	config string
}

// copyTo is a repoModel's write that copies the model file src.
func copyTo(src string) func(string) error {
	return func(dst string) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	}
}

// writeRepo writes models into dir in Triton's layout:
// <name>/config.pbtxt and <name>/1/model.onnx.
func writeRepo(dir string, models []repoModel) error {
	for _, m := range models {
		v := filepath.Join(dir, m.name, "1")
		if err := os.MkdirAll(v, 0o755); err != nil {
			return err
		}
		if m.write != nil {
			if err := m.write(filepath.Join(v, "model.onnx")); err != nil {
				return fmt.Errorf("model %q: %w", m.name, err)
			}
		}
		if m.config != "" {
			if err := os.WriteFile(filepath.Join(dir, m.name, "config.pbtxt"), []byte(m.config), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// chainConfig is the config.pbtxt of ensemble name: steps in a line, each
// step's model taking input in (FP32, inDims) and answering out, the
// ensemble's in feeding the first and the last answering the ensemble's
// out.
func chainConfig(name string, maxBatch int, in, inDims, out, outDims string, steps ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %q\nplatform: \"ensemble\"\nmax_batch_size: %d\n", name, maxBatch)
	fmt.Fprintf(&b, "input [ { name: %q data_type: TYPE_FP32 dims: %s } ]\n", in, inDims)
	fmt.Fprintf(&b, "output [ { name: %q data_type: TYPE_FP32 dims: %s } ]\n", out, outDims)
	b.WriteString("ensemble_scheduling { step [\n")
	prev := in
	for i, s := range steps {
		next, sep := fmt.Sprintf("t%d", i), ","
		if i == len(steps)-1 {
			next, sep = out, ""
		}
		fmt.Fprintf(&b, "  { model_name: %q model_version: -1 input_map { key: %q value: %q } output_map { key: %q value: %q } }%s\n",
			s, in, prev, out, next, sep)
		prev = next
	}
	b.WriteString("] }\n")
	return b.String()
}

// repoChild is a `cluster-serving start` serving a generated model
// repository (repo), with an op on its NATS door per model measured.
type repoChild struct {
	*child
	repo string
	ops  map[string]op
	cs   cleanups
}

// startRepo writes models into a new directory, starts a serving process
// of it with keys, and opens an op on its NATS door for each model of
// bodies, calling with its body.
func (r *runner) startRepo(models []repoModel, keys map[string]string, bodies map[string][]byte) (*repoChild, error) {
	repo, err := os.MkdirTemp("", "cs-bench-repo-*")
	if err != nil {
		return nil, err
	}
	rc := &repoChild{repo: repo, ops: map[string]op{}}
	rc.cs.add(func() { os.RemoveAll(repo) })
	if err := writeRepo(repo, models); err != nil {
		rc.close()
		return nil, err
	}
	keys = maps.Clone(keys)
	keys["modelRepository"], keys["modelControl"] = repo, "none"
	if rc.child, err = r.startChild("", keys); err != nil {
		rc.close()
		return nil, err
	}
	rc.cs.add(rc.child.stop)
	for name, body := range bodies {
		do, closeDo, err := natsOp(rc.url, mesh.PredictSubject(rc.job+"-"+name), body)
		if err != nil {
			rc.close()
			return nil, err
		}
		rc.cs.add(closeDo)
		rc.ops[name] = do
	}
	return rc, nil
}

// await returns once each of names answers a request (for at most a
// minute each): a repository's models load after the NATS door answers,
// ensembles last, and a step served by another process once it joined.
func (rc *repoChild) await(names ...string) error {
	for _, name := range names {
		if err := answers(rc.ops[name], time.Minute); err != nil {
			logs, _ := os.ReadFile(rc.logs)
			return fmt.Errorf("model %q does not answer: %w\n%s", name, err, logs)
		}
	}
	return nil
}

// close stops the process and removes the repository; safe to call twice.
func (rc *repoChild) close() {
	rc.cs.run()
	rc.cs = nil
}

// answers calls do until one call succeeds, for at most limit.
func answers(do op, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := do(ctx, 0)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rounds warms each of dos up, then loads each in turn at conc callers
// for d, rounds times, starting each round one further on; after each
// run it waits until the serving process is idle, so that what a run
// left queued does not run into the next. per[i][k] is do i in round k;
// cpu[i] is what do i's runs cost, the requests they left queued
// included.
func (rc *repoChild) rounds(rounds, conc int, d time.Duration, dos ...op) (per [][]loadResult, cpu []cpuSnap, err error) {
	for _, do := range dos {
		runLoad(8, time.Second, 500, do) // warm-up
	}
	if err := rc.waitIdle(time.Minute); err != nil {
		return nil, nil, err
	}
	per, cpu = make([][]loadResult, len(dos)), make([]cpuSnap, len(dos))
	for k := range rounds {
		for j := range dos {
			i := (j + k) % len(dos)
			a := snapCPU(rc.child, nil)
			per[i] = append(per[i], runLoad(conc, d, 0, dos[i]))
			if err := rc.waitIdle(time.Minute); err != nil {
				return nil, nil, err
			}
			b := snapCPU(rc.child, nil)
			cpu[i].server += b.server - a.server
			cpu[i].bench += b.bench - a.bench
		}
	}
	return per, cpu, nil
}

// merged is the runs rs as one: their answers, latencies, errors and
// time summed.
func merged(rs []loadResult) loadResult {
	var m loadResult
	for _, r := range rs {
		m.n, m.errs, m.elapsed = m.n+r.n, m.errs+r.errs, m.elapsed+r.elapsed
		m.lat = append(m.lat, r.lat...)
		if r.lastErr != nil {
			m.lastErr = r.lastErr
		}
	}
	return m
}
