package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JobStatus is one job in the status document: its work queue as its
// workers' consumer counts it, and what its workers and the doors of
// every process say about it.
type JobStatus struct {
	Job string `json:"job"`
	// Models are the models whose workers serve the job.
	Models []string `json:"models"`
	// Pending requests wait in the queue; AckPending are in flight (taken
	// by a worker, not yet acknowledged); Redelivered were taken again
	// after a worker failed to answer them.
	Pending     uint64 `json:"pending"`
	AckPending  uint64 `json:"ackPending"`
	Redelivered uint64 `json:"redelivered"`
	// Delivered counts the deliveries to workers since the consumer was
	// made (the rate between two Statuses is their difference).
	Delivered uint64 `json:"delivered"`
	// Waiting counts the workers' pull requests waiting for work.
	Waiting int `json:"waiting"`
	// Rate is the requests of the job finished at the doors per second
	// over the last telemetry.RateWindow; Outcomes counts them by outcome
	// since each process started (telemetry.OutcomeOf).
	Rate     float64           `json:"rate"`
	Outcomes map[string]uint64 `json:"outcomes"`
	// Processed, Failed, Retried, Expired and Cancelled sum the workers'
	// counts (WorkerStats); Workers counts the workers.
	Processed uint64 `json:"processed"`
	Failed    uint64 `json:"failed"`
	Retried   uint64 `json:"retried"`
	Expired   uint64 `json:"expired"`
	Cancelled uint64 `json:"cancelled"`
	Workers   int    `json:"workers"`
	// LatencyP50Ms and LatencyP99Ms are the slowest worker's, pull to
	// acknowledgement; BatchSize the mean rows per model run.
	LatencyP50Ms float64 `json:"latencyP50Ms"`
	LatencyP99Ms float64 `json:"latencyP99Ms"`
	BatchSize    float64 `json:"batchSize"`
	// CacheHits and CacheMisses sum the response cache lookups of every
	// door on the mesh (Cache.Count); none without the cache.
	CacheHits   uint64 `json:"cacheHits,omitempty"`
	CacheMisses uint64 `json:"cacheMisses,omitempty"`
}

// DoorStatus is one door of one process: what it listens on ("" for NATS
// callers a worker process answers without serving the door itself),
// its requests by outcome, the rejected ones (Refused: a full queue or
// an exhausted token bucket), and its rate and latency (its slowest
// job's).
type DoorStatus struct {
	Door         string            `json:"door"`
	Listen       string            `json:"listen"`
	Process      string            `json:"process"`
	Host         string            `json:"host"`
	PID          string            `json:"pid"`
	Rate         float64           `json:"rate"`
	Requests     uint64            `json:"requests"`
	Refused      uint64            `json:"refused"`
	Outcomes     map[string]uint64 `json:"outcomes"`
	LatencyP50Ms float64           `json:"latencyP50Ms"`
	LatencyP99Ms float64           `json:"latencyP99Ms"`
}

// Status is a snapshot of the whole mesh, the document behind
// `cluster-serving status` (-json prints it) and the HTTP door's status
// page: every job's queue, every worker, every process's doors, the
// models they know and the last errors.
type Status struct {
	At      time.Time               `json:"at"`
	Jobs    []JobStatus             `json:"jobs"`
	Workers []WorkerInfo            `json:"workers"`
	Doors   []DoorStatus            `json:"doors"`
	Models  []ModelState            `json:"models"`
	Errors  []telemetry.ErrorRecord `json:"errors"`
}

// statusWait is how long TakeStatus waits for the workers' and
// processes' answers; maxErrors how many errors it keeps, newest first.
const (
	statusWait = 300 * time.Millisecond
	maxErrors  = 20
)

// TakeStatus discovers the mesh's workers and processes (waiting 300ms
// for their answers) and reads the queue of every job, the work-queue
// streams SERVING_<job>.
func TakeStatus(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) (*Status, error) {
	s := &Status{At: time.Now().UTC()}
	var (
		procs  []ProcessInfo
		counts map[string]InferStats
		perr   error
		cerr   error
	)
	done, counted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		procs, perr = DiscoverProcesses(ctx, nc, statusWait)
	}()
	go func() {
		defer close(counted)
		counts, cerr = cacheCounts(ctx, nc)
	}()
	ws, err := DiscoverWorkers(ctx, nc, statusWait)
	<-done
	<-counted
	if err = cmp.Or(err, perr, cerr); err != nil {
		return nil, fmt.Errorf("discover workers: %w", err)
	}
	s.Workers = ws
	jobs, err := jobNames(ctx, js)
	if err != nil {
		return nil, err
	}
	for _, job := range jobs {
		j := JobStatus{Job: job, Outcomes: map[string]uint64{}}
		if info, err := WorkersInfo(ctx, js, job); err == nil {
			j.Pending = info.NumPending
			j.AckPending = uint64(info.NumAckPending)
			j.Redelivered = uint64(info.NumRedelivered)
			j.Delivered = info.Delivered.Consumer
			j.Waiting = info.NumWaiting
		}
		s.addWorkers(&j)
		j.CacheHits, j.CacheMisses = counts[job].CacheHit.Count, counts[job].CacheMiss.Count
		s.Jobs = append(s.Jobs, j)
	}
	s.addProcesses(procs)
	return s, nil
}

// jobNames lists the jobs, the work-queue streams SERVING_<job> (not the
// _RESULTS ones), sorted.
func jobNames(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	lister := js.StreamNames(ctx)
	var jobs []string
	for name := range lister.Name() {
		if job, ok := strings.CutPrefix(name, StreamPrefix); ok && !strings.HasSuffix(name, ResultsStreamSuffix) {
			jobs = append(jobs, job)
		}
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	slices.Sort(jobs)
	return jobs, nil
}

// addWorkers sums the job's workers into j.
func (s *Status) addWorkers(j *JobStatus) {
	var rows, runs uint64
	for _, wk := range s.Workers {
		if wk.Job != j.Job {
			continue
		}
		st := wk.Stats
		j.Workers++
		j.Processed += st.Processed
		j.Failed += st.Failed
		j.Retried += st.Retried
		j.Expired += st.Expired
		j.Cancelled += st.Cancelled
		j.LatencyP50Ms = max(j.LatencyP50Ms, telemetry.Millis(st.P50))
		j.LatencyP99Ms = max(j.LatencyP99Ms, telemetry.Millis(st.P99))
		rows += st.Infer.InferenceCount
		runs += st.Infer.ExecutionCount
		if !slices.Contains(j.Models, wk.Model) {
			j.Models = append(j.Models, wk.Model)
		}
	}
	if runs > 0 {
		j.BatchSize = math.Round(float64(rows)/float64(runs)*100) / 100
	}
}

// addProcesses adds the processes' doors (summed into their jobs too),
// their models (one entry per name and version: READY when any process
// serves it) and their errors (newest first, at most maxErrors).
func (s *Status) addProcesses(procs []ProcessInfo) {
	models := map[[2]string]int{}
	for _, p := range procs {
		for _, d := range p.Stats.Doors {
			s.Doors = append(s.Doors, s.door(p, d))
		}
		for _, m := range p.Stats.Models {
			i, ok := models[[2]string{m.Name, m.Version}]
			switch {
			case !ok:
				models[[2]string{m.Name, m.Version}] = len(s.Models)
				s.Models = append(s.Models, m)
			case m.State == "READY":
				s.Models[i] = m
			}
		}
		s.Errors = append(s.Errors, p.Stats.Errors...)
	}
	slices.SortFunc(s.Models, func(a, b ModelState) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
	})
	slices.SortStableFunc(s.Errors, func(a, b telemetry.ErrorRecord) int { return b.At.Compare(a.At) })
	s.Errors = s.Errors[:min(len(s.Errors), maxErrors)]
}

// door is process p's door d as a DoorStatus; it adds d's jobs' rates
// and outcomes to the jobs of s. Listen loses any user info
// (telemetry.StripUserinfo) whatever the process published: a Redis
// door's URL may hold its password, and the document goes to every
// reader of the status page.
func (s *Status) door(p ProcessInfo, d telemetry.DoorTally) DoorStatus {
	ds := DoorStatus{Door: d.Door, Listen: telemetry.StripUserinfo(d.Listen), Process: p.Name, Host: p.Host, PID: p.PID, Outcomes: map[string]uint64{}}
	for _, jt := range d.Jobs {
		ds.Rate += jt.Rate
		ds.LatencyP50Ms = max(ds.LatencyP50Ms, jt.LatencyP50Ms)
		ds.LatencyP99Ms = max(ds.LatencyP99Ms, jt.LatencyP99Ms)
		i := slices.IndexFunc(s.Jobs, func(j JobStatus) bool { return j.Job == jt.Job })
		for o, n := range jt.Outcomes {
			ds.Outcomes[o] += n
			ds.Requests += n
			if i >= 0 {
				s.Jobs[i].Outcomes[o] += n
			}
		}
		if i >= 0 {
			s.Jobs[i].Rate += jt.Rate
		}
	}
	ds.Refused = ds.Outcomes[telemetry.OutcomeRejected]
	return ds
}

// Print writes the job and worker tables under a title naming url, the
// NATS server, without its user info (telemetry.StripUserinfo). Every
// number is a count of requests under its column's name, a rate (REQ/S)
// or a latency that carries its unit (850µs, 4.44ms, 1.2s); the legend
// under the tables says what each latency measures.
func (s *Status) Print(w io.Writer, url string) {
	fmt.Fprintf(w, "cluster-serving status — %s — %s\n\n", telemetry.StripUserinfo(url), s.At.Format("15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tREQ/S\tQUEUED\tIN FLIGHT\tREDELIVERED\tWORKERS\tLATENCY P50\tLATENCY P99")
	for _, j := range s.Jobs {
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%d\t%d\t%s\t%s\n", j.Job, j.Rate, j.Pending, j.AckPending, j.Redelivered, j.Workers,
			latencyMs(j.LatencyP50Ms), latencyMs(j.LatencyP99Ms))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tJOB\tMODEL\tVERSION\tHOST\tPID\tPROCESSED\tFAILED\tRETRIED\tIN FLIGHT\tLATENCY P50\tLATENCY P90\tLATENCY P99")
	for _, wk := range s.Workers {
		st := wk.Stats
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", shortID(wk.ID), wk.Job, wk.Model, cmp.Or(wk.ModelVersion, "-"), wk.Host, wk.PID,
			st.Processed, st.Failed, st.Retried, st.Inflight, latency(st.P50), latency(st.P90), latency(st.P99))
	}
	tw.Flush()
	if len(s.Workers) == 0 {
		fmt.Fprintln(w, "(no workers answered: start one with `cluster-serving start` or `cluster-serving worker`)")
	}
	s.printBatching(w)
	s.printDoors(w)
	fmt.Fprintln(w, "\nQUEUED, IN FLIGHT, REDELIVERED, PROCESSED, FAILED and RETRIED count requests.\n"+
		"LATENCY: a worker's, from pulling a request to acknowledging it, over its last 1,024 answered\n"+
		"requests (- before the first); a job's is its slowest worker's.")
	fmt.Fprintln(w, "REQ/S: the job's requests finished at the doors of every process, per second over the last 10 s.")
}

// printBatching writes, per job and model, whether its workers stack
// concurrent requests into one run and why (once per distinct answer:
// workers loaded with other settings show up on their own line).
func (s *Status) printBatching(w io.Writer) {
	type row struct{ job, model, batching, reason string }
	var rows []row
	for _, wk := range s.Workers {
		r := row{wk.Job, wk.Model, "-", wk.BatchReason}
		switch wk.Batching {
		case "true":
			r.batching = "yes"
		case "false":
			r.batching = "no"
		}
		if !slices.Contains(rows, r) {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tMODEL\tBATCHING\tWHY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.job, r.model, r.batching, cmp.Or(r.reason, "-"))
	}
	tw.Flush()
}

// printDoors writes every process's doors, then its last errors (the 5
// newest); nothing when no process answered.
func (s *Status) printDoors(w io.Writer) {
	if len(s.Doors) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DOOR\tLISTEN\tPROCESS\tHOST\tPID\tREQ/S (10s)\tREQUESTS\tREFUSED\tLATENCY P99")
		for _, d := range s.Doors {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f\t%d\t%d\t%s\n", d.Door, cmp.Or(d.Listen, "(its workers answer)"), d.Process, d.Host, d.PID,
				d.Rate, d.Requests, d.Refused, latencyMs(d.LatencyP99Ms))
		}
		tw.Flush()
	}
	if len(s.Errors) == 0 {
		return
	}
	fmt.Fprintln(w, "\nLAST ERRORS")
	for _, e := range s.Errors[:min(5, len(s.Errors))] {
		fmt.Fprintf(w, "%s  %s  %s  %d  %s  trace %s\n", e.At.Local().Format("15:04:05"), e.Door, cmp.Or(e.Job, "-"), e.Status, e.Message, cmp.Or(e.TraceID, "-"))
	}
}

// latency prints d with its unit and three significant digits or so:
// "850µs", "4.44ms", "1.2s"; "-" when unknown (zero).
func latency(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// latencyMs is latency of a figure of the document, in milliseconds.
func latencyMs(ms float64) string { return latency(time.Duration(ms * float64(time.Millisecond))) }

// shortID is a worker id cut to its first 8 characters.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
