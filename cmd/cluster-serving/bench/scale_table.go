package bench

import (
	"fmt"
	"io"
	"time"
)

// scaleRow is one tiny-model row: a way of one layout at conc callers.
// A row with a note was not measured; the note says why.
type scaleRow struct {
	layout, way string
	conc        int
	res         loadResult
	refused     int      // 503 answers (busy, queue full), among res.errs
	cpu         scaleCPU // spent by each process during the run
	note        string
}

// otherErrors are the row's errors that were not refusals.
func (r scaleRow) otherErrors() int { return r.res.errs - r.refused }

// perRequest is d per answered request, in µs (0 with none answered).
func (r scaleRow) perRequest(d time.Duration) float64 {
	if r.res.n == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(r.res.n)
}

// busyCores is every process's CPU over the run's wall time.
func (r scaleRow) busyCores() float64 {
	if r.res.elapsed <= 0 {
		return 0
	}
	return r.cpu.total().Seconds() / r.res.elapsed.Seconds()
}

// scaleRatio is a row's rate over its baseline's, and what that is: the
// NATS door's over the stored trivial responder's at the same callers
// (measured in the layout "start", the ceiling of one stored message per
// request), the HTTP door's over the same layout's NATS door at the same
// callers (the gRPC door's too), the stored trivial HTTP door's over the stored trivial
// responder (the ceiling of HTTP ÷ NATS when both store each request).
// Other rows, or a missing baseline, have none ("").
func scaleRatio(rows []scaleRow, i int) string {
	r := rows[i]
	var base, over string
	switch r.way {
	case wayNATS:
		base, over = wayStored, "÷ stored"
	case wayHTTP, wayGRPC:
		base, over = wayNATS, "÷ NATS"
	case wayStoredHTTP:
		base, over = wayStored, "÷ stored"
	default:
		return ""
	}
	for _, b := range rows {
		if b.way == base && b.conc == r.conc && b.note == "" && b.res.n > 0 && (b.layout == r.layout || base == wayStored) {
			return fmt.Sprintf("%.2f %s", r.res.rate()/b.res.rate(), over)
		}
	}
	return ""
}

// scaleTable prints the tiny-model rows, with a legend.
func scaleTable(w io.Writer, rows []scaleRow) {
	fmt.Fprintf(w, "tiny model (add_f32), one table row per layout, way and callers; CPU in µs per answered request\n")
	fmt.Fprintf(w, "%-22s %-19s %5s %9s %8s %8s %7s %6s %7s %7s %7s %6s  %s\n",
		"layout", "way", "conc", "req/s", "p50", "p99", "refused", "errors", "start", "workers", "bench", "cores", "ratio")
	for i, r := range rows {
		if r.note != "" {
			fmt.Fprintf(w, "%-22s %-19s %5s %s\n", r.layout, r.way, "", r.note)
			continue
		}
		fmt.Fprintf(w, "%-22s %-19s %5d %9.0f %8s %8s %7d %6d %7.0f %7.0f %7.0f %6.1f  %s\n",
			r.layout, r.way, r.conc, r.res.rate(), r.res.pct(0.5).Round(time.Microsecond), r.res.pct(0.99).Round(time.Microsecond),
			r.refused, r.otherErrors(), r.perRequest(r.cpu.start), r.perRequest(r.cpu.workers), r.perRequest(r.cpu.bench),
			r.busyCores(), scaleRatio(rows, i))
	}
	fmt.Fprintf(w, "refused: 503 answers (busy, queue full); errors: every other failure. start: the `start` process (embedded NATS,\n"+
		"doors, its worker); workers: the extra `worker` processes summed; bench: this process (the callers, and the trivial\n"+
		"and stored responders, which run here); cores: all three's CPU ÷ wall time.\n\n")
}

// resNetScaleRow is one ResNet-50 row: n workers of one thread each
// against n raw ONNX Runtime processes of one thread each.
type resNetScaleRow struct {
	workers      int
	serving, raw float64 // images/s
	p50          time.Duration
	errs         int
	note         string
}

// resNetScaleTable prints the ResNet-50 rows: each one's speed-up over n ×
// the one-worker row (the first row, per worker, when no row has one
// worker) and its rate over raw ONNX Runtime with as many processes.
func resNetScaleTable(w io.Writer, rows []resNetScaleRow) {
	one := 0.0
	for _, r := range rows {
		if r.note == "" && r.serving > 0 && (one == 0 || r.workers == 1) {
			one = r.serving / float64(r.workers)
		}
	}
	fmt.Fprintf(w, "ResNet-50-shaped model, NATS door, JSON images, one intra-op thread per worker, maxBatch 1, 2 callers per worker, runs twice as long\n")
	fmt.Fprintf(w, "%7s %10s %8s %6s %14s %13s %14s\n", "workers", "images/s", "p50", "errors", "÷ (N × one)", "raw N procs", "serving ÷ raw")
	for _, r := range rows {
		if r.note != "" {
			fmt.Fprintf(w, "%7d %s\n", r.workers, r.note)
			continue
		}
		fmt.Fprintf(w, "%7d %10.2f %8s %6d %14s %13.2f %14s\n", r.workers, r.serving, r.p50.Round(time.Millisecond), r.errs,
			ratio(r.serving, one*float64(r.workers)), r.raw, ratio(r.serving, r.raw))
	}
	fmt.Fprintln(w)
}

// ratio is a/b with two decimals, "-" when b is 0.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
