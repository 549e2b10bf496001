package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JobStatus is one job's work queue as its workers' consumer counts it.
type JobStatus struct {
	Job string `json:"job"`
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
}

// Status is a snapshot of the mesh, what `cluster-serving status` shows:
// every job's queue and every worker that answered discovery.
type Status struct {
	At      time.Time    `json:"at"`
	Jobs    []JobStatus  `json:"jobs"`
	Workers []WorkerInfo `json:"workers"`
}

// TakeStatus discovers the mesh's workers (waiting 300ms for their
// answers) and reads the queue of every job, the work-queue streams
// SERVING_<job>.
func TakeStatus(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) (*Status, error) {
	s := &Status{At: time.Now()}
	ws, err := DiscoverWorkers(ctx, nc, 300*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("discover workers: %w", err)
	}
	s.Workers = ws
	// Jobs are the work-queue streams SERVING_<job> (not the _RESULTS ones).
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
	for _, job := range jobs {
		js1 := JobStatus{Job: job}
		if info, err := WorkersInfo(ctx, js, job); err == nil {
			js1.Pending = info.NumPending
			js1.AckPending = uint64(info.NumAckPending)
			js1.Redelivered = uint64(info.NumRedelivered)
			js1.Delivered = info.Delivered.Consumer
			js1.Waiting = info.NumWaiting
		}
		s.Jobs = append(s.Jobs, js1)
	}
	return s, nil
}

// Print writes the job and worker tables. Every number is a count of
// requests under its column's name, a rate (REQ/S) or a latency that
// carries its unit (850µs, 4.44ms, 1.2s); the legend under the tables says
// what each latency measures.
func (s *Status) Print(w io.Writer, prev *Status, url string) {
	fmt.Fprintf(w, "cluster-serving status — %s — %s\n\n", url, s.At.Format("15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tREQ/S\tQUEUED\tIN FLIGHT\tREDELIVERED\tWORKERS\tLATENCY P50\tLATENCY P99")
	for _, j := range s.Jobs {
		n, p50, p99 := 0, time.Duration(0), time.Duration(0)
		for _, wk := range s.Workers {
			if wk.Job == j.Job {
				n++
				p50 = max(p50, wk.Stats.P50)
				p99 = max(p99, wk.Stats.P99)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", j.Job, s.rate(prev, j), j.Pending, j.AckPending, j.Redelivered, n, latency(p50), latency(p99))
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
	fmt.Fprintln(w, "\nQUEUED, IN FLIGHT, REDELIVERED, PROCESSED, FAILED and RETRIED count requests.\n"+
		"LATENCY: a worker's, from pulling a request to acknowledging it, over its last 1,024 answered\n"+
		"requests (- before the first); a job's is its slowest worker's.")
	if prev == nil {
		fmt.Fprintln(w, "REQ/S appears from the second refresh on: requests delivered to workers per second between two refreshes.")
	}
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

// rate is the job's deliveries per second since prev, "-" without one.
func (s *Status) rate(prev *Status, j JobStatus) string {
	if prev == nil {
		return "-"
	}
	for _, p := range prev.Jobs {
		if p.Job == j.Job && j.Delivered >= p.Delivered {
			return fmt.Sprintf("%.1f", float64(j.Delivered-p.Delivered)/s.At.Sub(prev.At).Seconds())
		}
	}
	return "-"
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

// shortID is a worker id cut to its first 8 characters.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
