package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	Bad      int64 // entries the door answered NaN itself (no data, refused by the mesh), or acked without a uri
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

	// lim logs each repeated failure (a retry, a NaN answer, a refused
	// write) once per cause with a count, never once per record or retry.
	lim *telemetry.LogLimit
}

// New checks cfg and returns a Door logging to logger (nothing when nil);
// it connects nothing until Run. The first New given a logger also routes
// go-redis's own log, which is process-wide, through it (routeGoredisLog).
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
	} else {
		routeGoredisLog(logger)
	}
	opt, _ := cfg.options() // checked by Validate
	log := logger.With("door", "redis", "job", cfg.Job)
	return &Door{cfg: cfg, m: m, log: log, rdb: goredis.NewClient(opt), lim: telemetry.NewLogLimit(log, 0)}, nil
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
	d.lim.Flush(context.WithoutCancel(ctx))
	st := d.Stats()
	d.log.Info("redis door stopped", "enqueued", st.Enqueued, "skipped", st.Skipped, "bad", st.Bad, "written", st.Written)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// writeOnce HSETs each result of a batch unless its marker says it was
// written already, and sets the marker, in one step. A door killed after
// its HSET but before its ack reached JetStream gets the result again
// (after mesh.ResultsAckWait, or when it restarts); the client may have
// read and deleted the key meanwhile, and a second HSET would bring it
// back as a duplicate. The marker lives writtenTTL. KEYS are pairs:
// result hash, marker; ARGV[1] the field, ARGV[2] the ttl in seconds,
// then one value per pair. One call writes a whole batch: a call per
// result cost Redis a script lookup and a Lua call each. EVAL, not
// EVALSHA: a restarted Redis has no script cache, and in a pipeline
// go-redis cannot fall back.
var writeOnce = goredis.NewScript(`
local n = 0
for i = 1, #KEYS, 2 do
  if redis.call('SET', KEYS[i+1], '1', 'NX', 'EX', ARGV[2]) then
    redis.call('HSET', KEYS[i], ARGV[1], ARGV[2 + (i+1)/2])
    n = n + 1
  end
end
return n`)

// maxWriteOnce bounds the results of one writeOnce call, so that one call
// holds Redis (single-threaded) for a short while only.
const maxWriteOnce = 64

// writtenTTL is how long a result's marker lives: JetStream's dedupe
// window. A result redelivered later than that (a door dead for longer)
// can be written twice. Each marker costs Redis about 100 bytes.
const writtenTTL = mesh.DuplicateWindow

// WrittenKey is the marker of a written result, by its record's message
// id: cluster-serving-written:<msgid>. It does not match the result keys'
// pattern cluster-serving_<job>:*, which clients list with KEYS.
func WrittenKey(msgID string) string { return "cluster-serving-written:" + msgID }

// writeResults HSETs a batch of results in one pipeline.
func (d *Door) writeResults(ctx context.Context, rs []mesh.Result) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	pipe := d.rdb.Pipeline()
	n := 0
	var keys []string
	args := []any{ResultField, int(writtenTTL.Seconds())}
	flush := func() {
		if len(keys) > 0 {
			writeOnce.Eval(ctx, pipe, keys, args...)
			keys, args = nil, args[:2:2]
		}
	}
	for _, r := range rs {
		if r.URI == "" {
			continue // not ours to answer: no key to write
		}
		v := NaN
		if r.Status == wire.StatusOK {
			v = string(r.Body)
		} else {
			d.lim.Log(ctx, slog.LevelWarn, "record answered NaN", r.Err(), "uri", logURI(r.URI))
		}
		if id := r.Header.Get(mesh.HeaderMsgID); id != "" {
			// Once per record, even when a door killed before its ack
			// gets the result again: see writeOnce.
			keys = append(keys, ResultKey(d.cfg.Job, r.URI), WrittenKey(id))
			args = append(args, v)
			if len(keys) == 2*maxWriteOnce {
				flush()
			}
		} else {
			pipe.HSet(ctx, ResultKey(d.cfg.Job, r.URI), ResultField, v)
		}
		n++
	}
	flush()
	if n == 0 {
		return nil
	}
	ctx, span := d.writeSpan(ctx, rs)
	_, err := pipe.Exec(ctx)
	telemetry.EndSpan(span, err)
	if err != nil {
		// Redis full or away: the results stay in JetStream and come back.
		d.writeFailing.Store(true)
		d.lim.Log(ctx, slog.LevelWarn, "writing results; they wait in JetStream and are retried", err, "results", n)
		return err
	}
	d.recordResults(ctx, rs)
	if d.writeFailing.Swap(false) {
		d.log.Info("writing results again")
	}
	d.written.Add(int64(n))
	return nil
}

// ingest owns the stream side: group, reclaim, read, hand over, ack.
func (d *Door) ingest(ctx context.Context) error {
	// Until the group exists nothing can be read; Redis may still be starting.
	for !d.try(ctx, "create group", d.ensureGroup) {
		if ctx.Err() != nil {
			return nil
		}
	}
	d.log.Info("serving redis stream", "addr", d.rdb.Options().Addr, "stream", d.cfg.Job, "group", Group, "consumer", d.cfg.Consumer)
	// Entries a previous run read but did not ack.
	for !d.try(ctx, "reclaim pending entries", d.reclaim) {
		if ctx.Err() != nil {
			return nil
		}
	}
	var lastScan time.Time
	scanEvery := d.cfg.Rescan
	stuck := false
	for ctx.Err() == nil {
		if stuck {
			// Too many entries could not be handed over (NATS away, the
			// work queue full): retry those before reading more, so that
			// an outage holds a few blocks pending, not the stream.
			stuck = d.retryStuck(ctx)
			continue
		}
		if time.Since(lastScan) >= scanEvery {
			scanEvery, lastScan = d.rescan(ctx, scanEvery), time.Now()
		}
		msgs, ok := d.read(ctx)
		if ok && len(msgs) > 0 && d.serve(ctx, msgs, false).left > 0 {
			stuck = d.heldTooMany(ctx)
		}
	}
	return nil
}

// maxRescan bounds how rarely an entry that keeps failing is retried.
const maxRescan = time.Minute

// rescan serves again this door's own pending entries and the entries the
// group skipped, and returns how long to wait before the next rescan,
// given the last wait.
func (d *Door) rescan(ctx context.Context, last time.Duration) time.Duration {
	h, err := d.retryOwnPending(ctx)
	if err == nil {
		err = d.serveSkipped(ctx)
	}
	switch {
	case err != nil:
		if ctx.Err() == nil {
			d.lim.Log(ctx, slog.LevelWarn, "serving pending and skipped entries; retrying", err)
		}
		return d.cfg.RetryInterval
	case h.stuck():
		// An entry that keeps failing while others pass is retried less
		// and less often, so that its Timeout per try does not slow the
		// stream down.
		return min(2*max(last, d.cfg.Rescan), maxRescan)
	}
	return d.cfg.Rescan
}

// heldTooMany reports whether this door's consumer holds two blocks or
// more pending: then it retries them before it reads more.
func (d *Door) heldTooMany(ctx context.Context) bool {
	p, err := d.rdb.XPending(ctx, d.cfg.Job, Group).Result()
	return err == nil && p.Consumers[d.cfg.Consumer] >= int64(2*d.cfg.Batch)
}

// retryStuck serves this door's own pending entries again and reports
// whether it still holds too many of them.
func (d *Door) retryStuck(ctx context.Context) bool {
	h, err := d.retryOwnPending(ctx)
	if err != nil {
		d.lim.Log(ctx, slog.LevelWarn, "retry own pending entries; retrying", err)
	}
	if err != nil || h.stuck() {
		d.sleep(ctx, d.cfg.RetryInterval)
	}
	return d.heldTooMany(ctx)
}

// read reads the next block of new entries; ok is false after an error,
// which it handled (logged, waited, group created again).
func (d *Door) read(ctx context.Context) (msgs []goredis.XMessage, ok bool) {
	res, err := d.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
		Group:    Group,
		Consumer: d.cfg.Consumer,
		Streams:  []string{d.cfg.Job, ">"},
		Count:    int64(d.cfg.Batch),
		Block:    d.cfg.Block,
	}).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil, true
	case err != nil:
		if ctx.Err() != nil {
			return nil, false
		}
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			// The stream (and its group) was deleted: create it again.
			d.try(ctx, "create group", d.ensureGroup)
			return nil, false
		}
		d.lim.Log(ctx, slog.LevelWarn, "XREADGROUP; retrying", err)
		d.sleep(ctx, d.cfg.RetryInterval)
		return nil, false
	}
	for _, s := range res {
		msgs = append(msgs, s.Messages...)
	}
	return msgs, true
}

// try runs fn; on error it logs, waits RetryInterval and reports false.
func (d *Door) try(ctx context.Context, what string, fn func(context.Context) error) bool {
	err := fn(ctx)
	if err == nil {
		return true
	}
	if ctx.Err() == nil {
		d.lim.Log(ctx, slog.LevelWarn, what+"; retrying", err)
		d.sleep(ctx, d.cfg.RetryInterval)
	}
	return false
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
// consumer: ones whose hand-over failed for a transient reason, whose XACK
// failed (Redis briefly away) or whose NaN could not be written. ingest
// hands entries over one block at a time, so between blocks none of them
// is in flight. Entries deleted meanwhile come back without fields and are
// only acked.
func (d *Door) retryOwnPending(ctx context.Context) (handover, error) {
	var h handover
	res, err := d.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
		Group: Group, Consumer: d.cfg.Consumer,
		Streams: []string{d.cfg.Job, "0"}, Count: int64(d.cfg.Batch),
	}).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return h, fmt.Errorf("XREADGROUP pending: %w", err)
	}
	for _, s := range res {
		if len(s.Messages) > 0 {
			h = d.serve(ctx, s.Messages, false)
		}
	}
	return h, nil
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

// handover counts what became of one block of entries.
type handover struct {
	stored   int // the mesh holds them
	answered int // answered by the door itself (NaN), or acked without a uri
	left     int // not handed over in time (transient failure): still pending
}

// stuck reports whether the mesh took none of the block and some of it is
// left: the mesh is away or full, not the entries at fault.
func (h handover) stuck() bool { return h.stored == 0 && h.left > 0 }

// serve hands msgs to the mesh concurrently, then XACKs and XDELs those
// the mesh stored and those answered NaN. An entry whose hand-over failed
// for a transient reason, or was cut short by ctx, stays pending: it is
// retried, by this run or by the next one.
func (d *Door) serve(ctx context.Context, msgs []goredis.XMessage, skipped bool) handover {
	done, bad, h := d.handOver(ctx, msgs, skipped)
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
	return h
}

// badEntry is an entry answered NaN by the door itself.
type badEntry struct{ id, uri string }

// handOver enqueues msgs concurrently. It returns the ids the mesh stored
// and the entries that can never be queued: no uri or data, or refused by
// the mesh as their own fault (400, 404, 413). Each entry's hand-over
// takes at most Timeout, so a failing entry holds the rest of its block
// no longer than that.
func (d *Door) handOver(ctx context.Context, msgs []goredis.XMessage, skipped bool) (done []string, bad []badEntry, h handover) {
	done = make([]string, 0, len(msgs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range msgs {
		req, ok := d.request(ctx, m)
		if !ok {
			mu.Lock()
			bad = append(bad, badEntry{m.ID, req.URI})
			h.answered++
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The entry's optional traceparent field makes this span the
			// client's child; the mesh continues it.
			ectx, span := d.receiveSpan(ctx, m.ID, req)
			defer span.End()
			o := d.enqueue(ectx, req)
			mu.Lock()
			defer mu.Unlock()
			switch o {
			case stored:
				done = append(done, m.ID)
				h.stored++
				d.enqueued.Add(1)
				if skipped {
					d.skipped.Add(1)
				}
			case rejected:
				d.bad.Add(1)
				bad = append(bad, badEntry{m.ID, req.URI})
				h.answered++
			default:
				h.left++
			}
		}()
	}
	wg.Wait()
	return done, bad, h
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
			d.lim.Log(ctx, slog.LevelWarn, "writing NaN for bad entries; they stay pending and are retried", c.Err(), "entries", len(bad))
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
			d.lim.Log(ctx, slog.LevelWarn, "XACK/XDEL; entries stay pending", err, "entries", len(ids))
			return
		}
		d.sleep(actx, d.cfg.RetryInterval)
	}
}

// maxTraceField bounds a traceparent or tracestate field passed on as a
// header: W3C allows 55 and 512 bytes.
const maxTraceField = 512

// request builds the mesh request of one entry; ok is false without uri
// or data, which it logs (an entry without fields was deleted already: it
// is only acked).
func (d *Door) request(ctx context.Context, m goredis.XMessage) (mesh.Request, bool) {
	uri, _ := m.Values["uri"].(string)
	data, _ := m.Values["data"].(string)
	serde, _ := m.Values["serde"].(string)
	req := mesh.Request{URI: uri, Body: []byte(data), MsgID: d.cfg.Job + ":" + m.ID, ContentType: wire.MediaTypeRedisArrow}
	if serde == "stream" {
		req.ContentType = wire.MediaTypeRedisJSON
	}
	for _, k := range []string{mesh.HeaderTraceParent, mesh.HeaderTraceState} {
		// A field a header cannot carry as it is would be changed or
		// refused on the way: the record goes on without it.
		if v, ok := m.Values[k].(string); ok && v != "" && len(v) <= maxTraceField && mesh.EncodeURI(v) == v {
			if req.Header == nil {
				req.Header = map[string][]string{}
			}
			req.Header[k] = []string{v}
		}
	}
	ok := uri != "" && data != ""
	switch {
	case ok || len(m.Values) == 0:
	case uri == "":
		d.bad.Add(1)
		d.lim.Log(ctx, slog.LevelWarn, "entry without uri: acked, no result can be written", nil, "id", m.ID)
	default:
		d.bad.Add(1)
		d.lim.Log(ctx, slog.LevelWarn, "entry without data: answering NaN", nil, "id", m.ID, "uri", logURI(uri))
	}
	return req, ok
}

// maxLoggedURI bounds the example uri a log line shows.
const maxLoggedURI = 128

// logURI writes uri for a log line escaped as %q does (control and
// non-UTF-8 bytes visible, unambiguous), without the quotes the log
// handler adds itself, cut to maxLoggedURI bytes.
func logURI(uri string) string {
	q := strconv.Quote(uri)
	if len(uri) > maxLoggedURI {
		q = strconv.Quote(uri[:maxLoggedURI])
		return fmt.Sprintf("%s... (%d bytes)", q[1:len(q)-1], len(uri))
	}
	return q[1 : len(q)-1]
}

// outcome is what became of one entry's hand-over.
type outcome int

const (
	stored   outcome = iota // the mesh holds it: ack and delete
	rejected                // it can never be queued: answer NaN, ack and delete
	left                    // not handed over (transient, stopped, misconfigured): it stays pending
)

// enqueue hands req to the mesh, retrying transient failures (a full work
// queue, NATS unreachable) for at most Timeout in all; then, or when ctx
// ends, the entry is left pending. The attempt in flight when ctx ends is
// finished, not abandoned. A refusal that is the request's fault (400,
// 404, 413: a uri over mesh.MaxURIBytes, a body over the NATS max
// payload) is not retried.
func (d *Door) enqueue(ctx context.Context, req mesh.Request) outcome {
	subject := mesh.ResultsSubject(d.cfg.Job, DoorName)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	defer cancel()
	for {
		err := d.m.Enqueue(ectx, d.cfg.Job, req, subject)
		switch st := wire.Status(err); {
		case err == nil:
			return stored
		case errors.Is(err, mesh.ErrInvalidJob) || errors.Is(err, mesh.ErrInvalidConfig):
			d.lim.Log(ctx, slog.LevelError, "enqueue refused; entries stay pending", err)
			return left
		case st == wire.StatusBadInput || st == wire.StatusNotFound || st == wire.StatusTooLarge:
			d.lim.Log(ctx, slog.LevelWarn, "record answered NaN: the mesh refused it", err, "uri", logURI(req.URI), "body_bytes", len(req.Body))
			return rejected
		case errors.Is(err, mesh.ErrQueueFull):
			d.lim.Log(ctx, slog.LevelWarn, "work queue full; entries stay pending and are retried", nil)
		default:
			d.lim.Log(ctx, slog.LevelWarn, "enqueue; entries stay pending and are retried", err)
		}
		d.sleep(ectx, d.cfg.RetryInterval)
		if ctx.Err() != nil || ectx.Err() != nil {
			return left
		}
	}
}
