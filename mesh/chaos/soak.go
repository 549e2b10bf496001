package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of one process. Goroutines is -1 when its
// metrics endpoint does not answer; then Threads is the proxy.
type Sample struct {
	At                               time.Duration // since the soak started
	RSSKiB, FDs, Threads, Goroutines int64
}

// Metrics the soak follows, with the absolute rise below which a slope is
// noise whatever the ratio (a garbage collector's heap settles in steps).
var soakFloors = map[string]float64{"rss KiB": 16 << 10, "fds": 16, "threads": 8, "goroutines": 50}

// sampleProc reads VmRSS and Threads from /proc/<pid>/status, counts
// /proc/<pid>/fd and scrapes go_goroutines from the process's metrics.
func sampleProc(p *Proc, at time.Duration) (Sample, error) {
	s := Sample{At: at, Goroutines: -1}
	pid := p.Pid()
	if pid == 0 {
		return s, fmt.Errorf("%s is not running", p.Name)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseInt(strings.Fields(v + " 0")[0], 10, 64)
		switch k {
		case "VmRSS":
			s.RSSKiB = n
		case "Threads":
			s.Threads = n
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = int64(len(fds))
	if p.MetricsPort != 0 {
		s.Goroutines = scrapeGauge(fmt.Sprintf("http://127.0.0.1:%d/metrics", p.MetricsPort), "go_goroutines")
	}
	return s, nil
}

// scrapeGauge reads one unlabelled gauge from a Prometheus text page; -1
// when it cannot.
func scrapeGauge(url, name string) int64 {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int64(f)
			}
		}
	}
	return -1
}

// Trend is one metric of one process over the soak.
type Trend struct {
	Proc, Metric     string
	First, Last, Max float64
	SlopePerHour     float64 // least-squares fit
	Rise             float64 // of the fitted line over the judged samples
	Flat             bool
}

// Judge fits a line to the samples after the first fifth of the run (the
// warm-up: pools, caches and the heap grow to their working size), and
// calls growth clearly not flat when the fitted line rises by more than
// 10% of the first judged value and by more than the metric's floor
// (soakFloors) over the judged samples. A leak of one goroutine or one fd
// per request trips it within a minute; a heap that settles in steps does
// not.
func Judge(proc, metric string, at []time.Duration, vals []float64) Trend {
	t := Trend{Proc: proc, Metric: metric, Flat: true}
	if len(vals) == 0 {
		return t
	}
	t.First, t.Last = vals[0], vals[len(vals)-1]
	for _, v := range vals {
		t.Max = math.Max(t.Max, v)
	}
	skip := len(vals) / 5
	at, vals = at[skip:], vals[skip:]
	if len(vals) < 3 {
		return t
	}
	slope := fitSlope(at, vals) // per second
	t.SlopePerHour = slope * 3600
	t.Rise = slope * (at[len(at)-1] - at[0]).Seconds()
	t.Flat = t.Rise <= math.Max(0.10*vals[0], soakFloors[metric])
	return t
}

func fitSlope(at []time.Duration, vals []float64) float64 {
	var sx, sy, sxx, sxy float64
	n := float64(len(vals))
	for i, v := range vals {
		x := at[i].Seconds()
		sx, sy, sxx, sxy = sx+x, sy+v, sxx+x*x, sxy+x*v
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// Soak samples every serving process of c each interval for d, while the
// caller's load runs. It stops early when ctx ends or a process dies.
func Soak(ctx context.Context, c *Cluster, d, interval time.Duration, logf func(string, ...any)) (map[string][]Sample, error) {
	out := map[string][]Sample{}
	start := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-t.C:
		}
		for _, p := range c.ProcessesServing() {
			s, err := sampleProc(p, time.Since(start))
			if err != nil {
				return out, err
			}
			out[p.Name] = append(out[p.Name], s)
			logf("%s %v: rss %d KiB, fds %d, threads %d, goroutines %d", p.Name, s.At.Round(time.Second), s.RSSKiB, s.FDs, s.Threads, s.Goroutines)
		}
	}
	return out, nil
}

// Trends judges every metric of every process.
func Trends(samples map[string][]Sample) []Trend {
	var out []Trend
	for _, name := range sortedKeys(samples) {
		ss := samples[name]
		at := make([]time.Duration, len(ss))
		series := map[string][]float64{}
		for i, s := range ss {
			at[i] = s.At
			series["rss KiB"] = append(series["rss KiB"], float64(s.RSSKiB))
			series["fds"] = append(series["fds"], float64(s.FDs))
			series["threads"] = append(series["threads"], float64(s.Threads))
			if s.Goroutines >= 0 {
				series["goroutines"] = append(series["goroutines"], float64(s.Goroutines))
			}
		}
		for _, m := range []string{"rss KiB", "fds", "threads", "goroutines"} {
			if len(series[m]) == len(at) {
				out = append(out, Judge(name, m, at, series[m]))
			}
		}
	}
	return out
}

// WriteTrends prints the soak table: first, last, max, slope, verdict.
func WriteTrends(w io.Writer, trends []Trend) {
	fmt.Fprintf(w, "%-10s %-11s %10s %10s %10s %12s  %s\n", "process", "metric", "first", "last", "max", "slope/hour", "growth")
	for _, t := range trends {
		verdict := "flat"
		if !t.Flat {
			verdict = fmt.Sprintf("GROWS (+%.0f over the judged part)", t.Rise)
		}
		fmt.Fprintf(w, "%-10s %-11s %10.0f %10.0f %10.0f %12.1f  %s\n", t.Proc, t.Metric, t.First, t.Last, t.Max, t.SlopePerHour, verdict)
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// RunSoak puts steady load on c for d, sampling every serving process each
// interval, then accounts for every request of the run (one row: lost,
// duplicates, errors, the longest gap) and judges each metric's trend.
func RunSoak(ctx context.Context, c *Cluster, d, interval time.Duration, cfg LoadConfig, logf func(string, ...any)) (Row, []Trend, []string, error) {
	lctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	l, err := NewLoad(lctx, c, cfg)
	if err != nil {
		return Row{}, nil, nil, err
	}
	runCtx, stopLoad := context.WithCancel(lctx)
	var w Window
	w.Start = time.Now()
	w.FaultStart = w.Start
	l.Run(runCtx)
	samples, serr := Soak(ctx, c, d, interval, logf)
	w.End = time.Now()
	w.FaultEnd = w.End
	stopLoad()
	sleep(ctx, l.cfg.Deadline+time.Second)
	stopPoll()
	l.Close()
	row := Account(fmt.Sprintf("steady load, %v", d), l.Requests(), w, nil, l.cfg.Deadline)
	return row, Trends(samples), l.notes(), serr
}
