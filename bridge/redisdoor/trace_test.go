package redisdoor_test

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
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

	if _, err := rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: job, Values: []any{
		"uri", "t1", "data", instances([]float32{1, 2, 3, 4}), "serde", "stream",
		"traceparent", doortest.Traceparent}}).Result(); err != nil {
		t.Fatal(err)
	}
	if v := query(t, rdb, job, "t1"); v == "NaN" {
		t.Fatal("got NaN")
	}
	ended := spans.Wait(t, telemetry.SpanDoorRedis, telemetry.SpanResultDeliver, telemetry.SpanProcess)
	doortest.CheckTraceContinued(t, ended, telemetry.SpanDoorRedis)
	write := ended.Find(telemetry.SpanResultDeliver)
	linked := false
	for _, l := range write.Links {
		if l.SpanContext.TraceID().String() == doortest.TraceID {
			linked = true
		}
	}
	if !linked {
		t.Errorf("redis result write: links %v, want one into trace %s", write.Links, doortest.TraceID)
	}
}
