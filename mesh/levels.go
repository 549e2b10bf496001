package mesh

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/status"
)

// newConsumers returns the worker's consumers: one per work partition of
// n and priority level (schedule.go), all feeding the gate g. Records
// from a level's consumer wait at g with the level's rank.
// It returns them and how many to start.
func (w *Worker) newConsumers(ctx, work context.Context, g *gate, n int) (*consumers, int) {
	job := w.cfg.Stream.Job
	levels := w.consumerLevels(ctx)
	consumer := func(slot int) (stream, name string) {
		return PartitionStreamName(job, slot%n), levelConsumerName(levels[slot/n])
	}
	return &consumers{
		stream: func(slot int) string {
			stream, name := consumer(slot)
			return stream + "/" + name
		},
		lookup: func(ctx context.Context, slot int) (jetstream.Consumer, error) {
			stream, name := consumer(slot)
			return w.js.Consumer(ctx, stream, name)
		},
		handle: func(msg jetstream.Msg) {
			if msg.Headers().Get(HeaderBatch) != "" {
				w.dispatchBatch(work, g, msg) // several requests (coalesce.go)
				return
			}
			w.held.add(msg) // beaten from now on, while it waits for the gate too
			w.dispatch(work, g, msg)
		},
		batch: w.pullBatch, causes: w.causes, stopping: g.stopping, grace: w.cfg.ShutdownGrace,
	}, n * len(levels)
}

func levelConsumerName(k int) string {
	if k == 0 {
		return WorkersConsumer
	}
	return LevelConsumer(k)
}

// consumerLevels are the levels the worker consumes: the default (0),
// each of its config's other levels, and any other level whose consumer
// partition 0 has (a config that had more levels left records there).
func (w *Worker) consumerLevels(ctx context.Context) []int {
	s := w.cfg.Stream
	levels := []int{0}
	for k := 1; k <= s.Levels; k++ {
		if k != s.DefaultLevel {
			levels = append(levels, k)
		}
	}
	if s.Levels == 0 {
		return levels // no levels: nothing to look for at start
	}
	st, err := w.js.Stream(ctx, PartitionStreamName(s.Job, 0))
	if err != nil {
		return levels
	}
	for name := range st.ConsumerNames(ctx).Name() {
		if k, err := strconv.Atoi(strings.TrimPrefix(name, WorkersConsumer+"-p")); err == nil && k > s.Levels && k <= MaxLevels {
			levels = append(levels, k)
		}
	}
	return levels
}

// rankOf is the gate rank of a record stored under subject: its level,
// the default level's for the partition's own subject; 0 for a job
// without levels.
func (w *Worker) rankOf(subject string) int {
	if w.cfg.Stream.Levels == 0 {
		return 0
	}
	if i := strings.LastIndex(subject, levelToken); i >= 0 {
		if k, err := strconv.Atoi(subject[i+len(levelToken):]); err == nil {
			return k
		}
	}
	return w.cfg.Stream.DefaultLevel
}

// withRank gives a record's rank and queue timeout to the engine's
// batcher, which runs the queued records of the lowest rank first
// (infer.Queueing).
// A record with a schedule carries it in ctx too, for a pipeline's
// steps (ScheduleFrom), and its queue timeout, for the batcher.
func (w *Worker) withRank(ctx context.Context, msg jetstream.Msg, s scheduled) context.Context {
	var q infer.Queueing
	if s.ok {
		ctx = WithSchedule(ctx, s.Schedule)
		q.Due, q.Delay = s.due, s.Delay // the wait in the engine's queue counts too
	}
	if w.cfg.Stream.Levels > 0 {
		q.Priority = w.rankOf(msg.Subject())
	}
	if q == (infer.Queueing{}) {
		return ctx
	}
	return infer.WithQueueing(ctx, q)
}

// unscheduled settles, unrun, a record whose caller went away or whose
// queue timeout passed, and reports whether it did, with the status the
// process span records.
func (w *Worker) unscheduled(ctx context.Context, msg jetstream.Msg, h nats.Header, s scheduled) (bool, int) {
	if w.cancels.has(cancelKey(h)) {
		w.cancelled.Add(1)
		w.settle(msg, msg.Ack)
		return true, status.ClientClosed
	}
	if s.due.IsZero() || time.Now().Before(s.due) {
		return false, 0
	}
	if s.Delay {
		// Stored again to run last; run now when it cannot be.
		return w.delay(ctx, msg, h), status.OK
	}
	w.expired.Add(1)
	w.fail(ctx, msg, status.Busy, "Request timeout expired")
	return true, status.Busy
}

// delay stores a record whose queue timeout passed under timeout_action
// DELAY again, at the job's lowest level and without its timeout, so
// that it runs after what waits, and acks it. It reports false, to run
// the record now, when it cannot be stored again.
func (w *Worker) delay(ctx context.Context, msg jetstream.Msg, h nats.Header) bool {
	m := nats.NewMsg("")
	for k, v := range h {
		m.Header[k] = v
	}
	for _, k := range []string{HeaderQueueDeadline, HeaderQueueTimeout, HeaderTimeoutAction, HeaderPriority, HeaderAsked} {
		m.Header.Del(k)
	}
	lowest := w.cfg.Stream.Levels
	if lowest > 0 && lowest != w.cfg.Stream.DefaultLevel {
		m.Header.Set(HeaderPriority, strconv.Itoa(lowest))
	} else {
		lowest = 0
	}
	m.Data = msg.Data()
	id := delayedID(msg, h)
	m.Header.Set(HeaderMsgID, id)
	n := max(w.parts, 1)
	pctx, cancel := context.WithTimeout(ctx, resultPublishTimeout)
	defer cancel()
	if _, err := w.route.publish(pctx, w.nc, w.js, levelSubjects(w.cfg.Stream.Job, n, lowest), firstPartition(id, n), m); err != nil {
		return false
	}
	w.settle(msg, msg.Ack)
	return true
}

// delayedID is the message id of a record stored again by delay: its
// own id, else its place in the stream (and in its batch), so that a
// retried store stores it once and two records never share one.
func delayedID(msg jetstream.Msg, h nats.Header) string {
	id := h.Get(HeaderMsgID)
	if id == "" {
		if md, err := msg.Metadata(); err == nil {
			id = md.Stream + "." + strconv.FormatUint(md.Sequence.Stream, 10)
		} else {
			id = nuid.Next()
		}
	}
	if it, ok := msg.(*batchItem); ok {
		id += "." + strconv.Itoa(it.i)
	}
	return id + ".delayed"
}

// scheduled is a work message's schedule headers, read once per record:
// ok is false, and nothing more is read, for a record without any.
type scheduled struct {
	Schedule
	due time.Time // HeaderQueueDeadline
	ok  bool
}

func scheduledOf(h nats.Header) scheduled {
	if h.Get(HeaderAsked) == "" && h.Get(HeaderPriority) == "" && h.Get(HeaderQueueTimeout) == "" {
		return scheduled{}
	}
	return scheduled{scheduleOf(h), queueDeadlineOf(h), true}
}
