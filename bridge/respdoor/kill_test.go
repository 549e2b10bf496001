package respdoor_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

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
	dying := m.Connect(t)
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
	alive, err := mesh.NewWorker(m.Connect(t), mesh.WorkerConfig{Stream: sc, ShutdownGrace: time.Second, Logger: slog.New(slog.DiscardHandler)}, wire.NewPredictor(e, wire.Model{}))
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

// TestDelLeavesAResultItsClientWasNotGiven: a client's pipeline reads a
// key (no result yet), then DELs it; a result stored between the two is
// not that client's to delete unread. make chaos lost such a result at
// the whole-cluster restart: HGET said nil, the put landed, DEL deleted
// it. A key the connection never read is deleted as in Redis.
func TestDelLeavesAResultItsClientWasNotGiven(t *testing.T) {
	sc := mesh.StreamConfig{Job: "add", Storage: jetstream.MemoryStorage}
	m := startDoorMesh(t, doortest.Served{Name: "add", File: "add_f32", NoWorker: true, Stream: sc})
	s := startOn(t, m, respdoor.Config{Jobs: []string{"add"}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := mesh.NewClient(m.Connect(t), mesh.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b, err := other.ResultBucket(ctx, "add", sc, 0)
	if err != nil {
		t.Fatal(err)
	}
	const key = "cluster-serving_add:u"
	conn := s.rdb.Conn()
	defer conn.Close()
	if v, err := conn.HGet(ctx, key, "value").Result(); err == nil {
		t.Fatalf("HGET before the result: got %q", v)
	}
	if err := b.Put(ctx, "u", []byte("v"), "m1"); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "the door to list the result", func() bool {
		keys, err := s.rdb.Keys(ctx, key).Result()
		return err == nil && len(keys) == 1
	})
	if n, err := conn.Del(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("DEL of a key its connection last read as missing: got %d, %v, want 0", n, err)
	}
	if v, err := s.rdb.HGet(ctx, key, "value").Result(); err != nil || v != "v" {
		t.Fatalf("the result after that DEL: got %q, %v, want it kept", v, err)
	}
	if v, err := conn.HGet(ctx, key, "value").Result(); err != nil || v != "v" {
		t.Fatalf("HGET: got %q, %v", v, err)
	}
	if n, err := conn.Del(ctx, key).Result(); err != nil || n != 1 {
		t.Errorf("DEL after a read that gave the value: got %d, %v, want 1", n, err)
	}
	if err := b.Put(ctx, "w", []byte("v2"), "m2"); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "the door to list w", func() bool {
		n, err := s.rdb.Exists(ctx, "cluster-serving_add:w").Result()
		return err == nil && n == 1
	})
	if n, err := conn.Del(ctx, "cluster-serving_add:w").Result(); err != nil || n != 1 {
		t.Errorf("DEL of a key never read on the connection: got %d, %v, want 1", n, err)
	}
}
