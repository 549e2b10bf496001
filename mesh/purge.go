package mesh

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Why the work queue is not a JetStream work-queue stream: with
// work-queue retention every ack deletes its message from the store, and
// nats-server's file store pays for that per message (nats-server issue
// 7487). When the queue runs empty, as it does between requests at any
// load below saturation, the delete also removes the message block file
// and the next publish creates a new one: in a profile of the NATS door
// with a tiny model, open, unlink and the block bookkeeping took about a
// quarter of the serving process's CPU. A limits stream keeps acked
// messages; the workers instead purge each partition below its consumer's
// ack floor from time to time (purger), which removes whole blocks at
// once. Nothing at or above the floor is touched, so a record not yet
// answered is never lost, and JetStream's duplicate window is kept
// across purges, so the dedupe of Nats-Msg-Id holds as before.
//
// The cost: the queue's MaxMsgs and MaxBytes count answered records until
// the next purge. A worker purges every purgeEvery, and sooner once it has
// settled a quarter of a partition's limit since its last purge.

// purgeEvery is how often a worker purges the answered records of the
// partitions it consumes, while it settles records and for
// purgeRoundsAfterSettle ticks after the last.
const (
	purgeEvery             = time.Second
	purgeRoundsAfterSettle = 2
)

// purger purges a job's work partitions below the workers consumer's ack
// floor. One runs per worker; several workers purging the same partition
// is harmless (a purge below the stream's first message does nothing).
type purger struct {
	js     jetstream.JetStream
	job    string
	causes *causeLog
	kick   chan struct{} // buffered 1: a purge is due
	// settles and bytes count the records this worker settled since the
	// last wake, and their bytes; at either threshold it wakes the purger.
	settles, bytes       atomic.Int64
	maxSettles, maxBytes int64
	// rounds is how many more ticks purge: set by each settle, so that
	// an idle worker asks the server nothing, and the round after the
	// last settle catches acks the server applied late.
	rounds atomic.Int32
	n      int // partitions
}

// newPurger returns a purger of the n work partitions of cfg's job that
// purges early once this worker settled a quarter of one partition's
// MaxMsgs or MaxBytes since the last purge.
func newPurger(js jetstream.JetStream, cfg StreamConfig, n int, causes *causeLog) *purger {
	quarter := func(limit int64) int64 {
		if limit <= 0 {
			return math.MaxInt64 // no limit: the ticker alone
		}
		return max(share(limit, n)/4, 1)
	}
	return &purger{
		js:         js,
		job:        cfg.Job,
		causes:     causes,
		kick:       make(chan struct{}, 1),
		maxSettles: quarter(cfg.MaxMsgs),
		maxBytes:   quarter(cfg.MaxBytes),
		n:          n,
	}
}

// run purges every purgeEvery while records are settled, or when kicked,
// until ctx ends.
func (p *purger) run(ctx context.Context) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if p.rounds.Load() <= 0 {
				continue
			}
			p.rounds.Add(-1)
		case <-p.kick:
		}
		for i := range p.n {
			if ctx.Err() != nil {
				return
			}
			p.purge(ctx, i)
		}
	}
}

// settled counts one record of size bytes settled (acked or
// terminated), and asks for a purge once enough were since the last one.
// It never blocks.
func (p *purger) settled(size int) {
	p.rounds.Store(purgeRoundsAfterSettle)
	if p.settles.Add(1) < p.maxSettles && p.bytes.Add(int64(size)) < p.maxBytes {
		return
	}
	p.settles.Store(0)
	p.bytes.Store(0)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// purge removes partition i's answered records. Errors (a leader being
// elected) are logged once per cause and retried on the next round.
func (p *purger) purge(ctx context.Context, i int) {
	name := PartitionStreamName(p.job, i)
	ctx, cancel := context.WithTimeout(ctx, pullExpiry)
	defer cancel()
	if _, err := purgeAnswered(ctx, p.js, name); err != nil {
		if ctx.Err() == nil {
			p.causes.report(name+" purge", "mesh: purge answered records; retrying", err)
		}
		return
	}
	p.causes.ok(name+" purge", "mesh: purging answered records again")
}

// purgeAnswered removes the messages of work partition stream name below
// the ack floor of its workers consumers, the default level's and each
// priority level's (schedule.go): every one of them was answered (acked
// or terminated). A consumer with nothing pending or out bounds nothing.
// It reports whether there were any. A stream with work-queue retention
// (made by an older version) has none: its acks delete.
func purgeAnswered(ctx context.Context, js jetstream.JetStream, name string) (bool, error) {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return false, err
	}
	info := st.CachedInfo() // before the consumers: what came after is kept
	if info.Config.Retention == jetstream.WorkQueuePolicy || info.State.Msgs == 0 {
		return false, nil
	}
	floor, err := answeredFloor(ctx, st, info.State.LastSeq)
	if err != nil {
		return false, err
	}
	if floor < info.State.FirstSeq {
		return false, nil
	}
	// Purge keeps the messages at and above the sequence given.
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(floor+1)); err != nil {
		return false, err
	}
	return true, nil
}

// answeredFloor is the highest sequence at or below last below which
// the workers consumers of st answered everything. With the default
// level's consumer alone it is that consumer's ack floor, as the server
// tells it. With priority levels (schedule.go) each consumer filters its
// own subject, and its ack floor says nothing of the others': the first
// record of each consumer's subject past its floor (asked of the stream
// itself) bounds the purge. A consumer's state that lags (a new leader,
// a server that lost unsynced writes) has a lower floor: it only purges
// less.
func answeredFloor(ctx context.Context, st jetstream.Stream, last uint64) (uint64, error) {
	var base *jetstream.ConsumerInfo
	var all []*jetstream.ConsumerInfo
	infos := st.ListConsumers(ctx)
	for c := range infos.Info() {
		if c.Name == WorkersConsumer {
			base = c
		}
		if c.Name == WorkersConsumer || strings.HasPrefix(c.Name, WorkersConsumer+"-p") {
			all = append(all, c)
		}
	}
	if err := infos.Err(); err != nil {
		return 0, err
	}
	if base == nil {
		return 0, fmt.Errorf("mesh: stream %s: %w", st.CachedInfo().Config.Name, jetstream.ErrConsumerNotFound)
	}
	if len(all) == 1 {
		return base.AckFloor.Stream, nil
	}
	floor := last
	for _, c := range all {
		m, err := st.GetMsg(ctx, c.AckFloor.Stream+1, jetstream.WithGetMsgSubject(c.Config.FilterSubject))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			// Nothing of its subject past its floor: it bounds nothing.
		case err != nil:
			return 0, err
		default:
			floor = min(floor, m.Sequence-1)
		}
	}
	return floor, nil
}

// purgeFull purges the answered records of job's n work partitions after
// a publish found them all full, and reports whether any were: the
// publish is then worth trying again.
func purgeFull(ctx context.Context, js jetstream.JetStream, job string, n int) bool {
	any := false
	for p := range n {
		ok, _ := purgeAnswered(ctx, js, PartitionStreamName(job, p))
		any = any || ok
	}
	return any
}
