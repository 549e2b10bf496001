package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// cmdStatus prints what the mesh is doing: per job the request rate,
// queue depth and latency, and every worker it finds (micro service
// discovery of cluster-serving-worker plus JetStream consumer info). It
// refreshes every -interval until Ctrl-C; -once prints one snapshot.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("c", "config.yaml", "config (natsUrl, else the embedded server's natsListen)")
	url := fs.String("nats", "", "NATS URL; overrides the config")
	interval := fs.Duration("interval", 2*time.Second, "refresh period")
	once := fs.Bool("once", false, "print one snapshot and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var file *serving.File
	if *url == "" {
		var err error
		if file, err = serving.LoadFile(*cfgPath); err != nil {
			return fmt.Errorf("%w (or pass -nats nats://host:4222)", err)
		}
	}
	nc, target, err := dial("cluster-serving status", *url, file)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	tty := isTerminal(stdout)
	var prev *snapshot
	for {
		snap, err := takeSnapshot(ctx, nc, js)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if tty && !*once {
			fmt.Fprint(stdout, "\033[H\033[2J") // home and clear
		}
		snap.print(stdout, prev, target)
		if *once {
			return nil
		}
		prev = snap
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

type jobStatus struct {
	job                              string
	pending, ackPending, redelivered uint64
	delivered                        uint64
	waiting                          int
}

type snapshot struct {
	at      time.Time
	jobs    []jobStatus
	workers []mesh.WorkerInfo
}

func takeSnapshot(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) (*snapshot, error) {
	s := &snapshot{at: time.Now()}
	ws, err := mesh.DiscoverWorkers(ctx, nc, 300*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("discover workers: %w", err)
	}
	s.workers = ws
	// Jobs are the work-queue streams SERVING_<job> (not the _RESULTS ones).
	lister := js.StreamNames(ctx)
	var jobs []string
	for name := range lister.Name() {
		if job, ok := strings.CutPrefix(name, mesh.StreamPrefix); ok && !strings.HasSuffix(name, mesh.ResultsStreamSuffix) {
			jobs = append(jobs, job)
		}
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	slices.Sort(jobs)
	for _, job := range jobs {
		js1 := jobStatus{job: job}
		if info, err := mesh.WorkersInfo(ctx, js, job); err == nil {
			js1.pending = info.NumPending
			js1.ackPending = uint64(info.NumAckPending)
			js1.redelivered = uint64(info.NumRedelivered)
			js1.delivered = info.Delivered.Consumer
			js1.waiting = info.NumWaiting
		}
		s.jobs = append(s.jobs, js1)
	}
	return s, nil
}

// print writes the job and worker tables. Every number is a count of
// requests under its column's name, a rate (REQ/S) or a latency that
// carries its unit (850µs, 4.44ms, 1.2s); the legend under the tables says
// what each latency measures.
func (s *snapshot) print(w io.Writer, prev *snapshot, url string) {
	fmt.Fprintf(w, "cluster-serving status — %s — %s\n\n", url, s.at.Format("15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tREQ/S\tQUEUED\tIN FLIGHT\tREDELIVERED\tWORKERS\tLATENCY P50\tLATENCY P99")
	for _, j := range s.jobs {
		n, p50, p99 := 0, time.Duration(0), time.Duration(0)
		for _, wk := range s.workers {
			if wk.Job == j.job {
				n++
				p50 = max(p50, wk.Stats.P50)
				p99 = max(p99, wk.Stats.P99)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", j.job, s.rate(prev, j), j.pending, j.ackPending, j.redelivered, n, latency(p50), latency(p99))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tJOB\tMODEL\tVERSION\tHOST\tPID\tPROCESSED\tFAILED\tRETRIED\tIN FLIGHT\tLATENCY P50\tLATENCY P90\tLATENCY P99")
	for _, wk := range s.workers {
		st := wk.Stats
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", shortID(wk.ID), wk.Job, wk.Model, cmp.Or(wk.ModelVersion, "-"), wk.Host, wk.PID,
			st.Processed, st.Failed, st.Retried, st.Inflight, latency(st.P50), latency(st.P90), latency(st.P99))
	}
	tw.Flush()
	if len(s.workers) == 0 {
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
func (s *snapshot) printBatching(w io.Writer) {
	type row struct{ job, model, batching, reason string }
	var rows []row
	for _, wk := range s.workers {
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
func (s *snapshot) rate(prev *snapshot, j jobStatus) string {
	if prev == nil {
		return "-"
	}
	for _, p := range prev.jobs {
		if p.job == j.job && j.delivered >= p.delivered {
			return fmt.Sprintf("%.1f", float64(j.delivered-p.delivered)/s.at.Sub(prev.at).Seconds())
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

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
