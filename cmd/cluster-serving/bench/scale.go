package bench

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scalePlan is what `bench -only scale` (make scale) runs: the tiny
// model's mesh ceiling at rising concurrency for the layouts a user would
// run, and ResNet-50 workers against raw ONNX Runtime with as many
// processes. newScalePlan sizes it from the flags, the cores and quick
// mode (SCALE_QUICK=1 or -quick: at most 3 minutes on any machine).
type scalePlan struct {
	quick        bool
	d            time.Duration // each measured run
	conc         []int         // callers of the tiny rows
	workers      []int         // ResNet-50 workers (one intra-op thread each)
	extra        int           // extra `cluster-serving worker` processes beside start
	partitions   int           // jetstreamPartitions of the partitioned layout
	tiny, resnet string        // models; "" or a missing file skips its part
}

// newScalePlan sizes the plan: flags win over the defaults of the mode.
// Full: runs of 5 s (ResNet's twice as long), callers 32,128,512, workers 1,2,4,8,14 capped at
// cores-2 (at least 1), 3 extra worker processes, 4 partitions. Quick:
// runs of 2 s, callers 32,128, workers 1,2 (capped at the cores), 1
// extra worker process, 2 partitions, fewer rows.
func newScalePlan(o *options, cores int, quickEnv string) (scalePlan, error) {
	p := scalePlan{quick: o.scaleQuick || quickEnv == "1" || quickEnv == "true",
		d: o.scaleD, extra: o.scaleExtra, partitions: o.scaleParts, tiny: o.tiny, resnet: o.resnet}
	conc, workers := "32,128,512", capInts([]int{1, 2, 4, 8, 14}, max(1, cores-2))
	d, extra, parts := 5*time.Second, 3, 4
	if p.quick {
		conc, workers = "32,128", capInts([]int{1, 2}, max(1, cores))
		d, extra, parts = 2*time.Second, 1, 2
	}
	var err error
	if p.conc, err = parseInts("-scale-conc", cmp.Or(o.scaleConc, conc)); err != nil {
		return p, err
	}
	if p.workers = workers; o.scaleWorkers != "" {
		if p.workers, err = parseInts("-scale-workers", o.scaleWorkers); err != nil {
			return p, err
		}
	}
	p.d, p.extra, p.partitions = cmp.Or(p.d, d), cmp.Or(p.extra, extra), cmp.Or(p.partitions, parts)
	return p, nil
}

// parseInts reads a comma-separated list of positive counts for flag.
func parseInts(flag, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: want positive counts separated by commas, got %q", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// capInts is xs with every value above most lowered to most, without
// repeats, in order.
func capInts(xs []int, most int) []int {
	var out []int
	for _, x := range xs {
		if x = min(x, most); !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// scale runs `bench -only scale`: progress lines while it measures, then
// one table of every row. A missing model file skips its part with a
// line saying so; a part that fails says why and the others still run.
func (r *runner) scale(o *options) error {
	p, err := newScalePlan(o, runtime.NumCPU(), os.Getenv("SCALE_QUICK"))
	if err != nil {
		return err
	}
	start := time.Now()
	mode := "full"
	if p.quick {
		mode = "quick (SCALE_QUICK=1)"
	}
	fmt.Fprintf(r.w, "== scale, %s: %s per run, callers %v, ResNet-50 workers %v\n", mode, p.d, p.conc, p.workers)
	var rows []scaleRow
	if missing(p.tiny) {
		fmt.Fprintf(r.w, "tiny-model rows skipped: no model at %q (-tiny; run from the repository root)\n", p.tiny)
	} else {
		t0 := time.Now()
		rows = r.scaleTiny(p)
		fmt.Fprintf(r.w, "-- tiny-model section: %s\n", time.Since(t0).Round(time.Second))
	}
	var res []resNetScaleRow
	if p.resnet == "" || missing(p.resnet) {
		fmt.Fprintf(r.w, "ResNet rows skipped: no -resnet model %q (make scale generates it)\n", p.resnet)
	} else {
		t0 := time.Now()
		res = r.scaleResNet(p)
		fmt.Fprintf(r.w, "-- ResNet section: %s\n", time.Since(t0).Round(time.Second))
	}
	fmt.Fprintf(r.w, "\n== scale results, %d cores, %s per run, %s in all\n", runtime.NumCPU(), p.d, time.Since(start).Round(time.Second))
	if len(rows) > 0 {
		scaleTable(r.w, rows)
	}
	if len(res) > 0 {
		resNetScaleTable(r.w, res)
	}
	return nil
}

// missing reports whether no file is at path.
func missing(path string) bool {
	_, err := os.Stat(path)
	return err != nil
}

// progress prints one line of a part's progress, with the time since t0.
func (r *runner) progress(t0 time.Time, format string, args ...any) {
	fmt.Fprintf(r.w, "  [%4.0fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
}
