package modelconfig

import (
	"fmt"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// MaxPriorityLevels bounds priority_levels: each level is a JetStream
// consumer per work partition (mesh.MaxLevels).
const MaxPriorityLevels = 16

// Queue is what a config.pbtxt's dynamic_batching says of a model's
// queue: its priority levels and the queue policy of each (Triton's
// priority_levels, default_priority_level, default_queue_policy and
// priority_queue_policy). The zero value is one level without a policy.
type Queue struct {
	// Levels is priority_levels: 0 means none (every request alike).
	Levels int
	// DefaultLevel is default_priority_level: the level of a request
	// without a priority, or with one out of 1..Levels.
	DefaultLevel int
	// Default is default_queue_policy; Policies the priority_queue_policy
	// of the levels that have one.
	Default  Policy
	Policies map[int]Policy
}

// Policy is one level's ModelQueuePolicy.
type Policy struct {
	// MaxQueueSize bounds the requests waiting at the level; 0: none.
	MaxQueueSize int
	// Timeout is default_timeout_microseconds: how long a request may
	// wait in the queue; 0: for ever.
	Timeout time.Duration
	// Delay is timeout_action DELAY: past its timeout a request runs after
	// the others instead of being rejected.
	Delay bool
	// AllowOverride is allow_timeout_override: a request's timeout
	// parameter may lower Timeout (never raise it).
	AllowOverride bool
}

// QueueOf reads cfg's queue settings; a config without dynamic_batching
// has the zero Queue.
func QueueOf(cfg *kservepb.ModelConfig) Queue { return QueueOfBatching(cfg.GetDynamicBatching()) }

// QueueOfBatching reads the queue settings of a dynamic_batching block;
// nil has the zero Queue.
func QueueOfBatching(db *kservepb.ModelDynamicBatching) Queue {
	if db == nil {
		return Queue{}
	}
	q := Queue{Levels: int(min(db.GetPriorityLevels(), 1<<16)), DefaultLevel: int(min(db.GetDefaultPriorityLevel(), 1<<16)),
		Default: policyOf(db.GetDefaultQueuePolicy())}
	for k, p := range db.GetPriorityQueuePolicy() {
		if q.Policies == nil {
			q.Policies = map[int]Policy{}
		}
		q.Policies[int(min(k, 1<<16))] = policyOf(p)
	}
	return q
}

func policyOf(p *kservepb.ModelQueuePolicy) Policy {
	return Policy{MaxQueueSize: int(p.GetMaxQueueSize()), Timeout: time.Duration(p.GetDefaultTimeoutMicroseconds()) * time.Microsecond,
		Delay: p.GetTimeoutAction() == kservepb.ModelQueuePolicy_DELAY, AllowOverride: p.GetAllowTimeoutOverride()}
}

// Check reports what Triton refuses of q, maxLevels the most levels the
// mesh serves: a default level out of 1..priority_levels, a policy of a
// level that does not exist.
func (q Queue) Check(maxLevels int) error {
	switch {
	case q.Levels > maxLevels:
		return fmt.Errorf("dynamic_batching: priority_levels %d: at most %d are served", q.Levels, maxLevels)
	case q.Levels > 0 && (q.DefaultLevel < 1 || q.DefaultLevel > q.Levels):
		return fmt.Errorf("dynamic_batching: default_priority_level %d must be in 1..priority_levels (%d)", q.DefaultLevel, q.Levels)
	}
	for k := range q.Policies {
		if k < 1 || k > q.Levels {
			return fmt.Errorf("dynamic_batching: priority_queue_policy of level %d, which is not in 1..priority_levels (%d)", k, q.Levels)
		}
	}
	return nil
}

// Used reports whether q asks anything of a request: levels, or a policy
// with a timeout that requests may set or a queue bound. A door reads a
// request's priority and timeout only for such a model.
func (q Queue) Used() bool {
	return q.Levels > 0 || q.Default != (Policy{}) || len(q.Policies) > 0
}

// MaxQueueSize is the largest max_queue_size of q's levels, 0 when none
// bounds its queue: the mesh bounds every level's queue by one figure.
func (q Queue) MaxQueueSize() int {
	n := q.Default.MaxQueueSize
	for _, p := range q.Policies {
		n = max(n, p.MaxQueueSize)
	}
	return n
}

// Resolve is where a request with priority (0: none) and timeout (0:
// none) waits, as Triton places it: its level (a priority out of
// 1..Levels takes the default level; 0 when q has no levels) and its
// level's policy, whose timeout the request's lowers when the policy
// allows it (a default of 0 is no timeout: any request timeout lowers it).
func (q Queue) Resolve(priority uint64, timeout time.Duration) (level int, p Policy) {
	if q.Levels > 0 {
		level = q.DefaultLevel
		if priority >= 1 && priority <= uint64(q.Levels) {
			level = int(priority)
		}
	}
	p = q.Default
	if lp, ok := q.Policies[level]; ok {
		p = lp
	}
	if p.AllowOverride && timeout > 0 && (p.Timeout == 0 || timeout < p.Timeout) {
		p.Timeout = timeout
	}
	return level, p
}
