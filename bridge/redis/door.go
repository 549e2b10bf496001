package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Mesh is what the door needs from the mesh; *mesh.Client implements it.
// Its methods must be safe for concurrent use.
type Mesh interface {
	// Enqueue stores req in job's work queue; it returns once JetStream
	// holds it (nil), or mesh.ErrQueueFull, an error wrapping
	// wire.ErrTooLarge for a body NATS cannot take, or another error.
	Enqueue(ctx context.Context, job string, req mesh.Request, resultSubject string) error
	// ConsumeResultBatches hands the results published to
	// ResultsSubject(job, door) to handle, in batches, through the durable
	// consumer durable, and acks a batch once handle returned nil. It blocks
	// until ctx ends.
	ConsumeResultBatches(ctx context.Context, job, durable, door string, maxBatch int, handle func(context.Context, []mesh.Result) error) error
}

// Stats counts what a Door did since New.
type Stats struct {
	Enqueued int64 // entries handed to the mesh
	Skipped  int64 // of those, entries the consumer group had skipped
	Bad      int64 // entries without uri or data, answered NaN
	Written  int64 // results written to Redis
}

// Door serves one job's Redis stream: it owns its Redis connection pool,
// which Run closes on return, so Run it once. Stats is safe for concurrent
// use.
type Door struct {
	cfg Config
	m   Mesh
	log *slog.Logger
	rdb *goredis.Client

	enqueued, skipped, bad, written atomic.Int64
	writeFailing                    atomic.Bool

	warnMu sync.Mutex
	warned map[string]time.Time // last time each retried failure was logged
}

// New checks cfg and returns a Door; it connects nothing until Run.
// It returns an error wrapping ErrInvalidConfig for a bad cfg.
func New(cfg Config, m Mesh, logger *slog.Logger) (*Door, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%w: nil Mesh", ErrInvalidConfig)
	}
	cfg.defaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opt, _ := cfg.options() // checked by Validate
	return &Door{cfg: cfg, m: m, log: logger.With("door", "redis", "job", cfg.Job), rdb: goredis.NewClient(opt),
		warned: make(map[string]time.Time)}, nil
}

// Stats returns the counters.
func (d *Door) Stats() Stats {
	return Stats{Enqueued: d.enqueued.Load(), Skipped: d.skipped.Load(), Bad: d.bad.Load(), Written: d.written.Load()}
}

// Run serves the stream until ctx ends. On the way out it lets the
// enqueues and result writes in flight finish; entries not yet handed over
// stay pending in Redis and are reclaimed by the next Run. It returns nil
// after ctx ended, or the error that made it stop (a bad job name, results
// consumer that cannot start).
func (d *Door) Run(ctx context.Context) error {
	defer d.rdb.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.ingest(gctx) })
	g.Go(func() error {
		return d.m.ConsumeResultBatches(gctx, d.cfg.Job, d.cfg.Durable, DoorName, d.cfg.Batch, d.writeResults)
	})
	err := g.Wait()
	st := d.Stats()
	d.log.Info("redis door stopped", "enqueued", st.Enqueued, "skipped", st.Skipped, "bad", st.Bad, "written", st.Written)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// writeResults HSETs a batch of results in one pipeline.
func (d *Door) writeResults(ctx context.Context, rs []mesh.Result) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	pipe := d.rdb.Pipeline()
	n := 0
	for _, r := range rs {
		if r.URI == "" {
			continue // not ours to answer: no key to write
		}
		v := NaN
		if r.Status == wire.StatusOK {
			v = string(r.Body)
		} else {
			d.log.Debug("record failed", "uri", r.URI, "status", r.Status, "err", r.Message)
		}
		pipe.HSet(ctx, ResultKey(d.cfg.Job, r.URI), ResultField, v)
		n++
	}
	if n == 0 {
		return nil
	}
	ctx, span := d.writeSpan(ctx, rs)
	_, err := pipe.Exec(ctx)
	telemetry.EndSpan(span, err)
	if err == nil {
		d.recordResults(ctx, rs)
	}
	if err != nil {
		// Redis full or away: the results stay in JetStream and come back.
		// Say so once per outage, not once per retry.
		if !d.writeFailing.Swap(true) {
			d.log.Warn("writing results; they wait in JetStream and are retried", "results", n, "err", err)
		}
		return err
	}
	if d.writeFailing.Swap(false) {
		d.log.Info("writing results again")
	}
	d.written.Add(int64(n))
	return nil
}

// ingest owns the stream side: group, reclaim, read, hand over, ack.
func (d *Door) ingest(ctx context.Context) error {
	stream := d.cfg.Job
	// Until the group exists nothing can be read; Redis may still be starting.
	for !d.try(ctx, "create group", d.ensureGroup) {
		if ctx.Err() != nil {
			return nil
		}
	}
	d.log.Info("serving redis stream", "addr", d.rdb.Options().Addr, "stream", stream, "group", Group, "consumer", d.cfg.Consumer)
	// Entries a previous run read but did not ack.
	for !d.try(ctx, "reclaim pending entries", d.reclaim) {
		if ctx.Err() != nil {
			return nil
		}
	}
	var lastScan time.Time
	for ctx.Err() == nil {
		if time.Since(lastScan) >= d.cfg.Rescan {
			if d.try(ctx, "retry own pending entries", d.retryOwnPending) &&
				d.try(ctx, "serve skipped entries", d.serveSkipped) {
				lastScan = time.Now()
			}
		}
		res, err := d.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
			Group:    Group,
			Consumer: d.cfg.Consumer,
			Streams:  []string{stream, ">"},
			Count:    int64(d.cfg.Batch),
			Block:    d.cfg.Block,
		}).Result()
		switch {
		case errors.Is(err, goredis.Nil):
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				// The stream (and its group) was deleted: create it again.
				d.try(ctx, "create group", d.ensureGroup)
				continue
			}
			d.warnEvery("XREADGROUP; retrying", "err", err)
			d.sleep(ctx, d.cfg.RetryInterval)
			continue
		}
		for _, s := range res {
			d.serve(ctx, s.Messages, false)
		}
	}
	return nil
}

// try runs fn; on error it logs, waits RetryInterval and reports false.
func (d *Door) try(ctx context.Context, what string, fn func(context.Context) error) bool {
	err := fn(ctx)
	if err == nil {
		return true
	}
	if ctx.Err() == nil {
		d.warnEvery(what+"; retrying", "err", err)
		d.sleep(ctx, d.cfg.RetryInterval)
	}
	return false
}

// warnLogEvery is how often one retried failure is logged.
const warnLogEvery = 10 * time.Second

// warnEvery logs msg at most once per warnLogEvery: a Redis that is away
// for an hour should not write a line per retry.
func (d *Door) warnEvery(msg string, args ...any) {
	d.warnMu.Lock()
	last, ok := d.warned[msg]
	now := time.Now()
	if ok && now.Sub(last) < warnLogEvery {
		d.warnMu.Unlock()
		return
	}
	d.warned[msg] = now
	d.warnMu.Unlock()
	d.log.Warn(msg, args...)
}

func (d *Door) sleep(ctx context.Context, dt time.Duration) {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ensureGroup creates the stream and its group from the first entry; a
// group that exists already is left as it is.
func (d *Door) ensureGroup(ctx context.Context) error {
	// Look first: XGROUP CREATE is refused while Redis is out of memory,
	// even for a group that exists, and a full Redis is when the door must
	// keep consuming.
	if groups, err := d.rdb.XInfoGroups(ctx, d.cfg.Job).Result(); err == nil {
		for _, g := range groups {
			if g.Name == Group {
				return nil
			}
		}
	}
	err := d.rdb.XGroupCreateMkStream(ctx, d.cfg.Job, Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("XGROUP CREATE %s %s: %w", d.cfg.Job, Group, err)
	}
	return nil
}

// reclaim takes over and serves every pending entry of the group: the
// ones a killed run of this door (or of a door that ran elsewhere) read
// but never acked.
func (d *Door) reclaim(ctx context.Context) error {
	start := "0-0"
	for ctx.Err() == nil {
		msgs, next, err := d.rdb.XAutoClaim(ctx, &goredis.XAutoClaimArgs{
			Stream: d.cfg.Job, Group: Group, Consumer: d.cfg.Consumer,
			MinIdle: 0, Start: start, Count: int64(d.cfg.Batch),
		}).Result()
		if err != nil {
			return fmt.Errorf("XAUTOCLAIM: %w", err)
		}
		if len(msgs) > 0 {
			d.log.Info("serving entries left pending by an earlier run", "entries", len(msgs))
			d.serve(ctx, msgs, false)
		}
		if next == "0-0" || next == "" {
			return nil
		}
		start = next
	}
	return nil
}

// retryOwnPending serves again the entries pending for this door's own
// consumer: ones whose XACK failed (Redis briefly away) or whose NaN could
// not be written. ingest hands entries over one batch at a time, so between
// batches none of them is in flight. Entries deleted meanwhile come back
// without fields and are only acked.
func (d *Door) retryOwnPending(ctx context.Context) error {
	res, err := d.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
		Group: Group, Consumer: d.cfg.Consumer,
		Streams: []string{d.cfg.Job, "0"}, Count: int64(d.cfg.Batch),
	}).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("XREADGROUP pending: %w", err)
	}
	for _, s := range res {
		if len(s.Messages) > 0 {
			d.serve(ctx, s.Messages, false)
		}
	}
	return nil
}

// serveSkipped serves the entries at or below the group's last-delivered
// id that are not pending. The door deletes every entry it handled, so
// those are entries the group never delivered: a client created the group
// with $ after they were added. Their message ids make a second hand-over
// of an entry harmless.
func (d *Door) serveSkipped(ctx context.Context) error {
	groups, err := d.rdb.XInfoGroups(ctx, d.cfg.Job).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return d.ensureGroup(ctx)
		}
		return fmt.Errorf("XINFO GROUPS: %w", err)
	}
	last := ""
	for _, g := range groups {
		if g.Name == Group {
			last = g.LastDeliveredID
		}
	}
	if last == "" || last == "0-0" {
		return nil
	}
	start := "-"
	for ctx.Err() == nil {
		msgs, err := d.rdb.XRangeN(ctx, d.cfg.Job, start, last, int64(d.cfg.Batch)).Result()
		if err != nil {
			return fmt.Errorf("XRANGE: %w", err)
		}
		if len(msgs) == 0 {
			return nil
		}
		pend, err := d.rdb.XPendingExt(ctx, &goredis.XPendingExtArgs{
			Stream: d.cfg.Job, Group: Group,
			Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(len(msgs)),
		}).Result()
		if err != nil {
			return fmt.Errorf("XPENDING: %w", err)
		}
		pending := make(map[string]bool, len(pend))
		for _, p := range pend {
			pending[p.ID] = true
		}
		skipped := msgs[:0:0]
		for _, m := range msgs {
			if !pending[m.ID] {
				skipped = append(skipped, m)
			}
		}
		if len(skipped) > 0 {
			d.log.Info("serving entries the consumer group skipped", "entries", len(skipped))
			d.serve(ctx, skipped, true)
		}
		if len(msgs) < d.cfg.Batch {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	return nil
}

// serve hands msgs to the mesh concurrently, then XACKs and XDELs those
// the mesh stored. An entry whose hand-over was cut short by ctx stays
// pending for the next run.
func (d *Door) serve(ctx context.Context, msgs []goredis.XMessage, skipped bool) {
	done, bad := d.handOver(ctx, msgs, skipped)
	// Ack even after ctx ended: what the mesh holds must leave the stream.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	defer cancel()
	// A bad entry leaves the stream only once its NaN is written; until
	// then it stays pending and retryOwnPending tries again.
	if len(bad) > 0 && d.answerNaN(actx, bad) {
		for _, b := range bad {
			done = append(done, b.id)
		}
	}
	if len(done) > 0 {
		d.ackAndDelete(ctx, actx, done)
	}
}

// badEntry is an entry answered NaN by the door itself.
type badEntry struct{ id, uri string }

// handOver enqueues msgs concurrently. It returns the ids the mesh stored
// and the entries that can never be queued (no uri or data, too large).
func (d *Door) handOver(ctx context.Context, msgs []goredis.XMessage, skipped bool) (done []string, bad []badEntry) {
	done = make([]string, 0, len(msgs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range msgs {
		req, ok := d.request(m)
		if !ok {
			if len(m.Values) > 0 { // no fields: deleted already, only ack
				d.bad.Add(1)
				d.log.Warn("bad entry: want fields uri and data", "id", m.ID, "uri", req.URI)
			}
			bad = append(bad, badEntry{m.ID, req.URI})
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The entry's optional traceparent field makes this span the
			// client's child; the mesh continues it.
			ectx, span := d.receiveSpan(ctx, m.ID, req)
			defer span.End()
			switch d.enqueue(ectx, req) {
			case stored:
				mu.Lock()
				done = append(done, m.ID)
				mu.Unlock()
				d.enqueued.Add(1)
				if skipped {
					d.skipped.Add(1)
				}
			case rejected:
				d.bad.Add(1)
				mu.Lock()
				bad = append(bad, badEntry{m.ID, req.URI})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return done, bad
}

// answerNaN writes NaN as the result of each bad entry that has a uri, in
// one pipeline, and reports whether Redis took them all.
func (d *Door) answerNaN(ctx context.Context, bad []badEntry) bool {
	cmds, _ := d.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, b := range bad {
			if b.uri != "" {
				p.HSet(ctx, ResultKey(d.cfg.Job, b.uri), ResultField, NaN)
			}
		}
		return nil
	})
	for _, c := range cmds {
		if c.Err() != nil {
			d.log.Warn("writing NaN for bad entries; they stay pending", "err", c.Err())
			return false
		}
	}
	return true
}

// ackAndDelete XACKs and XDELs ids with actx, retrying a few times unless
// ctx (the door's) ended.
func (d *Door) ackAndDelete(ctx, actx context.Context, ids []string) {
	for attempt := 0; ; attempt++ {
		_, err := d.rdb.Pipelined(actx, func(p goredis.Pipeliner) error {
			p.XAck(actx, d.cfg.Job, Group, ids...)
			p.XDel(actx, d.cfg.Job, ids...)
			return nil
		})
		if err == nil {
			return
		}
		if attempt >= 3 || ctx.Err() != nil {
			// They stay pending; the next reclaim hands them over again and
			// their message ids keep them from running twice.
			d.log.Warn("XACK/XDEL; entries stay pending", "entries", len(ids), "err", err)
			return
		}
		d.sleep(actx, d.cfg.RetryInterval)
	}
}

// request builds the mesh request of one entry; ok is false without uri or data.
func (d *Door) request(m goredis.XMessage) (mesh.Request, bool) {
	uri, _ := m.Values["uri"].(string)
	data, _ := m.Values["data"].(string)
	serde, _ := m.Values["serde"].(string)
	req := mesh.Request{URI: uri, Body: []byte(data), MsgID: d.cfg.Job + ":" + m.ID, ContentType: wire.MediaTypeRedisArrow}
	if serde == "stream" {
		req.ContentType = wire.MediaTypeRedisJSON
	}
	for _, k := range []string{mesh.HeaderTraceParent, mesh.HeaderTraceState} {
		if v, ok := m.Values[k].(string); ok && v != "" {
			if req.Header == nil {
				req.Header = map[string][]string{}
			}
			req.Header[k] = []string{v}
		}
	}
	return req, uri != "" && data != ""
}

// outcome is what became of one entry's hand-over.
type outcome int

const (
	stored   outcome = iota // the mesh holds it: ack and delete
	rejected                // it can never be queued: answer NaN, ack and delete
	left                    // stopped or misconfigured: it stays pending
)

// enqueue hands req to the mesh, retrying transient failures (a full work
// queue, NATS unreachable) until it is stored or ctx ends. The attempt in
// flight when ctx ends is finished, not abandoned.
func (d *Door) enqueue(ctx context.Context, req mesh.Request) outcome {
	subject := mesh.ResultsSubject(d.cfg.Job, DoorName)
	for {
		err := d.m.Enqueue(context.WithoutCancel(ctx), d.cfg.Job, req, subject)
		switch {
		case err == nil:
			return stored
		case errors.Is(err, mesh.ErrInvalidJob) || errors.Is(err, mesh.ErrInvalidConfig):
			d.log.Error("enqueue; entry stays pending", "uri", req.URI, "err", err)
			return left
		case errors.Is(err, wire.ErrTooLarge):
			// Larger than NATS takes: it can never be queued.
			d.log.Warn("record larger than the NATS max payload; answering NaN", "uri", req.URI, "bytes", len(req.Body))
			return rejected
		case errors.Is(err, mesh.ErrQueueFull):
			d.warnEvery("work queue full; entries stay pending and are retried", "uri", req.URI)
		default:
			d.warnEvery("enqueue; retrying", "uri", req.URI, "err", err)
		}
		if ctx.Err() != nil {
			return left
		}
		d.sleep(ctx, d.cfg.RetryInterval)
		if ctx.Err() != nil {
			return left
		}
	}
}
