package respdoor_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// stuck is a worker's Predictor that never answers: the worker holding
// records when it dies.
type stuck struct{ took chan struct{} }

func (s stuck) Predict(ctx context.Context, _ string, _ []byte) ([]byte, error) {
	select {
	case s.took <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestWorkerKilled: a worker dies (its NATS connection cut) while it
// holds records the RESP door stored; another worker takes them after
// AckWait, and every XADD that got an id gets its result, once.
func TestWorkerKilled(t *testing.T) {
	const n = 20
	sc := mesh.StreamConfig{Job: "add", AckWait: time.Second, Storage: jetstream.MemoryStorage}
	m := startDoorMesh(t, doortest.Served{Name: "add", File: "add_f32", NoWorker: true, Stream: sc})
	s := startOn(t, m, respdoor.Config{Jobs: []string{"add"}}, nil)
	dying := connect(t, m)
	st := stuck{took: make(chan struct{}, 1)}
	w, err := mesh.NewWorker(dying, mesh.WorkerConfig{Stream: sc, ShutdownGrace: time.Second, Logger: slog.New(slog.DiscardHandler)}, st)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, w.Run)

	var ids []string
	for i := range n {
		r := record{"add", fmt.Sprint("r", i), []any{"data", fmt.Sprintf(`{"instances":[{"x":[%d,0,0,0]}]}`, i), "serde", "stream"}}
		ids = append(ids, xadd(t, s.rdb, r))
	}
	<-st.took
	dying.Close() // the worker dies holding records

	e := infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("add_f32"), MaxBatch: 8})
	alive, err := mesh.NewWorker(connect(t, m), mesh.WorkerConfig{Stream: sc, ShutdownGrace: time.Second, Logger: slog.New(slog.DiscardHandler)}, wire.NewPredictor(e, wire.Model{}))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, alive.Run)
	for i := range n {
		v := query(t, s.rdb, "add", fmt.Sprint("r", i))
		if v == "NaN" {
			t.Errorf("r%d (id %s): got NaN", i, ids[i])
		}
	}
	if keys, err := s.rdb.Keys(context.Background(), "*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("KEYS after reading every result: got %q, %v, want none (no duplicate)", keys, err)
	}
}

// connect opens another connection to m's NATS server, closed at cleanup.
func connect(tb testing.TB, m *doortest.Mesh) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(m.NC.ConnectedUrl())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}
