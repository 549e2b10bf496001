package redis_test

import (
	"context"
	"io"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cluster-serving/cluster-serving/bridge/redis/redistest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestTraceFromRedisEntry: an entry's optional traceparent field makes the
// door's receive span the client's child, the mesh continues that trace,
// and the HSET span links to the worker's span of the result it writes.
func TestTraceFromRedisEntry(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{TracesExporter: "memory", TraceDetail: telemetry.TraceDetailStages, Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	s := meshtest.StartServer(t)
	addr, rdb := redistest.Start(t)
	job := "traced"
	m := startJob(t, s, job, addModel)
	runDoor(t, addr, job, m.client)

	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	if _, err := rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: job, Values: []any{
		"uri", "t1", "data", instances([]float32{1, 2, 3, 4}), "serde", "stream",
		"traceparent", "00-" + traceID + "-" + parentID + "-01"}}).Result(); err != nil {
		t.Fatal(err)
	}
	if v := query(t, rdb, job, "t1"); v == "NaN" {
		t.Fatal("got NaN")
	}
	var spans tracetest.SpanStubs
	find := func(name string) *tracetest.SpanStub {
		for i := range spans {
			if spans[i].Name == name {
				return &spans[i]
			}
		}
		return nil
	}
	meshtest.WaitFor(t, "spans", func() bool {
		spans = tel.Spans()
		return find(telemetry.SpanDoorRedis) != nil && find(telemetry.SpanResultDeliver) != nil && find(telemetry.SpanProcess) != nil
	})
	recv, pub, proc, write := find(telemetry.SpanDoorRedis), find(telemetry.SpanPublish), find(telemetry.SpanProcess), find(telemetry.SpanResultDeliver)
	if got := recv.SpanContext.TraceID().String(); got != traceID {
		t.Errorf("redis receive: got trace %s, want the entry's %s", got, traceID)
	}
	if got := recv.Parent.SpanID().String(); got != parentID {
		t.Errorf("redis receive: got parent %s, want the entry's %s", got, parentID)
	}
	if pub == nil || pub.Parent.SpanID() != recv.SpanContext.SpanID() {
		t.Errorf("jetstream publish: want the child of redis receive, got %+v", pub)
	}
	if proc.SpanContext.TraceID().String() != traceID {
		t.Errorf("worker span: got trace %s, want %s", proc.SpanContext.TraceID(), traceID)
	}
	linked := false
	for _, l := range write.Links {
		if l.SpanContext.TraceID().String() == traceID {
			linked = true
		}
	}
	if !linked {
		t.Errorf("redis result write: links %v, want one into trace %s", write.Links, traceID)
	}
}
