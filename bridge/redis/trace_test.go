package redis_test

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redis/redistest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestTraceFromRedisEntry: an entry's optional traceparent field makes the
// door's receive span the client's child, the mesh continues that trace,
// and the HSET span links to the worker's span of the result it writes.
func TestTraceFromRedisEntry(t *testing.T) {
	spans := meshtest.CaptureSpans(t)
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
	ended := spans.Wait(t, telemetry.SpanDoorRedis, telemetry.SpanResultDeliver, telemetry.SpanProcess)
	recv, pub, proc, write := ended.Find(telemetry.SpanDoorRedis), ended.Find(telemetry.SpanPublish), ended.Find(telemetry.SpanProcess), ended.Find(telemetry.SpanResultDeliver)
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
