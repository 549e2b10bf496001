package door

import (
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// ScheduleOf is where a request to m waits in the mesh: the priority
// level and queue timeout its priority and timeout parameters (Triton's
// names, read from body of contentType) take under m's dynamic_batching
// (priority_levels, the queue policies). A model whose config asks none
// of that costs no read of the body. A parameter of the wrong kind is a
// 400. An ensemble has no queue of its own: its request carries its
// parameters to its steps.
func ScheduleOf(m Model, contentType string, body []byte) (mesh.Schedule, error) {
	q := modelconfig.QueueOf(m.Config) // nil (no repository): no queue settings
	ensemble := m.Config != nil && (m.Config.Platform == "ensemble" || m.Config.GetEnsembleScheduling() != nil)
	if !q.Used() && !ensemble {
		return mesh.Schedule{}, nil
	}
	params, err := wire.QueueParamsOf(contentType, body)
	if err != nil {
		return mesh.Schedule{}, err
	}
	s := mesh.ScheduleIn(q, params.Priority, params.Timeout)
	if ensemble {
		// Its steps' models place it in their queues (Schedule.Step).
		s.Priority, s.Asked = params.Priority, params.Timeout
	}
	return s, nil
}
