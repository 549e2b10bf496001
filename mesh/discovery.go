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

	"github.com/cluster-serving/cluster-serving/telemetry"
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
			MetadataBatching: strconv.FormatBool(w.cfg.Batching), MetadataBatchReason: w.cfg.BatchReason, MetadataExecutionProvider: w.cfg.ExecutionProvider},
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

	// MetadataExecutionProvider names the worker's execution provider.
	MetadataExecutionProvider = "execution_provider"
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
	// ExecutionProvider is what the worker runs its model on ("" from a
	// worker that does not say); Started when its service started.
	ExecutionProvider string
	Started           time.Time
}

// MarshalJSON writes the worker as the status document shows it: flat,
// latencies in milliseconds, uptime in seconds (WorkerStats stays the
// wire format of the workers' stats endpoint).
func (w WorkerInfo) MarshalJSON() ([]byte, error) {
	st := w.Stats
	return json.Marshal(struct {
		ID                string    `json:"id"`
		Job               string    `json:"job"`
		Model             string    `json:"model"`
		ModelVersion      string    `json:"modelVersion"`
		Host              string    `json:"host"`
		PID               string    `json:"pid"`
		Batching          string    `json:"batching"`
		BatchReason       string    `json:"batchReason"`
		ExecutionProvider string    `json:"executionProvider"`
		Started           time.Time `json:"started"`
		UptimeS           float64   `json:"uptimeS"`
		Processed         uint64    `json:"processed"`
		Failed            uint64    `json:"failed"`
		Retried           uint64    `json:"retried"`
		Expired           uint64    `json:"expired"`
		Inflight          int64     `json:"inflight"`
		LatencyP50Ms      float64   `json:"latencyP50Ms"`
		LatencyP99Ms      float64   `json:"latencyP99Ms"`
	}{w.ID, w.Job, w.Model, w.ModelVersion, w.Host, w.PID, w.Batching, w.BatchReason, w.ExecutionProvider, w.Started,
		time.Since(w.Started).Round(100 * time.Millisecond).Seconds(), st.Processed, st.Failed, st.Retried, st.Expired, st.Inflight,
		telemetry.Millis(st.P50), telemetry.Millis(st.P99)})
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
	var out []WorkerInfo
	if err := gather(ctx, nc, WorkerServiceName, wait, quiet, func(st micro.Stats) { out = append(out, workerInfo(st)) }); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int {
		return cmp.Or(cmp.Compare(a.Job, b.Job), cmp.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// gather asks every instance of the micro service name for its stats
// and hands each answer to add (one at a time) until awaitAnswers ends
// the wait; add is never called after gather returns.
func gather(ctx context.Context, nc *nats.Conn, name string, wait, quiet time.Duration, add func(micro.Stats)) error {
	inbox := nc.NewInbox()
	var (
		mu   sync.Mutex
		done bool
		none bool
	)
	came := make(chan struct{}, 1)
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		var st micro.Stats
		ok := json.Unmarshal(m.Data, &st) == nil
		mu.Lock()
		if ok && !done {
			add(st)
		}
		none = none || m.Header.Get("Status") == "503" // no responders
		mu.Unlock()
		select {
		case came <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	defer func() { mu.Lock(); done = true; mu.Unlock() }()
	if err := nc.PublishRequest("$SRV.STATS."+name, inbox, nil); err != nil {
		return err
	}
	return awaitAnswers(ctx, came, wait, quiet, func() bool { mu.Lock(); defer mu.Unlock(); return none })
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

// workerInfo reads one worker's STATS answer.
func workerInfo(st micro.Stats) WorkerInfo {
	wi := WorkerInfo{ID: st.ID, Job: st.Metadata[MetadataJob], Model: st.Metadata["model"], Host: st.Metadata["host"], PID: st.Metadata["pid"],
		Batching: st.Metadata[MetadataBatching], BatchReason: st.Metadata[MetadataBatchReason], Started: st.Started}
	wi.ModelVersion = st.Metadata["modelVersion"]
	wi.ExecutionProvider = st.Metadata[MetadataExecutionProvider]
	for _, e := range st.Endpoints {
		if len(e.Data) > 0 {
			_ = json.Unmarshal(e.Data, &wi.Stats)
		}
	}
	return wi
}
