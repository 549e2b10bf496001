package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The pipeline cluster's models: the ensemble is named after the job, so
// that every door (the Redis doors read the job's stream) reaches it, and
// its step model serves on <job>-two_io.
const (
	pipelineJob = "diamond"
	stepModel   = "two_io"
)

// Diamond is the pipeline's Calc: OUT = 3x + x³ of three floats under
// "IN". Its inputs keep every step exact in float32: integers up to 255,
// whose cubes stay under 2^24, and quarters, whose cubes are 64ths.
var Diamond = Calc{Input: "IN", In: diamondIn, Out: func(in []float32) []float32 {
	v := slices.Clone(in)
	for i, x := range v {
		v[i] = 3*x + x*x*x
	}
	return v
}}

// diamondIn is distinct per id modulo 4096 (id%256, then id/256%16).
func diamondIn(id int64) []float32 {
	return []float32{float32(id % 256), -float32(id / 256 % 16), float32(id%8) / 4}
}

// pipelineWorkers says what each worker of a pipeline cluster runs
// (serveModels), and the word that names it in a row: one runs both
// models, so that killing either of the others leaves every step served.
var pipelineWorkers = []struct {
	role  string
	serve []string
}{
	{"ensemble+step", []string{stepModel, pipelineJob}},
	{"step", []string{stepModel}},
	{"ensemble", []string{pipelineJob}},
}

// UsePipeline sets opt up to serve a pipeline instead of one model: it
// writes a model repository under opt.Dir that holds two_io (the .onnx
// at twoIO, infer/testdata/two_io.onnx) and the diamond ensemble over
// it, and gives the cluster three workers: the first runs both models,
// the second two_io alone, the third the ensemble alone. The load then
// asks the ensemble on every door and checks each answer is 3x + x³.
func UsePipeline(opt *Options, twoIO string) error {
	repo := filepath.Join(opt.Dir, "repository")
	model, err := os.ReadFile(twoIO)
	if err != nil {
		return err
	}
	for _, d := range []string{filepath.Join(repo, stepModel, "1"), filepath.Join(repo, pipelineJob, "1")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(repo, stepModel, "1", "model.onnx"), model, 0o644); err != nil {
		return err
	}
	// The diamond (infer/testdata/diamond.pbtxt, beside two_io): its
	// steps feed 3x + x³ through four requests to two_io.
	config, err := os.ReadFile(filepath.Join(filepath.Dir(twoIO), "diamond.pbtxt"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(repo, pipelineJob, "config.pbtxt"), config, 0o644); err != nil {
		return err
	}
	opt.Repository, opt.Job, opt.Calc, opt.Serve = repo, pipelineJob, Diamond, nil
	for _, w := range pipelineWorkers {
		opt.Serve = append(opt.Serve, w.serve)
	}
	opt.Workers = len(opt.Serve)
	return nil
}

// modelKey is the config line that names what the processes serve: the
// repository, when the cluster has one.
func (c *Cluster) modelKey() string {
	if c.opt.Repository != "" {
		return "modelRepository: " + c.opt.Repository
	}
	return "modelPath: " + c.opt.Model
}

// serveKey is worker i's serveModels line; none when it runs every model.
func (c *Cluster) serveKey(i int) string {
	if c.opt.Repository == "" || i >= len(c.opt.Serve) {
		return ""
	}
	return "serveModels: [" + strings.Join(c.opt.Serve[i], ", ") + "]\n"
}

// workerJobs are the jobs worker w runs: those of its serveModels, else
// the load's.
func (c *Cluster) workerJobs(w *Proc) []string {
	i := slices.Index(c.Workers, w)
	if c.opt.Repository == "" || i < 0 || i >= len(c.opt.Serve) {
		return []string{c.Job}
	}
	jobs := make([]string, len(c.opt.Serve[i]))
	for k, m := range c.opt.Serve[i] {
		jobs[k] = c.jobOf(m)
	}
	return jobs
}

// jobOf is the job of a repository model: jobName for the model so
// named, else <jobName>-<model>.
func (c *Cluster) jobOf(model string) string {
	if model == c.Job {
		return c.Job
	}
	return c.Job + "-" + model
}

// PipelineScenarios are the rows of a pipeline cluster (UsePipeline):
// each worker killed with kill -9 while pipelines are half done, then
// the nats-server that leads the ensemble's queue.
func PipelineScenarios() []Scenario {
	var out []Scenario
	for i := range pipelineWorkers {
		out = append(out, PipelineWorkerKill(i))
	}
	kill := NATSKill(5 * time.Second)
	kill.Name = "pipeline " + kill.Name
	return append(out, kill)
}

// PipelineWorkerKill kills worker i of a pipeline cluster (kill -9) while
// pipelines are half done: after a burst on every door, as soon as both
// the ensemble's queue and its step model's have requests out to their
// workers (or after 3 s), and starts it again after a second. The note
// says what the queues held at the kill.
func PipelineWorkerKill(i int) Scenario {
	return Scenario{Name: "pipeline " + pipelineWorkers[i].role + " worker kill -9",
		Fault: func(ctx context.Context, c *Cluster, l *Load) (string, error) {
			w := c.Workers[i]
			l.Burst(30)
			note := w.Name + " " + c.waitHalfDone(ctx, 3*time.Second)
			return note, c.killWorker(ctx, w)
		}}
}

// waitHalfDone polls the workers consumers of the ensemble's job and of
// its step model's until both hold requests (delivered, not acked): the
// ensemble's worker is then waiting for steps. It says what they held.
func (c *Cluster) waitHalfDone(ctx context.Context, d time.Duration) string {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	ens, step := c.Job, c.jobOf(stepModel)
	var held [2]int
	err = waitFor(ctx, d, "pipelines half done", func() bool {
		held = [2]int{c.heldBy(ctx, js, ens), c.heldBy(ctx, js, step)}
		return held[0] > 0 && held[1] > 0
	})
	note := fmt.Sprintf("holding %d %s and %d %s requests", held[0], ens, held[1], step)
	if err != nil {
		note += " (no pipeline seen half done)"
	}
	return note
}

// heldBy is how many requests of job its workers hold (NumAckPending),
// summed over the job's partitions: SERVING_<job> and SERVING_<job>~<p>.
func (c *Cluster) heldBy(ctx context.Context, js jetstream.JetStream, job string) int {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	n := 0
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		rest, ok := strings.CutPrefix(name, "SERVING_"+job)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "~")) || strings.HasSuffix(rest, "_RESULTS") {
			continue
		}
		if cons, err := js.Consumer(ctx, name, "workers"); err == nil {
			if info, err := cons.Info(ctx); err == nil {
				n += info.NumAckPending
			}
		}
	}
	return n
}
