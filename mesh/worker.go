package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/timing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Defaults applied by WorkerConfig for zero fields.
const (
	DefaultMaxInflight   = 64
	DefaultShutdownGrace = 30 * time.Second
	// maxAttempt bounds one attempt of a record without a deadline, in
	// AckWaits.
	maxAttempt = 10
	// resultPublishTimeout bounds the publish of a durable result, over
	// all the attempts on the results partitions.
	resultPublishTimeout = 10 * time.Second
)

// WorkerConfig configures a Worker. The zero value, with Stream.Job set,
// means all defaults.
type WorkerConfig struct {
	// Stream names the job and the stream settings Run ensures at start.
	Stream StreamConfig
	// MaxInflight bounds the records in Predict at once, over all
	// partitions; the pull batch of each partition is its share. Default 64.
	MaxInflight int
	// ShutdownGrace is how long Run lets in-flight records finish after ctx
	// ends before it cancels them and naks them for another worker. Default 30s.
	ShutdownGrace time.Duration
	// Logger receives errors the worker handles itself (failed publishes,
	// acks). Default: slog.Default().
	Logger *slog.Logger
	// Metrics records queue wait and result-write times; nil records none.
	Metrics *telemetry.Metrics
	// Model names the model in metrics, spans and worker discovery. Optional.
	Model string
	// ModelVersion is the version of Model the worker serves, announced
	// in discovery (status shows it; a model repository swaps versions).
	// Optional.
	ModelVersion string
	// Version is the SemVer the worker's micro service announces. Default 0.0.0.
	Version string
	// Batching and BatchReason tell worker discovery (status) whether the
	// model stacks records into one run, and why (infer.ModelInfo).
	Batching    bool
	BatchReason string
	// ExecutionProvider is the ONNX Runtime execution provider the
	// worker runs its model on, announced in discovery. Optional.
	ExecutionProvider string
}

func (c WorkerConfig) version() string {
	if c.Version == "" {
		return "0.0.0"
	}
	return c.Version
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c WorkerConfig) Validate() error {
	if err := c.Stream.Validate(); err != nil {
		return err
	}
	return CheckLimits(ErrInvalidConfig, Limit{"MaxInflight", c.MaxInflight}, Limit{"ShutdownGrace", c.ShutdownGrace})
}

// WorkerStats counts what a Worker did with the records it pulled.
type WorkerStats struct {
	// Processed counts records answered with status 200.
	Processed uint64
	// Failed counts records ended with an error result (400 or give-up 500).
	Failed uint64
	// Retried counts failed attempts handed back with a nak.
	Retried uint64
	// Expired counts records dropped unrun because their deadline passed,
	// or rejected unrun because their queue timeout did.
	Expired uint64
	// Cancelled counts records dropped unrun because their caller went
	// away (cancel.go).
	Cancelled uint64
	// AnsweredAlready counts records acked unrun because their NATS
	// caller had its answer already, or their durable result was stored,
	// by this worker or another one (see answered.go): a record delivered
	// again after its ack was lost, or handed over again by its door.
	AnsweredAlready uint64
	// Inflight is the number of records being processed now.
	Inflight int64
	// P50, P90 and P99 are latency percentiles (pull to settle) over the
	// last records answered with 200 (up to 1,024).
	P50, P90, P99 time.Duration
	// Infer are the worker's inference statistics (Triton's), which
	// Client.Stats sums over a job's workers.
	Infer InferStats
}

// Worker pulls records of one job from the shared workers consumer and
// runs them through a Predictor, up to MaxInflight at once. Run it once;
// Stats is safe for concurrent use.
type Worker struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cfg    WorkerConfig
	p      Predictor
	log    *slog.Logger
	route  *router   // result publishes to the results partitions
	held   *held     // records held, beaten with InProgress
	causes *causeLog // consume errors, once per cause
	purge  *purger   // removes answered records; set by Run
	spawn  *spawner  // the records' goroutines
	bounce *bouncer  // answers for doors' inboxes, sent again when missed; set by Run
	// answered knows the NATS callers answered lately, by this worker
	// and the job's others.
	answered *answered
	large    *bodies // bodies past max_payload (large.go)
	// confirming counts the answers to NATS callers waiting for their
	// ack's confirmation (confirmAck); stop waits for them.
	confirming sync.WaitGroup
	// limit logs per-record failures (publish, retry, ack) once per cause
	// with a count, never once per record or retry.
	limit *telemetry.LogLimit
	// parts is the number of partitions Run consumes (and publishes
	// results to); pullBatch each one's pull batch. Set by Run.
	parts, pullBatch int

	cancels *cancels             // callers that went away (cancel.go)
	gate    atomic.Pointer[gate] // Run's, for tests (export_test.go)

	processed, failed, retried, expired, cancelled atomic.Uint64
	answeredBefore                                 atomic.Uint64 // AnsweredAlready
	inflight                                       atomic.Int64
	lat                                            telemetry.LatencyRing
	infer                                          inferCounter

	// consuming is true from when Run pulls and shows in discovery until
	// ctx ends (see Consuming).
	consuming atomic.Bool
}

// Consuming reports whether Run pulls records and shows in discovery: a
// model repository waits for it before the old version's worker drains.
func (w *Worker) Consuming() bool { return w.consuming.Load() }

// NewWorker validates cfg. It does not touch the server until Run.
func NewWorker(nc *nats.Conn, cfg WorkerConfig, p Predictor) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w: Predictor is nil", ErrInvalidConfig)
	}
	cfg.Stream = cfg.Stream.withDefaults()
	cfg.MaxInflight = cmp.Or(cfg.MaxInflight, DefaultMaxInflight)
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, DefaultShutdownGrace)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("mesh: jetstream: %w", err)
	}
	log := cfg.Logger.With("job", cfg.Stream.Job)
	return &Worker{nc: nc, js: js, cfg: cfg, p: p, log: log, large: newBodies(nc, js), route: newRouter(DefaultAttemptTimeout), held: newHeld(), causes: newCauseLog(log),
		limit: telemetry.NewLogLimit(log, 0), spawn: newSpawner(spawnerIdle), answered: newAnswered(nc, cfg.Stream.Job), cancels: newCancels()}, nil
}

// Stats returns the counters so far.
func (w *Worker) Stats() WorkerStats {
	p := w.lat.Percentiles(0.50, 0.90, 0.99)
	return WorkerStats{
		Processed:       w.processed.Load(),
		Failed:          w.failed.Load(),
		Retried:         w.retried.Load(),
		Expired:         w.expired.Load(),
		Cancelled:       w.cancelled.Load(),
		Inflight:        w.inflight.Load(),
		P50:             p[0],
		P90:             p[1],
		P99:             p[2],
		Infer:           w.infer.snapshot(),
		AnsweredAlready: w.answeredBefore.Load(),
	}
}

// Run ensures the job's streams, then pulls and processes records from
// every partition of the job's work queue until ctx ends. Then it stops
// pulling, naks records not yet started, lets in-flight ones finish for up
// to ShutdownGrace, cancels and naks the rest, and returns nil. Run waits
// for every Predict call to return, so a Predictor must honour ctx. A
// partition that cannot be reached does not stop it (see consumers). It
// returns an error only when it cannot start for another reason than ctx
// ending.
func (w *Worker) Run(ctx context.Context) error {
	w.cfg.Metrics.AddWorkers(ctx, w.cfg.Stream.Job, w.cfg.Model, 1)
	defer w.cfg.Metrics.AddWorkers(context.WithoutCancel(ctx), w.cfg.Stream.Job, w.cfg.Model, -1)
	n, err := w.partitions(ctx)
	if err != nil || n == 0 {
		return err
	}
	w.parts, w.pullBatch = n, max(1, (w.cfg.MaxInflight+n-1)/n)
	// work outlives ctx by up to ShutdownGrace so in-flight records finish.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	beating := make(chan struct{})
	defer func() { cancelWork(); <-beating }()
	go func() { defer close(beating); w.held.run(work, w.cfg.Stream.AckWait/3) }()

	if w.bounce, err = newBouncer(w.nc, w.limit); err != nil {
		return err
	}
	defer w.bounce.close()
	bouncing := make(chan struct{})
	go func() { defer close(bouncing); w.bounce.run(work) }()
	defer func() { cancelWork(); <-bouncing }()
	if err := w.answered.listen(); err != nil {
		return err
	}
	defer w.answered.close()
	telling := make(chan struct{})
	go func() { defer close(telling); w.answered.run(work) }()
	defer func() { cancelWork(); <-telling }()

	if err := w.cancels.listen(w.nc, w.cfg.Stream.Job); err != nil {
		return err
	}
	defer w.cancels.close()

	g := newGate(w.cfg.MaxInflight)
	w.gate.Store(g)
	cs, slots := w.newConsumers(ctx, work, g, n)
	w.purge = newPurger(w.js, w.cfg.Stream, n, w.causes)
	purging := make(chan struct{})
	go func() { defer close(purging); w.purge.run(work) }()
	defer func() { cancelWork(); <-purging }()
	cs.start(work, slots)
	if w.cfg.Stream.Replicas > 1 && n > 1 {
		cfg := w.cfg.Stream
		cfg.Partitions = n
		go rebalance(ctx, w.js, cfg)
	}

	unregister, err := w.registerWorker()
	if err != nil {
		w.stop(cs, g, cancelWork)
		return err
	}
	defer unregister()

	w.consuming.Store(true)
	<-ctx.Done()
	w.consuming.Store(false)
	unregister() // leave discovery first: this worker takes no more work
	w.stop(cs, g, cancelWork)
	w.limit.Flush(context.WithoutCancel(ctx)) // counts of failures left out since their last line
	return nil
}

// partitions ensures the job's streams and returns how many work
// partitions to consume: those the config asks for, or more when the
// server has more (another process's config made them), so that no record
// is stranded. It returns 0 and no error when ctx ended while it started.
func (w *Worker) partitions(ctx context.Context) (int, error) {
	if err := EnsureStreams(ctx, w.js, w.cfg.Stream); err != nil {
		if ctx.Err() != nil {
			return 0, nil // stopped while starting
		}
		return 0, err
	}
	n, err := Partitions(ctx, w.js, w.cfg.Stream.Job)
	if ctx.Err() != nil {
		return 0, nil
	}
	if err != nil {
		w.log.Warn("mesh: list partitions; consuming those of the config", "partitions", w.cfg.Stream.Partitions, "err", err)
	}
	return max(n, w.cfg.Stream.Partitions), nil
}

// dispatch runs the handling of msg on a goroutine of its own once g admits it,
// and naks it when the worker is stopping.
func (w *Worker) dispatch(ctx context.Context, g *gate, msg jetstream.Msg) {
	if !g.enter(w.rankOf(msg.Subject())) {
		w.nak(msg, 0)
		return
	}
	w.spawn.run(func() {
		defer g.leave()
		w.handle(ctx, msg)
	})
}

// stop ends consuming: it stops pulling and drains within ShutdownGrace,
// then waits for the records in flight, cancelling them (so that they nak)
// once ShutdownGrace passes again.
func (w *Worker) stop(cs *consumers, g *gate, cancelWork context.CancelFunc) {
	close(g.stopping)
	cs.wait() // each partition drains, within ShutdownGrace
	done := g.close()
	select {
	case <-done:
	case <-time.After(w.cfg.ShutdownGrace):
		cancelWork() // in-flight Predict calls see ctx end and nak.
		<-done
	}
	// Answers whose ack waits for its confirmation get one more try's
	// time, then stop asking (a NATS server may be down for longer).
	confirmed := make(chan struct{})
	go func() { w.confirming.Wait(); close(confirmed) }()
	select {
	case <-confirmed:
	case <-time.After(ackConfirmTimeout):
		cancelWork()
		<-confirmed
	}
}

// handle runs one record and settles it: ack, term or nak.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	if w.answeredAlready(msg) {
		return
	}
	began := time.Now()
	w.inflight.Add(1)
	defer w.inflight.Add(-1)
	h := msg.Headers()
	ctx, span, delivered, arrived := w.startProcess(ctx, msg)
	// The request's stage times, counted in w.infer when it ends; its
	// queue time starts with the wait in the work queue.
	ctx, tr := timing.New(ctx, &w.infer)
	tr.Arrived = arrived
	tr.Add(timing.Queue, began.Sub(arrived))
	st := 0
	defer func() { endStatusSpan(span, st) }()

	pctx, cancel, expired := w.attemptContext(ctx, h)
	defer cancel()
	switch {
	case expired:
		// Nobody waits any more: answer 504 unrun (a durable door records
		// the failure) and end the record.
		w.expired.Add(1)
		st = status.Timeout
		w.fail(ctx, msg, st, "deadline passed before a worker took the request")
		return
	case delivered > uint64(w.cfg.Stream.MaxDeliver):
		// Every attempt ended without a settle: workers crashed or held it
		// past AckWait. End it so it does not stay stuck.
		st = status.Internal
		w.fail(ctx, msg, st, fmt.Sprintf("gave up after %d deliveries: no attempt finished within ack wait", delivered-1))
		return
	}
	var done bool
	sched := scheduledOf(h)
	if done, st = w.unscheduled(ctx, msg, h, sched); done {
		return
	}
	defer w.cancels.track(cancelKey(h), cancel)()
	pctx = w.withRank(pctx, msg, sched)

	ct := h.Get(HeaderContentType)
	ct = cmp.Or(ct, DefaultContentType)
	if dl, ok := pctx.Deadline(); ok {
		w.held.bound(msg, dl) // a hung Predict stops being beaten
	}
	body, err := w.large.body(pctx, h, msg.Data())
	var out []byte
	if err == nil {
		out, err = w.predict(pctx, ct, body)
	}
	if err != nil {
		span.RecordError(err)
		st = w.settleError(ctx, pctx, msg, err, delivered)
		return
	}
	st = w.settleOK(ctx, msg, out, delivered, began)
}

// predict calls the Predictor on one record. The record is outside input
// the Predictor decodes: a panic there becomes this record's error (a
// plain error: status 500, retried as any run failure), logged once with
// its stack, and the worker serves on.
func (w *Worker) predict(ctx context.Context, contentType string, body []byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.ErrorContext(ctx, "mesh: predict panicked", "panic", p, "stack", string(debug.Stack()))
			out, err = nil, fmt.Errorf("mesh: predict panicked: %v", p)
		}
	}()
	return w.p.Predict(ctx, contentType, body)
}

// startProcess starts the record's process span, the child of the door's
// publish span, after recording the time the message spent stored (a span
// of its own and a stage metric). It returns the delivery count too.
func (w *Worker) startProcess(ctx context.Context, msg jetstream.Msg) (_ context.Context, _ trace.Span, delivered uint64, arrived time.Time) {
	delivered, arrived = 1, time.Now()
	job := w.cfg.Stream.Job
	ctx = telemetry.Extract(ctx, msg.Headers())
	var queueWait time.Duration
	if md, err := msg.Metadata(); err == nil {
		delivered = md.NumDelivered
		queueWait = time.Since(md.Timestamp)
		arrived = md.Timestamp
		if !telemetry.SampledOut(trace.SpanFromContext(ctx)) {
			_, qs := stageTracer.Start(ctx, telemetry.SpanQueueWait, trace.WithTimestamp(md.Timestamp))
			qs.End()
		}
		w.cfg.Metrics.RecordStage(ctx, telemetry.StageQueueWait, job, w.cfg.Model, queueWait)
	}
	ctx, span := telemetry.Start(ctx, tracer, telemetry.SpanProcess, trace.SpanKindConsumer)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrMessagingSystem.String("nats"), telemetry.AttrMessagingDestination.String(WorkSubject(job)),
			telemetry.AttrJob.String(job), telemetry.AttrMessagingDelivery.Int64(int64(delivered)),
			telemetry.AttrQueueWaitMS.Float64(float64(queueWait.Microseconds())/1000))
	}
	delivered += attemptsOf(msg.Headers()) // a request of a batch stored again alone
	if ns, err := strconv.ParseInt(msg.Headers().Get(HeaderReceived), 10, 64); err == nil && ns < arrived.UnixNano() {
		arrived = time.Unix(0, ns) // the NATS door took it before it was stored
	}
	return ctx, span, delivered, arrived
}

// attemptContext bounds one attempt: by the caller's deadline
// (Cs-Deadline), expired when it has passed already; without one (a
// durable door's record) by maxAttempt AckWaits, so that a hung Predict
// cannot hold the record for ever while the heartbeats (held) keep
// JetStream from redelivering it.
func (w *Worker) attemptContext(ctx context.Context, h nats.Header) (pctx context.Context, cancel context.CancelFunc, expired bool) {
	if h.Get(HeaderDeadline) == "" {
		pctx, cancel = context.WithTimeout(ctx, maxAttempt*w.cfg.Stream.AckWait)
		return pctx, cancel, false
	}
	dl := deadlineOf(h)
	if dl.IsZero() {
		return ctx, func() {}, false
	}
	if !time.Now().Before(dl) {
		return ctx, func() {}, true
	}
	pctx, cancel = context.WithDeadline(ctx, dl)
	return pctx, cancel, false
}

// deadlineOf reads a work message's Cs-Deadline; zero when it has none
// or it cannot be read.
func deadlineOf(h nats.Header) time.Time {
	ns, err := strconv.ParseInt(h.Get(HeaderDeadline), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// settleOK answers out and acks the record; when the answer cannot be
// sent it naks the record to try again. It returns the status the
// process span records.
func (w *Worker) settleOK(ctx context.Context, msg jetstream.Msg, out []byte, delivered uint64, began time.Time) int {
	t := w.infer.request(timing.From(ctx), true) // before the answer leaves: its caller may ask for stats next
	if !w.respond(ctx, msg, answer{status.OK, out, ""}, msg.Ack, delivered, &w.processed) {
		w.infer.untally(t)
		return status.Internal
	}
	w.lat.Add(time.Since(began))
	return status.OK
}

// settleError settles a record whose Predict (under pctx) failed with err: a
// request at fault, outputs no try can write (status.ErrUnanswerable), a
// passed caller deadline and a last attempt end it
// with an error result; anything else goes back to the queue, at once when
// the worker is stopping (ctx ended), else after a growing delay. It
// returns the status the process span records.
func (w *Worker) settleError(ctx, pctx context.Context, msg jetstream.Msg, err error, delivered uint64) int {
	h := msg.Headers()
	st := status.Of(err)
	switch {
	case w.cancels.has(cancelKey(h)):
		// Its caller went away while it waited in the engine: nobody to answer.
		w.cancelled.Add(1)
		w.settle(msg, msg.Ack)
		return status.ClientClosed
	case errors.Is(err, infer.ErrQueueTimeout):
		// Its queue timeout passed in the engine's queue (REJECT).
		w.expired.Add(1)
		w.fail(ctx, msg, status.Busy, "Request timeout expired")
		return status.Busy
	case requestAtFault(st):
		w.fail(ctx, msg, st, message(err))
		return st
	case errors.Is(err, status.ErrUnanswerable):
		// The model ran; its outputs cannot be written, on any try.
		w.fail(ctx, msg, status.Internal, message(err))
		return status.Internal
	case ctx.Err() != nil:
		// Shutdown grace ran out: hand the record to another worker now.
		w.retried.Add(1)
		w.nak(msg, 0)
		return status.Busy
	case h.Get(HeaderDeadline) != "" && pctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		// The caller's deadline passed while we ran it; nobody waits.
		w.fail(ctx, msg, status.Timeout, "deadline exceeded: "+err.Error())
		return status.Timeout
	case delivered >= uint64(w.cfg.Stream.MaxDeliver):
		w.fail(ctx, msg, status.Internal, fmt.Sprintf("gave up after %d deliveries: %v", delivered, err))
		return status.Internal
	}
	level := slog.LevelWarn
	if st == status.Busy {
		level = slog.LevelDebug // busy: expected under load, retried.
	}
	w.limit.Log(ctx, level, "mesh: predict, will retry", err, "uri", h.Get(HeaderURI), "delivery", delivered)
	w.retried.Add(1)
	w.nak(msg, w.cfg.Stream.backoff(delivered))
	return status.Internal
}

// requestAtFault reports whether a Predict error of status st says the
// request itself is wrong (400, 404, 413: a 4xx but 429 and 499), so that
// no retry can help: the caller gets st and the record ends.
func requestAtFault(st int) bool {
	return st >= 400 && st < 500 && st != status.TooManyRequests && st != status.ClientClosed
}

// message is what the caller reads of a failed Predict: a *status.Error's
// own message, else the error's text.
func message(err error) string {
	var we *status.Error
	if errors.As(err, &we) {
		return we.Message
	}
	return err.Error()
}

// fail answers an error result and ends the record (Term: never again).
// When the answer cannot be sent the record is nakked to try again.
func (w *Worker) fail(ctx context.Context, msg jetstream.Msg, st int, message string) {
	t := w.infer.request(timing.From(ctx), false)
	if !w.respond(ctx, msg, answer{st, nil, message}, msg.Term, 1, &w.failed) {
		w.infer.untally(t)
	}
}

// settle ends a record with f (msg.Ack or msg.Term) and nak puts it back;
// each first stops its heartbeats.
func (w *Worker) settle(msg jetstream.Msg, f func() error) {
	w.held.remove(msg)
	if err := f(); err != nil {
		w.limit.Log(context.Background(), slog.LevelWarn, "mesh: settle", err)
	}
	w.purge.settled(len(msg.Data()))
}

func (w *Worker) nak(msg jetstream.Msg, delay time.Duration) {
	w.held.remove(msg)
	var err error
	if delay > 0 {
		err = msg.NakWithDelay(delay)
	} else {
		err = msg.Nak()
	}
	if err != nil {
		w.limit.Log(context.Background(), slog.LevelWarn, "mesh: nak", err)
	}
}
