package modelconfig_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
)

const queueConfig = `
name: "q"
max_batch_size: 8
dynamic_batching {
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy { max_queue_size: 16 default_timeout_microseconds: 5000 allow_timeout_override: true }
  priority_queue_policy { key: 3 value { timeout_action: DELAY default_timeout_microseconds: 100 max_queue_size: 64 } }
}`

func TestQueueResolve(t *testing.T) {
	cfg, _, err := modelconfig.Parse([]byte(queueConfig))
	if err != nil {
		t.Fatal(err)
	}
	q := modelconfig.QueueOf(cfg)
	if err := q.Check(modelconfig.MaxPriorityLevels); err != nil || !q.Used() || q.MaxQueueSize() != 64 {
		t.Fatalf("QueueOf: %+v, Check %v", q, err)
	}
	for _, c := range []struct {
		priority uint64
		timeout  time.Duration
		level    int
		want     modelconfig.Policy
	}{
		{0, 0, 2, modelconfig.Policy{MaxQueueSize: 16, Timeout: 5 * time.Millisecond, AllowOverride: true}},
		{1, time.Millisecond, 1, modelconfig.Policy{MaxQueueSize: 16, Timeout: time.Millisecond, AllowOverride: true}},
		{1, time.Second, 1, modelconfig.Policy{MaxQueueSize: 16, Timeout: 5 * time.Millisecond, AllowOverride: true}}, // may not raise it
		{9, 0, 2, modelconfig.Policy{MaxQueueSize: 16, Timeout: 5 * time.Millisecond, AllowOverride: true}},           // out of range: default
		{3, time.Microsecond, 3, modelconfig.Policy{MaxQueueSize: 64, Timeout: 100 * time.Microsecond, Delay: true}},  // no override allowed
	} {
		level, p := q.Resolve(c.priority, c.timeout)
		if level != c.level || p != c.want {
			t.Errorf("Resolve(%d, %v) = %d %+v, want %d %+v", c.priority, c.timeout, level, p, c.level, c.want)
		}
	}
}

func TestQueueCheck(t *testing.T) {
	for config, want := range map[string]string{
		`dynamic_batching { priority_levels: 2 default_priority_level: 3 }`:                                           "default_priority_level 3 must be in 1..priority_levels (2)",
		`dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 5 value {} } }`: "priority_queue_policy of level 5",
		`dynamic_batching { priority_levels: 99 default_priority_level: 1 }`:                                          "priority_levels 99: at most 16",
	} {
		cfg, _, err := modelconfig.Parse([]byte("name: \"q\"\nmax_batch_size: 8\n" + config))
		if err != nil {
			t.Fatal(err)
		}
		if err := modelconfig.QueueOf(cfg).Check(modelconfig.MaxPriorityLevels); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", config, err, want)
		}
	}
}
