package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names; doc.go lists units and attributes.
const (
	MetricRequests          = "cluster_serving.requests"
	MetricRequestDuration   = "cluster_serving.request.duration"
	MetricStageDuration     = "cluster_serving.stage.duration"
	MetricBatchSize         = "cluster_serving.batch.size"
	MetricQueuePending      = "cluster_serving.queue.pending"
	MetricQueueAckPending   = "cluster_serving.queue.ack_pending"
	MetricWorkers           = "cluster_serving.workers"
	MetricModelLoadDuration = "cluster_serving.model.load.duration"
	MetricCacheLookups      = "cluster_serving.cache.lookups"
	MetricCacheDuration     = "cluster_serving.cache.lookup.duration"
)

// Explicit histogram boundaries.
var (
	// LatencyBuckets (seconds) span sub-millisecond decode/encode stages up
	// to multi-second queueing of a saturated job.
	LatencyBuckets = []float64{
		0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
		0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30,
	}
	// BatchSizeBuckets (records) are powers of two up to 512.
	BatchSizeBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	// ModelLoadBuckets (seconds) cover small ONNX files to multi-GB models.
	ModelLoadBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// QueueDepth is one job's JetStream consumer state, as reported by the
// callback given to Metrics.ObserveQueues.
type QueueDepth struct {
	Job        string
	Pending    int64 // messages not yet delivered (NumPending)
	AckPending int64 // delivered, not yet acked (NumAckPending)
}

// Metrics holds the project's instruments. Build it with NewMetrics after
// Setup: instruments made before the global meter provider is installed
// stay bound to the no-op. Its methods are safe for concurrent use and
// cost next to nothing when metrics are disabled.
type Metrics struct {
	meter           metric.Meter
	requests        metric.Int64Counter
	requestDuration metric.Float64Histogram
	stageDuration   metric.Float64Histogram
	batchSize       metric.Int64Histogram
	workers         metric.Int64UpDownCounter
	modelLoad       metric.Float64Histogram
	queuePending    metric.Int64ObservableGauge
	queueAckPending metric.Int64ObservableGauge
	cacheLookups    metric.Int64Counter
	cacheDuration   metric.Float64Histogram
	tally           *Tally
}

// Meter returns the project's meter from the global meter provider.
func Meter() metric.Meter { return otel.GetMeterProvider().Meter(ScopeName) }

// NewMetrics creates the instruments on meter (use Meter()). It returns
// the meter's error when an instrument cannot be created.
func NewMetrics(meter metric.Meter) (*Metrics, error) {
	var err error
	m := &Metrics{
		meter: meter,
		tally: NewTally(),
		requests: instrument(&err, meter.Int64Counter, MetricRequests, "{request}",
			"Requests finished at a door, by door, job and outcome."),
		requestDuration: instrument(&err, meter.Float64Histogram, MetricRequestDuration, "s",
			"End-to-end request time at the door, from receipt to result delivered.", LatencyBuckets...),
		stageDuration: instrument(&err, meter.Float64Histogram, MetricStageDuration, "s",
			"Time spent in one stage of a request: queue_wait, decode, infer, encode, result_write.", LatencyBuckets...),
		batchSize: instrument(&err, meter.Int64Histogram, MetricBatchSize, "{request}",
			"Records per inference batch.", BatchSizeBuckets...),
		workers: instrument(&err, meter.Int64UpDownCounter, MetricWorkers, "{worker}",
			"Running inference workers in this process."),
		modelLoad: instrument(&err, meter.Float64Histogram, MetricModelLoadDuration, "s",
			"Time to load a model into ONNX Runtime.", ModelLoadBuckets...),
		queuePending: instrument(&err, meter.Int64ObservableGauge, MetricQueuePending, "{message}",
			"Messages in a job's work queue not yet delivered to a worker."),
		queueAckPending: instrument(&err, meter.Int64ObservableGauge, MetricQueueAckPending, "{message}",
			"Messages delivered to workers and not yet acknowledged."),
		cacheLookups: instrument(&err, meter.Int64Counter, MetricCacheLookups, "{lookup}",
			"Response cache lookups at a door, by job, model and result (hit or miss)."),
		cacheDuration: instrument(&err, meter.Float64Histogram, MetricCacheDuration, "s",
			"Time of a response cache lookup at a door: decoding the request, the lookup and, on a hit, encoding the answer.", LatencyBuckets...),
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// instrument creates the instrument name with create, the meter's method
// for its kind, and keeps in *errp the first error of a series of calls,
// naming its instrument. WithUnit and WithDescription are options of every
// kind; buckets (WithExplicitBucketBoundaries) may only be given for a
// histogram, whose options alone take them.
func instrument[I, O any](errp *error, create func(string, ...O) (I, error), name, unit, desc string, buckets ...float64) I {
	opts := []O{any(metric.WithUnit(unit)).(O), any(metric.WithDescription(desc)).(O)}
	if buckets != nil {
		opts = append(opts, any(metric.WithExplicitBucketBoundaries(buckets...)).(O))
	}
	i, err := create(name, opts...)
	if err != nil && *errp == nil {
		*errp = fmt.Errorf("telemetry: %s: %w", name, err)
	}
	return i
}

// A nil *Metrics records nothing, so callers need no check.

// RecordRequest counts one request finished at a door and records its
// end-to-end duration, in the metrics and in the Tally.
func (m *Metrics) RecordRequest(ctx context.Context, door, job, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.tally.Request(door, job, outcome, d)
	if !m.requests.Enabled(ctx) && !m.requestDuration.Enabled(ctx) {
		return
	}
	set := metric.WithAttributeSet(attribute.NewSet(
		AttrDoor.String(door), AttrJob.String(job), AttrOutcome.String(outcome)))
	m.requests.Add(ctx, 1, set)
	m.requestDuration.Record(ctx, d.Seconds(), set)
}

// RecordAnswer records one request of job answered at door with status
// after d: RecordRequest of its outcome (OutcomeOf), and RecordError of
// msg when status is an error.
func (m *Metrics) RecordAnswer(ctx context.Context, door, job string, status int, msg string, d time.Duration) {
	m.RecordRequest(ctx, door, job, OutcomeOf(status), d)
	m.RecordError(ctx, door, job, status, msg)
}

// RecordError keeps one failed request of job at door with the message
// the door answered, among the Tally's last errors; a status below 400
// is no error and is ignored.
func (m *Metrics) RecordError(ctx context.Context, door, job string, status int, msg string) {
	if m == nil || status < 400 {
		return
	}
	m.tally.Error(ctx, door, job, status, msg)
}

// OpenDoor records that the process serves door on listen until the
// returned func is called (Tally.Open).
func (m *Metrics) OpenDoor(door, listen string) (closeDoor func()) {
	if m == nil {
		return func() {}
	}
	return m.tally.Open(door, listen)
}

// Tally is the process's own account of its doors' requests; nil for a
// nil Metrics.
func (m *Metrics) Tally() *Tally {
	if m == nil {
		return nil
	}
	return m.tally
}

// RecordStage records the time one request (or, for StageInfer, one
// batch) spent in stage.
func (m *Metrics) RecordStage(ctx context.Context, stage, job, model string, d time.Duration) {
	if m == nil {
		return
	}
	if !m.stageDuration.Enabled(ctx) {
		return
	}
	m.stageDuration.Record(ctx, d.Seconds(), metric.WithAttributeSet(attribute.NewSet(
		AttrStage.String(stage), AttrJob.String(job), AttrModel.String(model))))
}

// RecordBatch records the size of one inference batch.
func (m *Metrics) RecordBatch(ctx context.Context, job, model string, size int) {
	if m == nil {
		return
	}
	if !m.batchSize.Enabled(ctx) {
		return
	}
	m.batchSize.Record(ctx, int64(size), metric.WithAttributeSet(attribute.NewSet(
		AttrJob.String(job), AttrModel.String(model))))
}

// AddWorkers adds delta (+1 when a worker starts, -1 when it stops) to the
// running workers of job and model.
func (m *Metrics) AddWorkers(ctx context.Context, job, model string, delta int64) {
	if m == nil {
		return
	}
	if !m.workers.Enabled(ctx) {
		return
	}
	m.workers.Add(ctx, delta, metric.WithAttributeSet(attribute.NewSet(
		AttrJob.String(job), AttrModel.String(model))))
}

// RecordModelLoad records how long loading model took and whether it
// succeeded (OutcomeOK or OutcomeError).
func (m *Metrics) RecordModelLoad(ctx context.Context, model, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	if !m.modelLoad.Enabled(ctx) {
		return
	}
	m.modelLoad.Record(ctx, d.Seconds(), metric.WithAttributeSet(attribute.NewSet(
		AttrModel.String(model), AttrOutcome.String(outcome))))
}

// RecordCache counts one response cache lookup of job's model at a door,
// a hit (answered from the cache) or a miss, which took d.
func (m *Metrics) RecordCache(ctx context.Context, job, model string, hit bool, d time.Duration) {
	if m == nil {
		return
	}
	if !m.cacheLookups.Enabled(ctx) && !m.cacheDuration.Enabled(ctx) {
		return
	}
	result := CacheMiss
	if hit {
		result = CacheHit
	}
	set := metric.WithAttributeSet(attribute.NewSet(AttrJob.String(job), AttrModel.String(model), AttrResult.String(result)))
	m.cacheLookups.Add(ctx, 1, set)
	m.cacheDuration.Record(ctx, d.Seconds(), set)
}

// ObserveQueues registers fn to report the queue gauges at each collection
// (each Prometheus scrape). fn runs on the collector's goroutine with the
// scrape's ctx and should answer from JetStream consumer info within a
// second or so; an error skips this collection and goes to the OTel error
// handler (logged by Setup's logger). Unregister the returned registration
// when the consumers go away. It returns the meter's registration error.
func (m *Metrics) ObserveQueues(fn func(ctx context.Context) ([]QueueDepth, error)) (metric.Registration, error) {
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		depths, err := fn(ctx)
		if err != nil {
			return fmt.Errorf("telemetry: queue depth: %w", err)
		}
		for _, d := range depths {
			set := metric.WithAttributeSet(attribute.NewSet(AttrJob.String(d.Job)))
			o.ObserveInt64(m.queuePending, d.Pending, set)
			o.ObserveInt64(m.queueAckPending, d.AckPending, set)
		}
		return nil
	}, m.queuePending, m.queueAckPending)
	if err != nil {
		return nil, fmt.Errorf("telemetry: register queue callback: %w", err)
	}
	return reg, nil
}
