package mesh

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
)

// Scheduling across the mesh, as Triton's dynamic_batching asks:
//
//   - Priority levels. A job whose model has priority_levels N keeps one
//     queue per level in each work partition: the default level on the
//     partition's subject (where every request without a priority goes,
//     so that a door that knows nothing of levels still works), level k
//     on the subject "<partition subject>.prio.<k>", each with its own
//     durable consumer (LevelConsumer). A worker pulls every level, and
//     its gate and its engine's batcher admit the waiting record of the
//     highest level first: high-priority work overtakes the backlog of
//     low-priority work on every worker of the mesh, whatever worker's
//     buffer it waits in.
//   - max_queue_size bounds each level's queue mesh-wide: the work
//     streams' per-subject message limit with discard-new-per-subject, so
//     JetStream itself refuses the publish that would pass it
//     (ErrMaxQueueSize, a 503).
//   - A queue timeout (default_timeout_microseconds, or a request's
//     timeout where the policy allows an override) counts from the
//     publish: the worker that takes the request after it passed rejects
//     it unrun with 503 "Request timeout expired", or with timeout_action
//     DELAY stores it again at the lowest level, to run after the others.
//   - A request whose caller went away (a gRPC cancel, an HTTP client that
//     closed) is dropped unrun by whichever worker meets it: cancel.go.

// Schedule is how one request waits in its job's queue: what a door made
// of its priority and timeout and of the model's queue policy
// (door.ScheduleOf). The zero value is the default: the job's default
// level, no queue timeout.
type Schedule struct {
	// Level is the request's priority level, 1 the highest; 0 is the
	// job's default level (the partition's own subject).
	Level int
	// Timeout bounds the request's wait in the queue, from its publish;
	// 0 means none. A pipeline gives each step the same.
	Timeout time.Duration
	// Delay: past its Timeout the request runs after the others
	// (timeout_action DELAY) instead of being rejected.
	Delay bool
	// Priority and Asked are the request's own priority and timeout
	// parameters, as the caller sent them: a pipeline places its steps in
	// their models' queues with them (Step).
	Priority uint64
	Asked    time.Duration
}

// Step is the schedule of a pipeline step, a request to a model whose
// queue is q, made for a request of schedule s: Triton gives every
// composing model the ensemble request's priority and timeout.
func (s Schedule) Step(q modelconfig.Queue) Schedule {
	step := ScheduleIn(q, s.Priority, s.Asked)
	step.Priority, step.Asked = s.Priority, s.Asked
	return step
}

// Schedule headers of a work message; absent for the default schedule.
const (
	// HeaderPriority is the request's priority level (Schedule.Level).
	HeaderPriority = "Cs-Priority"
	// HeaderQueueDeadline is when the request's queue timeout passes, unix
	// nanoseconds.
	HeaderQueueDeadline = "Cs-Queue-Deadline"
	// HeaderQueueTimeout is Schedule.Timeout in microseconds, and
	// HeaderTimeoutAction "delay" for timeout_action DELAY: a pipeline
	// carries both to its steps.
	HeaderQueueTimeout  = "Cs-Queue-Timeout"
	HeaderTimeoutAction = "Cs-Timeout-Action"
	// HeaderAsked is the request's own "priority,timeout" parameters
	// (Schedule.Priority, Schedule.Asked in microseconds), for a
	// pipeline's steps.
	HeaderAsked        = "Cs-Asked"
	timeoutActionDelay = "delay"
	// levelToken separates a partition's subject from a level's number.
	levelToken = ".prio."
)

// LevelConsumer is the durable consumer of priority level k (k > 0) of a
// work partition; the default level's is WorkersConsumer.
func LevelConsumer(k int) string { return WorkersConsumer + "-p" + strconv.Itoa(k) }

// levelSubject is level k's subject of a work partition whose subject is
// partition; level 0 (the default) is the partition's own.
func levelSubject(partition string, k int) string {
	if k <= 0 {
		return partition
	}
	return partition + levelToken + strconv.Itoa(k)
}

// levelSubjects are the subjects of level k of job's n work partitions.
func levelSubjects(job string, n, k int) []string {
	subjects := workSubjects(job, n)
	if k > 0 {
		for p := range subjects {
			subjects[p] = levelSubject(subjects[p], k)
		}
	}
	return subjects
}

// setHeaders writes s into a work message's headers; the queue deadline
// counts from now.
func (s Schedule) setHeaders(h nats.Header) {
	if s.Level > 0 {
		h.Set(HeaderPriority, strconv.Itoa(s.Level))
	}
	if s.Priority > 0 || s.Asked > 0 {
		h.Set(HeaderAsked, strconv.FormatUint(s.Priority, 10)+","+strconv.FormatInt(s.Asked.Microseconds(), 10))
	}
	if s.Timeout > 0 {
		h.Set(HeaderQueueDeadline, strconv.FormatInt(time.Now().Add(s.Timeout).UnixNano(), 10))
		h.Set(HeaderQueueTimeout, strconv.FormatInt(s.Timeout.Microseconds(), 10))
		if s.Delay {
			h.Set(HeaderTimeoutAction, timeoutActionDelay)
		}
	}
}

// scheduleOf reads a work message's schedule; what cannot be read is the
// default.
func scheduleOf(h nats.Header) Schedule {
	s := Schedule{Level: levelOf(h)}
	if p, us, ok := strings.Cut(h.Get(HeaderAsked), ","); ok {
		s.Priority, _ = strconv.ParseUint(p, 10, 64)
		n, _ := strconv.ParseInt(us, 10, 64)
		s.Asked = time.Duration(n) * time.Microsecond
	}
	if v := h.Get(HeaderQueueTimeout); v != "" {
		us, _ := strconv.ParseInt(v, 10, 64)
		s.Timeout = time.Duration(us) * time.Microsecond
		s.Delay = h.Get(HeaderTimeoutAction) == timeoutActionDelay
	}
	return s
}

// levelOf reads HeaderPriority: 0 (the default level) when absent.
func levelOf(h nats.Header) int {
	v := h.Get(HeaderPriority)
	if v == "" {
		return 0
	}
	k, _ := strconv.Atoi(v)
	return max(k, 0)
}

// queueDeadlineOf reads HeaderQueueDeadline: zero when absent.
func queueDeadlineOf(h nats.Header) time.Time {
	v := h.Get(HeaderQueueDeadline)
	if v == "" {
		return time.Time{}
	}
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// ScheduleIn is the schedule of a request with priority and timeout (0:
// none) in a model's queue q: its level and its level's policy
// (modelconfig.Queue.Resolve), the default level as level 0 (the
// partition's own subject).
func ScheduleIn(q modelconfig.Queue, priority uint64, timeout time.Duration) Schedule {
	level, p := q.Resolve(priority, timeout)
	s := Schedule{Timeout: p.Timeout, Delay: p.Delay}
	if level != q.DefaultLevel {
		s.Level = level
	}
	return s
}

// ParseSchedule is the schedule of a request whose caller gave priority
// and timeout (microseconds) as text, "" for none, in a model's queue q:
// a NATS caller's headers, a Redis entry's fields. A value that is not
// an unsigned integer is an error naming it.
func ParseSchedule(q modelconfig.Queue, priority, timeout string) (Schedule, error) {
	var n [2]uint64
	for i, v := range [2]string{priority, timeout} {
		if v == "" {
			continue
		}
		var err error
		if n[i], err = strconv.ParseUint(v, 10, 64); err != nil {
			return Schedule{}, fmt.Errorf("%s: want an unsigned integer, got %q", [2]string{"priority", "timeout (µs)"}[i], v)
		}
	}
	return ScheduleIn(q, n[0], time.Duration(min(n[1], 1<<40))*time.Microsecond), nil
}

type scheduleKey struct{}

// WithSchedule returns ctx carrying s: a worker gives its Predictor the
// schedule of the request it runs, and a pipeline its steps.
func WithSchedule(ctx context.Context, s Schedule) context.Context {
	return context.WithValue(ctx, scheduleKey{}, s)
}

// ScheduleFrom returns the schedule ctx carries; the default without one.
func ScheduleFrom(ctx context.Context) Schedule {
	s, _ := ctx.Value(scheduleKey{}).(Schedule)
	return s
}
