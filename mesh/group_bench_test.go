package mesh_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// BenchmarkModelRuns measures the NATS door on the tiny model (add_f32,
// file store, 32 concurrent callers) with a session per core, as a
// deployment of threadPerModel 1 has on 2 cores, and MaxBatch 32. Besides
// the CPU time of the whole process per request (cpu-ns/op, see
// BenchmarkTracing), it reports the model runs per request row
// (runs/req: execution_count ÷ inference_count in the model's
// statistics, Triton's meaning): 1 when every request runs alone, 1/32
// at best.
func BenchmarkModelRuns(b *testing.B) {
	e := infertest.NewEngine(b, infer.Config{ModelPath: infertest.Model("add_f32"), Threads: 1, Parallelism: 2, MaxBatch: 32})
	s := meshtest.StartServer(b)
	stream := mesh.StreamConfig{Job: "runs"}
	ensure(b, meshtest.Connect(b, s), stream)
	w, _ := runWorker(b, meshtest.Connect(b, s), mesh.WorkerConfig{Stream: stream}, wire.NewPredictor(e, wire.Model{Name: "add_f32"}))
	callers := []*nats.Conn{serveNATS(b, s, stream.Job), meshtest.Connect(b, s), meshtest.Connect(b, s), meshtest.Connect(b, s)}
	var next atomic.Uint64
	b.ReportAllocs()
	b.SetParallelism(16) // 32 callers on 2 cores
	before, cpu0 := w.Stats().Infer, cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		nc := callers[next.Add(1)%uint64(len(callers))]
		for pb.Next() {
			reply, err := nc.Request(mesh.PredictSubject(stream.Job), []byte(`{"instances":[{"x":[1.5,2.5,3.5,4.5]}]}`), 10*time.Second)
			if err == nil && reply.Header.Get("Nats-Service-Error-Code") != "" {
				err = errors.New(reply.Header.Get("Nats-Service-Error"))
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	after := w.Stats().Infer
	if rows := after.InferenceCount - before.InferenceCount; rows > 0 {
		b.ReportMetric(float64(after.ExecutionCount-before.ExecutionCount)/float64(rows), "runs/req")
	}
}
