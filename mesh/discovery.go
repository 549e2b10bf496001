package mesh

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// WorkerServiceName is the micro service every running Worker registers,
// so that `cluster-serving status` (or any NATS client) finds the workers
// of the mesh with $SRV.PING/INFO/STATS.cluster-serving-worker. Its stats
// endpoint data is the worker's WorkerStats.
const WorkerServiceName = "cluster-serving-worker"

// WorkerStatsSubject is the subject of the workers' stats endpoint of job:
// serving.<job>.workers.stats (a request reaches one worker; use
// $SRV.STATS.cluster-serving-worker to hear from all of them).
func WorkerStatsSubject(job string) string { return SubjectPrefix + "." + job + ".workers.stats" }

// registerWorker adds the worker's micro service; stop removes it.
func (w *Worker) registerWorker() (stop func(), err error) {
	host, _ := os.Hostname()
	svc, err := micro.AddService(w.nc, micro.Config{
		Name:        WorkerServiceName,
		Version:     w.cfg.version(),
		Description: "cluster-serving inference worker",
		Metadata: map[string]string{MetadataJob: w.cfg.Stream.Job, "model": w.cfg.Model, "modelVersion": w.cfg.ModelVersion, "host": host, "pid": fmt.Sprint(os.Getpid()),
			MetadataBatching: strconv.FormatBool(w.cfg.Batching), MetadataBatchReason: w.cfg.BatchReason},
		StatsHandler: func(*micro.Endpoint) any {
			return w.Stats()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mesh: register worker service: %w", err)
	}
	if err := svc.AddEndpoint("stats", micro.HandlerFunc(func(r micro.Request) {
		b, _ := json.Marshal(w.Stats())
		_ = r.Respond(b)
	}), micro.WithEndpointSubject(WorkerStatsSubject(w.cfg.Stream.Job))); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("mesh: register worker stats endpoint: %w", err)
	}
	return func() { _ = svc.Stop() }, nil
}

// Metadata keys of the worker service saying whether its model batches
// ("true" or "false") and why (infer.ModelInfo.BatchReason).
const (
	MetadataBatching    = "batching"
	MetadataBatchReason = "batching_reason"
)

// WorkerInfo is one worker found on the mesh.
type WorkerInfo struct {
	ID    string
	Job   string
	Model string
	Host  string
	PID   string
	// Batching is "true" or "false" ("" from a worker that does not say);
	// BatchReason says why.
	Batching, BatchReason string
	Stats                 WorkerStats

	// ModelVersion is the version of Model the worker serves; "" from
	// a worker that does not say.
	ModelVersion string
}

// DiscoverWorkers asks every worker on the mesh for its stats and returns
// the answers that arrive within wait, sorted by job, host and pid.
func DiscoverWorkers(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]WorkerInfo, error) {
	return discover(ctx, nc, wait, 0)
}

// discover is DiscoverWorkers returning sooner: at once when no worker
// is subscribed (NATS answers "no responders"), and, with quiet > 0,
// once quiet passes without a new answer after the first one.
func discover(ctx context.Context, nc *nats.Conn, wait, quiet time.Duration) ([]WorkerInfo, error) {
	inbox := nc.NewInbox()
	var (
		mu   sync.Mutex
		out  []WorkerInfo
		none bool
	)
	came := make(chan struct{}, 1)
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		wi, ok := workerInfo(m)
		mu.Lock()
		if ok {
			out = append(out, wi)
		}
		none = none || m.Header.Get("Status") == "503" // no responders
		mu.Unlock()
		select {
		case came <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.STATS."+WorkerServiceName, inbox, nil); err != nil {
		return nil, err
	}
	if err := awaitAnswers(ctx, came, wait, quiet, func() bool { mu.Lock(); defer mu.Unlock(); return none }); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(out, func(a, b WorkerInfo) int {
		return cmp.Or(cmp.Compare(a.Job, b.Job), cmp.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID), cmp.Compare(a.ID, b.ID))
	})
	return slices.Clone(out), nil
}

// awaitAnswers waits for the answers signalled on came: wait in all, less
// once quiet (> 0) passes without one or none() says nobody will answer.
// It returns ctx.Err() when ctx is cancelled; a ctx deadline just ends
// the wait.
func awaitAnswers(ctx context.Context, came <-chan struct{}, wait, quiet time.Duration, none func() bool) error {
	all := time.NewTimer(wait)
	defer all.Stop()
	var hush <-chan time.Time
	for {
		select {
		case <-came:
			if none() {
				return nil
			}
			if quiet > 0 {
				hush = time.After(quiet)
			}
		case <-hush:
			return nil
		case <-all.C:
			return nil
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ctx.Err()
			}
			return nil
		}
	}
}

// workerInfo reads one worker's STATS answer; false when m is none.
func workerInfo(m *nats.Msg) (WorkerInfo, bool) {
	var st micro.Stats
	if json.Unmarshal(m.Data, &st) != nil {
		return WorkerInfo{}, false
	}
	wi := WorkerInfo{ID: st.ID, Job: st.Metadata[MetadataJob], Model: st.Metadata["model"], Host: st.Metadata["host"], PID: st.Metadata["pid"],
		Batching: st.Metadata[MetadataBatching], BatchReason: st.Metadata[MetadataBatchReason]}
	wi.ModelVersion = st.Metadata["modelVersion"]
	for _, e := range st.Endpoints {
		if len(e.Data) > 0 {
			_ = json.Unmarshal(e.Data, &wi.Stats)
		}
	}
	return wi, true
}

// latencyRing keeps the last 1,024 latencies for percentiles. Safe for
// concurrent use.
type latencyRing struct {
	mu  sync.Mutex
	buf [1024]time.Duration
	n   int
}

func (r *latencyRing) add(d time.Duration) {
	r.mu.Lock()
	r.buf[r.n%len(r.buf)] = d
	r.n++
	r.mu.Unlock()
}

// percentiles returns the q-quantiles (0..1) of the kept latencies; zeros
// when none were kept.
func (r *latencyRing) percentiles(qs ...float64) []time.Duration {
	r.mu.Lock()
	n := min(r.n, len(r.buf))
	s := slices.Clone(r.buf[:n])
	r.mu.Unlock()
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	slices.Sort(s)
	for i, q := range qs {
		out[i] = s[min(n-1, int(q*float64(n)))]
	}
	return out
}
