package infer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/timing"
)

// RunFunc runs one stacked batch on runner r (0 <= r < Runners) and returns
// one tensor per model output. The Batcher calls it from r's goroutine only,
// so a RunFunc may keep per-runner state (a Session) without locking.
type RunFunc func(r int, inputs []Tensor) ([]Tensor, error)

// BatcherConfig configures a Batcher. Zero values mean the defaults of the
// matching Config fields.
type BatcherConfig struct {
	Runners   int           // runner goroutines sharing the queue; default 1
	MaxBatch  int           // most rows (sum of items' dim 0) per run; default 16
	MaxWait   time.Duration // see Batcher; default 0
	QueueSize int           // bounded queue of items; default 1024
	// Unbatchable makes every item run alone, for models whose batch dim is
	// fixed.
	Unbatchable bool
	// HoldIdle makes a record that finds a runner idle wait MaxWait for
	// more too, as Triton's dynamic batcher holds a request up to its
	// max_queue_delay_microseconds: batches form at any load, at the cost
	// of that delay on a lone request.
	HoldIdle bool
	// Preferred are Triton's preferred_batch_size: once the queue holds
	// rows enough for one of them, a batch of the largest reached runs
	// at once, not waiting MaxWait, and a longer queue is cut there;
	// below the smallest, a batch takes what queued, up to MaxBatch.
	Preferred []int
	// GroupWait is how long a runner that took a record of a Group (a
	// coalesced message's requests) waits for news of the group's
	// others (one arriving or leaving) before it runs what came.
	// Default DefaultGroupWait.
	GroupWait time.Duration
	// OnBatch, if set, is called by a runner before each run with the number
	// of items and rows in it. Tests and metrics use it; it must not block.
	OnBatch func(items, rows int)
	// OnRun, if set, is called after each model run with its duration.
	OnRun func(ctx context.Context, d time.Duration)
}

// Batcher stacks records from concurrent callers into batches and runs them
// on Runners goroutines that share one bounded queue.
//
// A record that finds a runner idle runs at once (unless HoldIdle), but
// for one of a Group (the requests of one coalesced message): its runner
// waits for the group's others while they are still coming, never past
// a full batch (see Group). So batching never adds latency to a lone
// request on an idle model. While every runner is busy, records queue; a
// runner that finishes a run and finds records queued takes all of them up
// to MaxBatch rows (only those whose non-batch shapes equal the first
// record's; the others keep their place), and when MaxWait > 0 and the batch
// is not full it waits for more until the oldest record's arrival plus
// MaxWait. A record that comes while a runner is free (idle, or done with
// its run, even if it has not yet looked at the queue) never waits, so a
// caller's next call right after an answer runs at once. A batch is stacked along dim
// 0, run once and split back by each record's rows. When a batched run fails,
// or an output's dim 0 is not the batch's rows, each record is re-run alone
// so that one bad record cannot fail the others. Records whose ctx is done
// before they run are dropped.
//
// Batcher is safe for concurrent use. Submit never blocks on a full queue:
// it returns ErrQueueFull. Close is idempotent.
type Batcher struct {
	cfg BatcherConfig
	run RunFunc

	mu     sync.Mutex
	queue  []*item
	wake   chan struct{} // closed and replaced on every enqueue and on Close
	closed bool
	// enqSeq counts Submit calls; freeSeq[r] is its value when runner r
	// last finished a run, before it handed out the results. A queued
	// record of seq <= freeSeq[r] arrived while r was busy.
	enqSeq  uint64
	freeSeq []uint64

	wg sync.WaitGroup
}

type item struct {
	ctx    context.Context
	inputs []Tensor
	rows   int64
	enq    time.Time
	seq    uint64 // Batcher.enqSeq of its Submit
	prio   int    // WithPriority's: the queue is ordered by it, then seq
	// due is when the record's queue timeout passes (WithQueueTimeout;
	// zero: none), delay its DELAY action.
	due   time.Time
	delay bool
	done  chan itemResult // buffered 1: runners never block on it
	// grp is the group whose other requests a runner that takes this
	// record waits for; nil: none (see Member.arrive).
	grp *Group
	// tr collects its request's stage times (nil: none); the records of
	// one request share it and sit side by side in a batch.
	tr *timing.Request
}

type itemResult struct {
	outputs []Tensor
	err     error
}

// NewBatcher starts cfg.Runners runner goroutines calling run. Close stops
// them.
func NewBatcher(cfg BatcherConfig, run RunFunc) *Batcher {
	if cfg.Runners <= 0 {
		cfg.Runners = DefaultParallelism
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.GroupWait <= 0 {
		cfg.GroupWait = DefaultGroupWait
	}
	b := &Batcher{cfg: cfg, run: run, wake: make(chan struct{}), freeSeq: make([]uint64, cfg.Runners)}
	b.wg.Add(cfg.Runners)
	for r := range cfg.Runners {
		go b.runner(r)
	}
	return b
}

// Len returns the number of records waiting in the queue.
func (b *Batcher) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Submit queues records (each one tensor per model input, every tensor with
// the record's batch dim first, equal across its inputs) together and waits
// for their outputs. It returns ErrQueueFull when the queue has no room for
// all of them, ErrClosed after Close, ctx.Err() when ctx ends first, or the
// first record's error (wrapped with its index). A ctx of a Group's
// Member (Group.Member) counts the member in, arrived or, on an error
// before its records queued, gone.
func (b *Batcher) Submit(ctx context.Context, records [][]Tensor) ([][]Tensor, error) {
	return b.submitAt(ctx, records, 0)
}

// submitAt is Submit for records that start at index base of a larger
// request (Engine.Infer submits large ones in chunks): errors name the
// record by its index in that request.
func (b *Batcher) submitAt(ctx context.Context, records [][]Tensor, base int) ([][]Tensor, error) {
	if len(records) == 0 {
		return nil, nil
	}
	items := make([]*item, len(records))
	now := time.Now()
	tr := timing.From(ctx)
	q, _ := ctx.Value(queueingKey{}).(Queueing)
	for i, rec := range records {
		rows, ok := recordRows(rec)
		if !ok && !b.cfg.Unbatchable {
			return nil, NewInputError(base+i, "", "record has no batch dim")
		}
		items[i] = &item{ctx: ctx, inputs: rec, rows: rows, enq: now, done: make(chan itemResult, 1), tr: tr, prio: q.Priority, due: q.Due, delay: q.Delay}
		tr.AddRows(rows)
	}
	m := memberOf(ctx)
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		m.Leave()
		return nil, ErrClosed
	case len(b.queue)+len(items) > b.cfg.QueueSize:
		n := len(b.queue)
		b.mu.Unlock()
		m.Leave()
		return nil, fmt.Errorf("%w: %d queued, %d more do not fit in %d", ErrQueueFull, n, len(items), b.cfg.QueueSize)
	}
	b.enqSeq++
	grp := m.arrive(b, now)
	for _, it := range items {
		it.seq, it.grp = b.enqSeq, grp
	}
	b.queue = enqueue(b.queue, items, q.Priority)
	b.wakeAll()
	b.mu.Unlock()

	out := make([][]Tensor, len(items))
	var firstErr error
	for i, it := range items {
		select {
		case res := <-it.done:
			if res.err != nil && firstErr == nil {
				firstErr = recordError(res.err, base+i, len(items) > 1 || base > 0)
			}
			out[i] = res.outputs
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// enqueue adds items, all of priority prio, to queue: behind every
// record of the same or a higher priority (a lower prio), ahead of those
// of a lower one. Without priorities that is the end.
func enqueue(queue, items []*item, prio int) []*item {
	at := len(queue)
	for at > 0 && queue[at-1].prio > prio {
		at--
	}
	if at == len(queue) {
		return append(queue, items...)
	}
	return slices.Insert(queue, at, items...)
}

// Queueing is how a request's records wait in a Batcher's queue:
// those of a lower Priority run first, those of one priority in the
// order they came (records without one have priority 0); one still
// queued at Due (zero: never) fails with ErrQueueTimeout, or with Delay
// runs after every other record. A worker gives a record its priority
// level (Triton's priority_levels, 1 the highest) and queue timeout.
type Queueing struct {
	Priority int
	Due      time.Time
	Delay    bool
}

type queueingKey struct{}

// WithQueueing returns ctx whose records wait in a Batcher's queue as q says.
func WithQueueing(ctx context.Context, q Queueing) context.Context {
	return context.WithValue(ctx, queueingKey{}, q)
}

// ErrQueueTimeout is the error of a record still queued when its queue
// timeout passed (Queueing.Due); a worker answers it with Triton's
// words, "Request timeout expired". It wraps
// status.ErrBusy (503): the caller may retry.
var ErrQueueTimeout = fmt.Errorf("infer: request timeout expired: %w", status.ErrBusy)

// recordError names record i of a request in err: an *InputError gets
// its index, another error is wrapped with it when the request had
// several records.
func recordError(err error, i int, several bool) error {
	var ie *InputError
	switch {
	case errors.As(err, &ie) && ie.Instance < 0:
		cp := *ie
		cp.Instance = i
		return &cp
	case several:
		return fmt.Errorf("record %d: %w", i, err)
	}
	return err
}

// Close fails every queued record with ErrClosed, stops the runners and
// waits for the batches they are running. Idempotent.
func (b *Batcher) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.closed = true
	pending := b.queue
	b.queue = nil
	b.wakeAll()
	b.mu.Unlock()
	for _, it := range pending {
		it.done <- itemResult{err: ErrClosed}
	}
	b.wg.Wait()
	return nil
}

func (b *Batcher) runner(r int) {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		for len(b.queue) == 0 && !b.closed {
			wake := b.wake
			b.mu.Unlock()
			<-wake
			b.mu.Lock()
		}
		if b.closed {
			b.mu.Unlock()
			return
		}
		// Only records that queued while this runner was busy wait for
		// more; one that came after it went free (however soon after,
		// e.g. the next call of a caller it just answered) finds it idle,
		// unless its group's other requests are on their way.
		hold := (b.queue[0].seq <= b.freeSeq[r] || b.cfg.HoldIdle) && b.cfg.MaxWait > 0
		if !b.cfg.Unbatchable && (hold || b.queue[0].grp.waiting()) {
			b.waitForMore(hold)
			if b.closed || len(b.queue) == 0 {
				b.mu.Unlock()
				continue
			}
		}
		batch := b.take()
		b.mu.Unlock()
		if len(batch) > 0 {
			b.runBatch(r, batch)
		}
	}
}

// waitForMore waits, with b.mu held on entry and exit, until the queue holds
// a full batch, or Close, or both: the oldest record has waited MaxWait
// (when hold) and its group (see Group) has arrived or it has waited
// GroupWait.
func (b *Batcher) waitForMore(hold bool) {
	for !b.closed && len(b.queue) > 0 {
		if b.full() {
			return
		}
		head := b.queue[0]
		var until time.Time
		if hold {
			until = head.enq.Add(b.cfg.MaxWait)
		}
		if head.grp.waiting() {
			until = later(until, head.grp.until(b.cfg.GroupWait))
		}
		left := time.Until(until)
		if left <= 0 {
			return
		}
		wake := b.wake
		b.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		b.mu.Lock()
	}
}

// wakeAll wakes the runners waiting for the queue; b.mu must be held.
func (b *Batcher) wakeAll() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// poke wakes the runners, which look at the queue again: a member of a
// group they wait for left it (Member.Leave).
func (b *Batcher) poke() {
	b.mu.Lock()
	if !b.closed {
		b.wakeAll()
	}
	b.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// full reports whether the queue holds a full next batch: MaxBatch rows,
// or a preferred size. b.mu must be held.
func (b *Batcher) full() bool {
	rows := b.queuedRows()
	return rows >= b.limit(rows)
}

// queuedRows is the rows of the queued records shaped as the first: what
// the next batch can take from. b.mu must be held.
func (b *Batcher) queuedRows() int64 {
	first := b.queue[0]
	rows := int64(0)
	for _, it := range b.queue {
		if sameRecordShape(first, it) {
			rows += it.rows
		}
	}
	return rows
}

// limit is the most rows the next batch takes when queued rows wait: the
// largest preferred size they reach, else MaxBatch.
func (b *Batcher) limit(queued int64) int64 {
	lim := int64(0)
	for _, p := range b.cfg.Preferred {
		if p := int64(p); p <= queued && p <= int64(b.cfg.MaxBatch) {
			lim = max(lim, p)
		}
	}
	if lim == 0 {
		return int64(b.cfg.MaxBatch)
	}
	return lim
}

func (b *Batcher) take() []*item {
	var batch []*item
	rows, lim := int64(0), int64(b.cfg.MaxBatch)
	if len(b.cfg.Preferred) > 0 { // else the pass over the queue is not needed
		lim = b.limit(b.queuedRows())
	}
	rest := b.queue[:0]
	var late []*item
	now := time.Now()
	for i, it := range b.queue {
		if err := it.ctx.Err(); err != nil {
			it.done <- itemResult{err: err}
			continue
		}
		if !it.due.IsZero() && now.After(it.due) {
			if !it.delay {
				it.done <- itemResult{err: ErrQueueTimeout}
				continue
			}
			// DELAY: behind every other record, now and to come.
			it.due, it.prio = time.Time{}, math.MaxInt
			late = append(late, it)
			continue
		}
		full := len(batch) > 0 && (b.cfg.Unbatchable || rows+it.rows > lim)
		if full || (len(batch) > 0 && !sameRecordShape(batch[0], it)) {
			rest = append(rest, it)
			if full && b.cfg.Unbatchable {
				rest = append(rest, b.queue[i+1:]...)
				break
			}
			continue
		}
		batch = append(batch, it)
		rows += it.rows
	}
	rest = append(rest, late...)
	clear(b.queue[len(rest):])
	b.queue = rest
	return batch
}

// recordRows returns a record's rows: the dim 0 of its inputs, false when
// one is a scalar (it then counts as 1 row and runs alone) or it has none.
func recordRows(rec []Tensor) (int64, bool) {
	if len(rec) == 0 {
		return 1, false
	}
	for _, t := range rec {
		if len(t.Shape) == 0 {
			return 1, false
		}
	}
	return rec[0].Shape[0], true
}

func sameRecordShape(a, b *item) bool {
	if len(a.inputs) != len(b.inputs) {
		return false
	}
	for i := range a.inputs {
		x, y := a.inputs[i], b.inputs[i]
		if x.DType != y.DType || len(x.Shape) != len(y.Shape) || len(x.Shape) == 0 || !slices.Equal(x.Shape[1:], y.Shape[1:]) {
			return false
		}
	}
	return true
}

func (b *Batcher) runBatch(r int, batch []*item) {
	rows := int64(0)
	for _, it := range batch {
		rows += it.rows
	}
	if b.cfg.OnBatch != nil {
		b.cfg.OnBatch(len(batch), int(rows))
	}
	bctx, span := batchSpan(r, batch, rows)
	defer span.End()
	if len(batch) == 1 {
		b.runOne(bctx, r, batch[0])
		return
	}
	taken := time.Now()
	inputs, err := stackInputs(batch)
	stacked := time.Now()
	var outs []Tensor
	if err == nil {
		outs, err = b.safeRun(bctx, r, inputs)
	}
	if err == nil {
		for _, o := range outs {
			if len(o.Shape) == 0 || o.Shape[0] != rows {
				err = errors.New("output is not batched")
				break
			}
		}
	}
	if err != nil {
		b.runAlone(bctx, r, batch)
		return
	}
	ran := time.Now()
	per, err := splitOutputs(batch, outs)
	if err == nil {
		observe(batch, rows, taken, stacked, ran, time.Now())
	}
	hand(batch, per, err)
}

// observe reports one successful run of batch (rows rows), taken from
// the queue at taken, stacked at stacked, run by ran and cut back by cut,
// to its requests' timings (each request once: its records sit side by
// side) and to their sinks (each sink once).
func observe(batch []*item, rows int64, taken, stacked, ran, cut time.Time) {
	for i, it := range batch {
		if it.tr == nil || (i > 0 && batch[i-1].tr == it.tr) {
			continue
		}
		it.tr.Add(timing.Queue, taken.Sub(it.enq))
		it.tr.Add(timing.Input, stacked.Sub(taken))
		it.tr.Add(timing.Infer, ran.Sub(stacked))
		it.tr.Add(timing.Output, cut.Sub(ran))
		if s := it.tr.Sink(); s != nil && !sinkSeen(batch[:i], s) {
			s.Execution(rows, stacked.Sub(taken), ran.Sub(stacked), cut.Sub(ran))
		}
	}
}

// sinkSeen reports whether a record of batch reports to s. The records
// of one batch nearly always share one sink, which the first one has.
func sinkSeen(batch []*item, s timing.Sink) bool {
	for _, it := range batch {
		if it.tr.Sink() == s {
			return true
		}
	}
	return false
}

// batchSpan starts the batch's span: a root of its own that links to
// every request it serves; each request's span learns its batch size and
// queue wait. Links and attributes are built only for spans that record
// (the ratio sampler decides on the trace id alone, so the links need not
// be there at the start).
func batchSpan(r int, batch []*item, rows int64) (context.Context, trace.Span) {
	now := time.Now()
	ctx, span := tracer.Start(context.Background(), spanBatch, trace.WithNewRoot())
	recording := span.IsRecording()
	for _, it := range batch {
		rs := trace.SpanFromContext(it.ctx)
		if recording {
			if sc := rs.SpanContext(); sc.IsValid() {
				span.AddLink(trace.Link{SpanContext: sc})
			}
		}
		if rs.IsRecording() {
			rs.SetAttributes(attrBatchSize.Int(len(batch)), attrBatchWaitMS.Float64(float64(now.Sub(it.enq).Microseconds())/1000))
		}
	}
	if recording {
		span.SetAttributes(attrBatchSize.Int(len(batch)), attrBatchRows.Int64(rows), attrRunner.Int(r))
	}
	return ctx, span
}

// runAlone runs each record of a failed batch alone, so that one bad
// record does not fail the others.
func (b *Batcher) runAlone(ctx context.Context, r int, batch []*item) {
	for _, it := range batch {
		if it.ctx.Err() != nil {
			it.done <- itemResult{err: it.ctx.Err()}
			continue
		}
		if b.cfg.OnBatch != nil {
			b.cfg.OnBatch(1, int(it.rows))
		}
		b.runOne(ctx, r, it)
	}
}

// splitOutputs cuts a batch's outputs back into its records' rows.
func splitOutputs(batch []*item, outs []Tensor) ([][]Tensor, error) {
	ns := make([]int64, len(batch))
	for i, it := range batch {
		ns[i] = it.rows
	}
	per := make([][]Tensor, len(batch))
	for i := range per {
		per[i] = make([]Tensor, len(outs))
	}
	for j, o := range outs {
		pieces, err := Split(o, ns)
		if err != nil {
			return nil, err
		}
		for i, piece := range pieces {
			per[i][j] = piece
		}
	}
	return per, nil
}

// hand gives each record of batch its outputs, or every one err.
func hand(batch []*item, per [][]Tensor, err error) {
	for i, it := range batch {
		if err != nil {
			it.done <- itemResult{err: err}
			continue
		}
		it.done <- itemResult{outputs: per[i]}
	}
}

// stackInputs stacks the batch's records input by input.
func stackInputs(batch []*item) ([]Tensor, error) {
	inputs := make([]Tensor, len(batch[0].inputs))
	parts := make([]Tensor, len(batch))
	for j := range inputs {
		for i, it := range batch {
			parts[i] = it.inputs[j]
		}
		t, err := Stack(parts)
		if err != nil {
			return nil, err
		}
		inputs[j] = t
	}
	return inputs, nil
}

func (b *Batcher) runOne(ctx context.Context, r int, it *item) {
	taken := time.Now()
	outs, err := b.safeRun(ctx, r, it.inputs)
	if err == nil {
		now := time.Now()
		observe([]*item{it}, it.rows, taken, taken, now, now)
	}
	it.done <- itemResult{outputs: outs, err: err}
}

// safeRun turns a panic in run into an error so that a runner survives it.
func (b *Batcher) safeRun(ctx context.Context, r int, inputs []Tensor) (outs []Tensor, err error) {
	_, span := StartChild(ctx, tracer, spanRun)
	start := time.Now()
	defer func() {
		b.mu.Lock()
		b.freeSeq[r] = b.enqSeq
		b.mu.Unlock()
		if b.cfg.OnRun != nil {
			b.cfg.OnRun(ctx, time.Since(start))
		}
		if p := recover(); p != nil {
			err = fmt.Errorf("infer: run panicked: %v", p)
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	return b.run(r, inputs)
}
