package mesh

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/infer"
)

// A batch work message (coalesce.go) is split by the worker into its
// requests, each run as a record of its own (an item: the same handle,
// gate slot, deadline, span and answer as a lone request). The stored
// message is settled once, when every item is:
//
//   - answers to NATS callers (ReplyCaller) wait in the batch and go out
//     together when the last item is done, then the message's ack is
//     confirmed (confirmAck). A worker killed before that leaves the
//     whole batch to run again with none of its callers answered; one
//     killed after has answered all of them. The window where a caller
//     could be answered twice is the one of a lone request: between its
//     answer and its ack;
//   - answers to a door's inbox go out at once, as for a lone request
//     (the door drops a second one);
//   - durable results (ReplyDurable) wait in the batch too, and those of
//     one results subject are stored together in one results message
//     when the last item is done (results_batch.go), before the batch
//     is acked: one store per batch rather than one per record. A worker
//     killed between the two runs the batch again, and the results'
//     Nats-Msg-Ids drop the second copies (the stream's dedupe, then the
//     doors' written markers);
//   - an item that goes back to the queue (nak) while others were
//     answered is stored again alone (HeaderAttempts carries its
//     deliveries), so that the batch's redelivery does not answer the
//     others again. When none was answered, the whole batch goes back.

// batch is one batch work message being run. ctx is the worker's work
// context: items settle through jetstream.Msg's methods, which take none.
type batch struct {
	w   *Worker
	ctx context.Context
	msg jetstream.Msg
	// md is msg's metadata, read once for all items (nats.go parses
	// the reply subject on each call); mdErr when it cannot be read.
	md    *jetstream.MsgMetadata
	mdErr error

	// durable: every item's answer is a durable result, so the batch
	// is acked as a lone durable record is, without waiting for the
	// server to confirm it (see respond).
	durable bool

	mu       sync.Mutex
	left     int           // items not yet settled
	answered int           // items settled with their answer sent
	back     []*batchItem  // items to run again
	delay    time.Duration // the longest nak delay asked for
	replies  []callerReply // answers to NATS callers and durable results, sent by finish
}

// callerReply is an item's answer held until the batch is done: to its
// NATS caller, or its durable result. count is the outcome's counter,
// taken back if the answer cannot be sent.
type callerReply struct {
	ctx   context.Context
	it    *batchItem
	r     Reply
	a     answer
	count *atomic.Uint64
}

// batchItem is one request of a batch, seen by the worker as a record:
// a jetstream.Msg whose settling methods report to its batch.
type batchItem struct {
	b       *batch
	i       int
	h       nats.Header
	data    []byte
	settled atomic.Bool
	member  *infer.Member // of the batch's group (dispatchBatch); nil: none
}

// dispatchBatch splits msg, a batch work message, and dispatches each of
// its requests. A body that is not a batch is ended (Term): no request
// in it can be answered or run.
func (w *Worker) dispatchBatch(ctx context.Context, g *gate, msg jetstream.Msg) {
	entries, err := decodeBatch(msg.Data())
	if err != nil {
		w.limit.Log(ctx, slog.LevelError, "mesh: drop batch work message", err)
		if err := msg.TermWithReason(err.Error()); err != nil {
			w.limit.Log(ctx, slog.LevelWarn, "mesh: settle", err)
		}
		return
	}
	w.held.add(msg)
	if dl := deadlineOf(msg.Headers()); !dl.IsZero() {
		w.held.bound(msg, dl)
	}
	b := &batch{w: w, ctx: ctx, msg: msg, left: len(entries), durable: true}
	for _, e := range entries {
		b.durable = b.durable && replyOf(e.h).Mode == ReplyDurable
	}
	b.md, b.mdErr = msg.Metadata()
	w.dispatchItems(ctx, g, b, entries)
}

// dispatchItems dispatches the requests of batch b as one infer.Group: a
// model that batches runs them as one run, its runner waiting for the
// group's items on their way rather than running the first alone. An
// item that will not reach the model leaves the group
// (infer.Member.Leave) as soon as the worker knows: when it settles,
// whatever ended it (a decode error, a passed deadline, a cancel), and
// before it is dispatched when the gate has no slot free for it (it
// would wait for a record to finish, and the others for it).
func (w *Worker) dispatchItems(ctx context.Context, g *gate, b *batch, entries []batchEntry) {
	grp := infer.NewGroup(len(entries))
	items := make([]*batchItem, len(entries))
	ctxs := make([]context.Context, len(entries))
	for i, e := range entries {
		items[i] = &batchItem{b: b, i: i, h: e.h, data: e.data}
		ctxs[i], items[i].member = grp.Member(ctx)
	}
	held := grp == nil // no group: nothing to leave
	for i, it := range items {
		if !held && !g.admits() {
			held = true // this item and those after it wait at the gate
			for _, rest := range items[i:] {
				rest.member.Leave()
			}
		}
		w.dispatch(ctxs[i], g, it)
	}
}

// reply holds an item's answer to its NATS caller, or its durable
// result, until the batch is done; the item is settled by it.
func (b *batch) reply(ctx context.Context, it *batchItem, r Reply, a answer, count *atomic.Uint64) {
	if it.settled.Swap(true) {
		return
	}
	it.member.Leave()
	b.mu.Lock()
	b.replies = append(b.replies, callerReply{ctx, it, r, a, count})
	b.settle()
}

// done settles an item: answered (sent already), or back to the queue
// after delay.
func (b *batch) done(it *batchItem, back bool, delay time.Duration) {
	if it.settled.Swap(true) {
		return
	}
	it.member.Leave()
	b.mu.Lock()
	if back {
		b.back = append(b.back, it)
		b.delay = max(b.delay, delay)
	} else {
		b.answered++
	}
	b.settle()
}

// settle counts one item settled, with b.mu held, and releases it; the
// last one finishes the batch on a goroutine of its own (it waits for
// the server's confirmation), counted in the worker's confirming.
func (b *batch) settle() {
	b.left--
	last := b.left == 0
	b.mu.Unlock()
	if !last {
		return
	}
	b.w.confirming.Add(1)
	b.w.spawn.run(func() {
		defer b.w.confirming.Done()
		b.finish()
	})
}

// finish sends the held answers, stores again alone the items that went
// back, and settles the batch message.
func (b *batch) finish() {
	w := b.w
	for _, cr := range b.storeResults() {
		if err := w.send(cr.ctx, cr.it.h, cr.r, cr.a); err != nil {
			w.limit.Log(cr.ctx, slog.LevelWarn, "mesh: send answer; will retry", err, "uri", cr.it.h.Get(HeaderURI))
			cr.count.Add(^uint64(0))
			w.retried.Add(1) // as deliver counts a lone record's failed answer
			b.back = append(b.back, cr.it)
			continue
		}
		b.answered++
	}
	if b.answered == 0 {
		w.nak(b.msg, b.delay) // nobody answered: the whole batch again
		return
	}
	delivered := uint64(1)
	if b.mdErr == nil {
		delivered = b.md.NumDelivered
	}
	delivered += attemptsOf(b.msg.Headers())
	for _, it := range b.back { // each counted in retried when it went back
		if err := w.requeue(b.ctx, b.msg, it, delivered); err != nil {
			w.limit.Log(b.ctx, slog.LevelWarn, "mesh: store a request of a batch again; the batch runs again and its answered callers may be answered twice", err)
			w.nak(b.msg, b.delay)
			return
		}
	}
	if b.durable {
		w.settle(b.msg, b.msg.Ack)
		return
	}
	w.confirmAck(b.ctx, b.msg)
}

// requeue stores item it of batch message msg alone in the job's work
// queue, with the deliveries it had. Its id is derived from the batch's
// and the delivery, so that a retried publish stores it once; a durable
// record keeps its own, which its result carries (a copy of the record
// stored under it already runs, and answers, in its stead).
func (w *Worker) requeue(ctx context.Context, msg jetstream.Msg, it *batchItem, delivered uint64) error {
	m := nats.NewMsg(WorkSubject(w.cfg.Stream.Job))
	for k, v := range it.h {
		m.Header[k] = v
	}
	m.Data = it.data
	id := it.h.Get(HeaderMsgID)
	if id == "" || replyOf(it.h).Mode != ReplyDurable {
		id = msg.Headers().Get(HeaderMsgID) + "." + strconv.Itoa(it.i) + "." + strconv.FormatUint(delivered, 10)
	}
	m.Header.Set(HeaderMsgID, id)
	m.Header.Set(HeaderAttempts, strconv.FormatUint(delivered, 10))
	n := max(w.parts, 1)
	subjects := workSubjects(w.cfg.Stream.Job, n)
	pctx, cancel := context.WithTimeout(ctx, resultPublishTimeout)
	defer cancel()
	_, err := w.route.publish(pctx, w.nc, w.js, subjects, firstPartition(id, n), m)
	return err
}

// attemptsOf reads HeaderAttempts: 0 when absent or unreadable.
func attemptsOf(h nats.Header) uint64 {
	v := h.Get(HeaderAttempts)
	if v == "" {
		return 0 // most records: no parse, no error to allocate
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// jetstream.Msg of an item: the batch message's metadata, subject and
// reply; the item's headers and body; settling reports to the batch;
// InProgress does nothing (the batch message is beaten as one, see held).

func (it *batchItem) Metadata() (*jetstream.MsgMetadata, error) { return it.b.md, it.b.mdErr }
func (it *batchItem) Data() []byte                              { return it.data }
func (it *batchItem) Headers() nats.Header                      { return it.h }
func (it *batchItem) Subject() string                           { return it.b.msg.Subject() }
func (it *batchItem) Reply() string                             { return it.b.msg.Reply() }
func (it *batchItem) Ack() error                                { it.b.done(it, false, 0); return nil }
func (it *batchItem) DoubleAck(context.Context) error           { it.b.done(it, false, 0); return nil }
func (it *batchItem) Nak() error                                { it.b.done(it, true, 0); return nil }
func (it *batchItem) NakWithDelay(d time.Duration) error        { it.b.done(it, true, d); return nil }
func (it *batchItem) InProgress() error                         { return nil }
func (it *batchItem) Term() error                               { it.b.done(it, false, 0); return nil }
func (it *batchItem) TermWithReason(string) error               { it.b.done(it, false, 0); return nil }
