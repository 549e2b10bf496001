package redis_test

import (
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/redis/redistest"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestStringListThroughTheDoor: the original's list of strings (a utf8
// value joined with '|') feeds a string model input through the Redis door
// and a worker on the real ONNX Runtime; a Cast to float answers as any
// float output does. A list the input's shape does not take answers NaN,
// and the record after it is still answered.
func TestStringListThroughTheDoor(t *testing.T) {
	addr, rdb := redistest.Start(t)
	s := meshtest.StartServer(t)
	job := startJobWith(t, s, "strjob", infer.Config{ModelPath: infertest.Model("cast_str_f32"), Threads: 1})
	runDoor(t, addr, "strjob", job.client)
	want, err := wire.EncodeRedisArrow([]infer.Tensor{{DType: infer.Float32, Shape: []int64{3}, Data: []float32{1.5, -2, 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, rdb, "strjob", "two", imageRecord(t, "1|2"), false)
	enqueue(t, rdb, "strjob", "three", imageRecord(t, "1.5|-2|1e3"), false)
	if got := query(t, rdb, "strjob", "two"); got != "NaN" {
		t.Errorf("two strings for a [-1 3] input: got %.40q, want NaN", got)
	}
	if got := query(t, rdb, "strjob", "three"); got != string(want) {
		t.Errorf("three strings: got %.60q, want %.60q", got, want)
	}
}
