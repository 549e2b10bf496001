// Package bench is the load generator of `cluster-serving bench` (what
// `make bench` prints): every serving figure comes with a baseline measured
// in the same run on the same machine, and the ratio between them.
//
// Serving is measured against child `cluster-serving start` processes (the
// real binary, embedded NATS, one worker), so their resident memory can be
// read too; the load runs in this process.
package bench

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// options are the flags of `cluster-serving bench`.
type options struct {
	resnet, tiny, storage, only     string
	sync                            string
	paths                           string
	d                               time.Duration
	batch, threads, soakSize, soakN int
	// -only scale (make scale): see scalePlan.
	scaleConc, scaleWorkers string
	scaleQuick              bool
	scaleD                  time.Duration
	scaleExtra, scaleParts  int
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.resnet, "resnet", "", "ResNet-50-shaped model (make bench generates it)")
	fs.StringVar(&o.tiny, "tiny", "infer/testdata/add_f32.onnx", "tiny model (a few µs per call)")
	fs.DurationVar(&o.d, "d", 10*time.Second, "how long each throughput run lasts")
	fs.IntVar(&o.batch, "batch", 8, "maxBatch for ResNet-50, and the raw baseline's batch size")
	fs.IntVar(&o.threads, "threads", 0, "intra-op threads (0: all cores)")
	fs.IntVar(&o.soakSize, "soak-size", 64, "image side of the memory soak requests (the model takes any H×W; 224 is the full size)")
	fs.IntVar(&o.soakN, "soak", 10000, "requests of the memory soak (RSS read at 1,000 and at this count)")
	fs.StringVar(&o.storage, "storage", "file", "queueStorage of the serving process: file or memory")
	fs.StringVar(&o.sync, "sync", "", "natsSync of the serving processes but the sync part's (default: the config default, always)")
	fs.StringVar(&o.only, "only", "", "run only these parts, comma-separated: tiny,allocs,sync,redis,pipeline,sched,resnet,memory (scale: make scale's alone; doors, tracing: the doors' rows or the tracing rounds of tiny alone)")
	fs.StringVar(&o.scaleConc, "scale-conc", "", "scale: callers of the tiny rows, comma-separated (default 32,128,512; quick 32,128)")
	fs.StringVar(&o.scaleWorkers, "scale-workers", "", "scale: ResNet-50 worker counts (default 1,2,4,8,14 capped at cores-2; quick 1,2)")
	fs.BoolVar(&o.scaleQuick, "quick", false, "scale: the version of at most 3 minutes (as SCALE_QUICK=1)")
	fs.DurationVar(&o.scaleD, "scale-d", 0, "scale: each run's length (0: 5s; quick 2s)")
	fs.IntVar(&o.scaleExtra, "scale-extra", 0, "scale: extra worker processes beside start (0: 3; quick 1)")
	fs.IntVar(&o.scaleParts, "scale-partitions", 0, "scale: jetstreamPartitions of the partitioned layout (0: 4; quick 2)")
	fs.StringVar(&o.paths, "paths", "", "run only the ResNet paths whose name holds one of these, comma-separated (e.g. NATS,Arrow)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.threads == 0 {
		o.threads = runtime.NumCPU()
	}
	return o, nil
}

// want reports whether -only asks for part.
func (o *options) want(part string) bool {
	return o.only == "" || slices.Contains(strings.Split(o.only, ","), part)
}

// Main runs `cluster-serving bench`: args are its flags, the figures go
// to stdout, flag errors to stderr. It returns the first part that failed.
func Main(args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	if err := serving.InitRuntime("", os.Getenv("ONNXRUNTIME_LIB")); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	r := &runner{w: stdout, bin: bin, storage: o.storage, sync: o.sync}
	switch o.only {
	case "rawchild": // hidden: one raw ONNX Runtime process of the scale part
		return rawChild(o, os.Stdin, stdout)
	case "scale":
		return untilInterrupted(func() error { return r.scale(o) })
	}
	return untilInterrupted(func() error { return r.parts(o) })
}

// parts runs the parts of `make bench` that o asks for, in order; it
// returns the first that failed.
func (r *runner) parts(o *options) error {
	stdout := r.w
	fmt.Fprintf(stdout, "cluster-serving bench — %d cores, %d intra-op threads, GOMAXPROCS default\n\n", runtime.NumCPU(), o.threads)
	if o.want("tiny") {
		if err := r.tiny(o.tiny, o.d); err != nil {
			return fmt.Errorf("tiny model: %w", err)
		}
	} else if o.want("doors") { // the doors' rows of tiny alone
		fmt.Fprintf(stdout, "== tiny model (%s), %s per run, doors only\n", filepath.Base(o.tiny), o.d)
		table{stdout}.header()
		if err := r.tinyDoors(o.tiny, o.d); err != nil {
			return fmt.Errorf("doors: %w", err)
		}
	} else if o.want("tracing") { // the tracing rounds of tiny alone
		fmt.Fprintf(stdout, "== tiny model (%s), %s per run, tracing only\n", filepath.Base(o.tiny), o.d)
		if err := r.tinyTracing(o.tiny, o.d); err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
	}
	if o.want("allocs") {
		fmt.Fprintf(stdout, "== allocations per request, tiny model (%s)\n", filepath.Base(o.tiny))
		if err := r.tinyAllocs(o.tiny, o.d); err != nil {
			return fmt.Errorf("allocations: %w", err)
		}
	}
	if o.want("sync") {
		if err := r.syncCost(o.tiny, o.d); err != nil {
			return fmt.Errorf("durability cost: %w", err)
		}
	}
	if o.want("redis") {
		if err := r.redisTiny(o.tiny, o.d); err != nil {
			return fmt.Errorf("redis door: %w", err)
		}
	}
	if o.want("pipeline") {
		if err := r.pipeline(o); err != nil {
			return fmt.Errorf("pipelines: %w", err)
		}
	}
	if o.want("sched") {
		if err := r.sched(o); err != nil {
			return fmt.Errorf("scheduling: %w", err)
		}
	}
	if (o.want("resnet") || o.want("memory")) && o.resnet == "" {
		return errors.New("-resnet is required (make bench generates the model)")
	}
	if o.want("resnet") {
		// Three times longer: at ~20 images/s a run of d counts only ~25 batches.
		if err := r.resNet(o.resnet, 3*o.d, o.batch, o.threads, o.paths); err != nil {
			return fmt.Errorf("resnet: %w", err)
		}
	}
	if o.want("memory") {
		if err := r.memory(o.resnet, o.batch, o.threads, o.soakSize, o.soakN); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	return nil
}

// runner starts the serving processes of the bench and prints its figures.
type runner struct {
	w       io.Writer
	bin     string // the cluster-serving binary
	storage string // queueStorage of every child process
	sync    string // natsSync of every child process that sets none; "" the default
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

// rawRunner runs the model in this process on batches of pixel-like
// values: the baseline of the ResNet-50 figures.
type rawRunner struct {
	sess  *infer.Session
	in    []infer.Tensor
	batch int
}

func newRawRunner(model string, batch, threads, h, w int) (*rawRunner, error) {
	sess, err := infer.NewSession(model, threads)
	if err != nil {
		return nil, err
	}
	data := make([]float32, batch*3*h*w)
	for i := range data {
		data[i] = float32(i % 256)
	}
	r := &rawRunner{sess: sess, batch: batch,
		in: []infer.Tensor{{DType: infer.Float32, Shape: []int64{int64(batch), 3, int64(h), int64(w)}, Data: data}}}
	if _, err := sess.Run(r.in); err != nil { // warm-up
		sess.Close()
		return nil, err
	}
	return r, nil
}

// run runs batches back to back for d and returns images/s and images.
func (r *rawRunner) run(d time.Duration) (float64, int, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		if _, err := r.sess.Run(r.in); err != nil {
			return 0, n, err
		}
		n += r.batch
	}
	return float64(n) / time.Since(start).Seconds(), n, nil
}

func (r *rawRunner) close() { r.sess.Close() }

func (r *runner) memory(model string, batch, threads, size, total int) error {
	w := r.w
	c, err := r.startChild(model, map[string]string{
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
	peak, err := c.peakRSSKiB()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "peak RSS (VmHWM):         %7.1f MiB\n", float64(peak)/1024)
	fmt.Fprintf(w, "growth: %+.2f%% (target <= 5%%); errors %d; %s\n\n", 100*(float64(rss2)/float64(rss1)-1), r1.errs+r2.errs, time.Since(start).Round(time.Second))
	return nil
}
