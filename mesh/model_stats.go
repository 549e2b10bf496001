package mesh

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/timing"
)

// The wait of Client.Stats: it returns once StatsQuiet passes without a
// new answer after the first one came, or StatsWait after it asked, or at
// once when no worker is subscribed at all. Workers answer STATS from
// their NATS connection's own goroutine, not from the goroutines that run
// records, so a busy worker answers within a round trip; one that answers
// later than StatsQuiet after the others is left out of that call.
const (
	StatsQuiet = 100 * time.Millisecond
	StatsWait  = 2 * time.Second
)

// StatDuration counts events and their total time, as Triton's
// StatisticDuration.
type StatDuration struct {
	Count uint64 `json:"count"`
	NS    uint64 `json:"ns"`
}

func (d *StatDuration) add(o StatDuration) {
	d.Count += o.Count
	d.NS += o.NS
}

// BatchStats are the model runs of one batch size (rows), as Triton's
// InferBatchStatistics: each count is the number of runs, each time the
// runs' stacking of inputs, model run and cutting of outputs.
type BatchStats struct {
	Size          uint64       `json:"batch_size"`
	ComputeInput  StatDuration `json:"compute_input"`
	ComputeInfer  StatDuration `json:"compute_infer"`
	ComputeOutput StatDuration `json:"compute_output"`
}

// InferStats are a worker's inference statistics (or a sum of workers'),
// as Triton's statistics extension has them. Success, Queue and the
// Compute* count the requests answered with 200 (Fail those ended with
// an error) and their time: Success and Fail from the request's arrival
// (its door took it, else its publish was stored) to its answer; Queue
// the time it waited in the work queue and in the batcher's queue;
// ComputeInput decoding its body and stacking its records, ComputeInfer
// the model runs it took part in, ComputeOutput cutting its outputs back
// and encoding its answer. CacheHit and CacheMiss count the response
// cache's lookups at the doors and their time (Cache.Count): a hit is
// also a Success, and neither an inference nor an execution, as in
// Triton.
type InferStats struct {
	// InferenceCount counts the rows of the requests answered (a request
	// of batch b counts b); ExecutionCount the model runs.
	InferenceCount uint64 `json:"inference_count"`
	ExecutionCount uint64 `json:"execution_count"`
	// LastInference is when the last request was answered, in
	// milliseconds since the epoch; 0 when none was.
	LastInference uint64       `json:"last_inference"`
	Success       StatDuration `json:"success"`
	Fail          StatDuration `json:"fail"`
	Queue         StatDuration `json:"queue"`
	ComputeInput  StatDuration `json:"compute_input"`
	ComputeInfer  StatDuration `json:"compute_infer"`
	ComputeOutput StatDuration `json:"compute_output"`
	CacheHit      StatDuration `json:"cache_hit"`
	CacheMiss     StatDuration `json:"cache_miss"`
	// Batches has one entry per batch size run, by size.
	Batches []BatchStats `json:"batch_stats,omitempty"`
}

// add sums o into s, batch sizes with batch sizes.
func (s *InferStats) add(o InferStats) {
	s.InferenceCount += o.InferenceCount
	s.ExecutionCount += o.ExecutionCount
	s.LastInference = max(s.LastInference, o.LastInference)
	for _, p := range [][2]*StatDuration{{&s.Success, &o.Success}, {&s.Fail, &o.Fail}, {&s.Queue, &o.Queue},
		{&s.ComputeInput, &o.ComputeInput}, {&s.ComputeInfer, &o.ComputeInfer}, {&s.ComputeOutput, &o.ComputeOutput},
		{&s.CacheHit, &o.CacheHit}, {&s.CacheMiss, &o.CacheMiss}} {
		p[0].add(*p[1])
	}
	for _, b := range o.Batches {
		i, found := slices.BinarySearchFunc(s.Batches, b.Size, func(x BatchStats, size uint64) int { return cmp.Compare(x.Size, size) })
		if !found {
			s.Batches = slices.Insert(s.Batches, i, BatchStats{Size: b.Size})
		}
		s.Batches[i].ComputeInput.add(b.ComputeInput)
		s.Batches[i].ComputeInfer.add(b.ComputeInfer)
		s.Batches[i].ComputeOutput.add(b.ComputeOutput)
	}
}

// ModelStats are the summed InferStats of a job's workers.
type ModelStats struct {
	Job string
	// Model is the model the workers announce; Versions the versions they
	// serve (several while a model repository swaps versions).
	Model    string
	Versions []string
	// Workers is the number of workers whose stats are summed.
	Workers int
	InferStats
}

// Stats sums the inference statistics of job's workers (see StatsOf).
func (c *Client) Stats(ctx context.Context, job string) (ModelStats, error) {
	all, err := c.StatsOf(ctx, job)
	return all[job], err
}

// StatsOf sums the inference statistics of each of jobs' workers: it asks
// every worker on the mesh once ($SRV.STATS.cluster-serving-worker, as
// DiscoverWorkers) and returns once the answers stop coming (StatsQuiet,
// StatsWait), or sooner when ctx ends with its deadline, so that many
// jobs cost one wait. It asks the processes that count response cache
// lookups ($SRV.STATS.cluster-serving-cache, see Cache) at the same time
// and adds their counts. The sums cover the workers and processes running
// now: one that stopped takes its counts with it, and one that answers
// late is left out. A job without workers gets a zero ModelStats, not an
// error. It returns ctx.Err() when ctx is cancelled, and an error when
// the connection cannot ask.
func (c *Client) StatsOf(ctx context.Context, jobs ...string) (map[string]ModelStats, error) {
	var (
		counts map[string]InferStats
		cerr   error
		asked  = make(chan struct{})
	)
	go func() {
		defer close(asked)
		counts, cerr = cacheCounts(ctx, c.nc)
	}()
	ws, err := discover(ctx, c.nc, StatsWait, StatsQuiet)
	<-asked
	if err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("mesh: stats of %s: %w", strings.Join(jobs, ", "), err)
	}
	out := make(map[string]ModelStats, len(jobs))
	for _, job := range jobs {
		out[job] = ModelStats{Job: job}
	}
	for _, w := range ws {
		st, ok := out[w.Job]
		if !ok {
			continue
		}
		st.Workers++
		st.Model = cmp.Or(st.Model, w.Model)
		if !slices.Contains(st.Versions, w.ModelVersion) {
			st.Versions = append(st.Versions, w.ModelVersion)
		}
		st.add(w.Stats.Infer)
		out[w.Job] = st
	}
	for job, n := range counts {
		if st, ok := out[job]; ok {
			st.add(n)
			out[job] = st
		}
	}
	for _, st := range out {
		slices.Sort(st.Versions)
	}
	return out, nil
}

// inferCounter counts a worker's InferStats. It is the timing.Sink of
// the worker's requests: the batcher reports each model run to it. A
// request is counted before its answer leaves, so that its caller never
// reads stats without it, and taken back when the answer cannot be sent;
// an answer to a NATS caller is sent from another goroutine, and one that
// fails (its record runs again) stays counted. Safe for concurrent use;
// one mutex, taken once per request and once per run.
type inferCounter struct {
	mu      sync.Mutex
	s       InferStats // Batches unused: see batches
	batches map[int64]*BatchStats
}

var _ timing.Sink = (*inferCounter)(nil)

// Execution counts one model run of rows rows.
func (c *inferCounter) Execution(rows int64, input, infer, output time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.ExecutionCount++
	b := c.batches[rows]
	if b == nil {
		if c.batches == nil {
			c.batches = map[int64]*BatchStats{}
		}
		b = &BatchStats{Size: uint64(rows)}
		c.batches[rows] = b
	}
	b.ComputeInput.add(StatDuration{1, uint64(input)})
	b.ComputeInfer.add(StatDuration{1, uint64(infer)})
	b.ComputeOutput.add(StatDuration{1, uint64(output)})
}

// tally is one request's part of the counters, so that it can be taken
// back (untally) when its answer cannot be sent after all.
type tally struct {
	ok    bool
	rows  uint64
	end   time.Time
	total time.Duration
	times timing.Times
}

// request counts the request tr ended now, answered (ok) or failed, and
// returns its tally. tr nil (no timing) counts a failure of no time.
func (c *inferCounter) request(tr *timing.Request, ok bool) tally {
	t := tally{ok: ok, end: time.Now(), times: tr.Times()}
	if tr != nil {
		t.total = t.end.Sub(tr.Arrived)
	}
	t.rows = uint64(max(t.times.Rows, 1)) // a Predictor that does not say runs 1
	c.count(t, 1)
	return t
}

// untally takes back t.
func (c *inferCounter) untally(t tally) { c.count(t, -1) }

// count adds t to the counters sign times (1 or -1: uint64 arithmetic
// wraps, so adding the negation subtracts).
func (c *inferCounter) count(t tally, sign int64) {
	d := func(v time.Duration) StatDuration { return StatDuration{uint64(sign), uint64(sign * int64(v))} }
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.ok {
		c.s.Fail.add(d(t.total))
		return
	}
	c.s.InferenceCount += uint64(sign) * t.rows
	if sign > 0 {
		c.s.LastInference = uint64(t.end.UnixMilli())
	}
	c.s.Success.add(d(t.total))
	c.s.Queue.add(d(t.times.Queue))
	c.s.ComputeInput.add(d(t.times.Input))
	c.s.ComputeInfer.add(d(t.times.Infer))
	c.s.ComputeOutput.add(d(t.times.Output))
}

// snapshot returns the counts so far.
func (c *inferCounter) snapshot() InferStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.Batches = make([]BatchStats, 0, len(c.batches))
	for _, b := range c.batches {
		s.Batches = append(s.Batches, *b)
	}
	slices.SortFunc(s.Batches, func(a, b BatchStats) int { return cmp.Compare(a.Size, b.Size) })
	return s
}
