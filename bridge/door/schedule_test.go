package door_test

import (
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// TestScheduleOf places OIP requests in a model's queue from their
// priority and timeout parameters, as Triton does; a model without queue
// settings and a bad parameter.
func TestScheduleOf(t *testing.T) {
	cfg, _, err := modelconfig.Parse([]byte(`name: "m" max_batch_size: 8
dynamic_batching { priority_levels: 3 default_priority_level: 2
  default_queue_policy { default_timeout_microseconds: 5000 allow_timeout_override: true }
  priority_queue_policy { key: 3 value { timeout_action: DELAY default_timeout_microseconds: 100 } } }`))
	if err != nil {
		t.Fatal(err)
	}
	m := door.Model{Name: "m", Job: "j", Config: cfg}
	for body, want := range map[string]mesh.Schedule{
		`{"inputs":[]}`: {Timeout: 5 * time.Millisecond},
		`{"inputs":[],"parameters":{"priority":1}}`:             {Level: 1, Timeout: 5 * time.Millisecond},
		`{"inputs":[],"parameters":{"priority":2}}`:             {Timeout: 5 * time.Millisecond}, // the default level: level 0
		`{"inputs":[],"parameters":{"priority":7}}`:             {Timeout: 5 * time.Millisecond},
		`{"inputs":[],"parameters":{"priority":3}}`:             {Level: 3, Timeout: 100 * time.Microsecond, Delay: true},
		`{"inputs":[],"parameters":{"timeout":1000}}`:           {Timeout: time.Millisecond},
		`{"parameters":{"timeout":9000000},"inputs":[[1,2,3]]}`: {Timeout: 5 * time.Millisecond},
	} {
		got, err := door.ScheduleOf(m, wire.MediaTypeOIP, []byte(body))
		if err != nil || got != want {
			t.Errorf("%s: got %+v %v, want %+v", body, got, err, want)
		}
	}
	if _, err := door.ScheduleOf(m, wire.MediaTypeOIP, []byte(`{"parameters":{"priority":-1}}`)); status.Of(err) != status.BadInput {
		t.Errorf("priority -1: got %v, want a 400", err)
	}
	plain := door.Model{Name: "p", Job: "p"}
	if got, err := door.ScheduleOf(plain, wire.MediaTypeOIP, []byte(`{"parameters":{"priority":1}}`)); err != nil || got != (mesh.Schedule{}) {
		t.Errorf("model without queue settings: got %+v %v, want the default", got, err)
	}
}
