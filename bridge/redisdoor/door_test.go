package redisdoor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// These tests run the door against a real redis-server, an embedded NATS
// server and workers on the real ONNX Runtime (infer/testdata models).

var addModel = infertest.Model("add_f32") // x [-1,4] float32, y = 2x+1

// mesh1 is one job's mesh: its streams, a worker on the model and a client.
type mesh1 struct {
	client *mesh.Client
	engine *infer.Engine
}

// startParts starts what every test here needs besides its jobs: a
// redis-server (addr, rdb), an embedded NATS server s, and direct, ONNX
// Runtime run on addModel without the mesh, the reference for the door's
// answers.
func startParts(tb testing.TB) (addr string, rdb *goredis.Client, s *embedded.Server, direct *infer.Session) {
	tb.Helper()
	addr, rdb = redistest.Start(tb)
	s = meshtest.StartServer(tb)
	direct = infertest.NewSession(tb, addModel)
	return addr, rdb, s, direct
}

// startJob creates job's streams on s and runs one worker on model.
func startJob(tb testing.TB, s *embedded.Server, job, model string) mesh1 {
	tb.Helper()
	return startJobWith(tb, s, job, infer.Config{ModelPath: model, Threads: 1, MaxBatch: 8})
}

// startJobWith is startJob with the worker's engine configured by ecfg.
func startJobWith(tb testing.TB, s *embedded.Server, job string, ecfg infer.Config) mesh1 {
	tb.Helper()
	infertest.RequireLibrary(tb)
	nc := meshtest.Connect(tb, s)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	// Memory storage: with file storage, nats-server v2.15.2 races (under
	// -race) between the worker's stream update and the door's consumer
	// create, a data race inside its fileStore.
	cfg := mesh.StreamConfig{Job: job, Storage: jetstream.MemoryStorage}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mesh.EnsureStreams(ctx, js, cfg); err != nil {
		tb.Fatal(err)
	}
	e := infertest.NewEngine(tb, ecfg)
	w, err := mesh.NewWorker(meshtest.Connect(tb, s), mesh.WorkerConfig{Stream: cfg}, wire.NewPredictor(e, wire.Model{}))
	if err != nil {
		tb.Fatal(err)
	}
	meshtest.Run(tb, w.Run)
	c, err := mesh.NewClient(meshtest.Connect(tb, s), mesh.ClientConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return mesh1{client: c, engine: e}
}

func runDoor(tb testing.TB, addr, job string, m redisdoor.Mesh) func() {
	tb.Helper()
	d, err := redisdoor.New(redisdoor.Config{Addr: addr, Job: job, Rescan: 200 * time.Millisecond}, m, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return meshtest.Run(tb, d.Run)
}

func instances(x []float32) string {
	b, _ := json.Marshal(map[string]any{"instances": []any{map[string]any{"x": x}}})
	return string(b)
}

// wantAdd is the value the door must write for x: the output of ONNX
// Runtime run directly on x, as the Redis result format renders it (base64
// Arrow, one record batch per output).
func wantAdd(tb testing.TB, direct *infer.Session, x []float32) string {
	tb.Helper()
	out, err := direct.Run([]infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 4}, Data: x}})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range out {
		out[i].Shape = out[i].Shape[1:] // one record, without the batch dim
	}
	v, err := wire.EncodeRedisArrow(out)
	if err != nil {
		tb.Fatal(err)
	}
	return string(v)
}

func TestJSONRecordsMatchONNXRuntime(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "addjob", addModel)
	runDoor(t, addr, "addjob", m.client)

	const total = 200
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([][]float32, total)
	for i := range xs {
		xs[i] = []float32{r.Float32()*100 - 50, r.Float32(), float32(r.IntN(1000)), -r.Float32()}
		enqueue(t, rdb, "addjob", fmt.Sprint("rec-", i), instances(xs[i]), true)
	}
	for i, x := range xs {
		got := query(t, rdb, "addjob", fmt.Sprint("rec-", i))
		if want := wantAdd(t, direct, x); got != want {
			t.Errorf("x=%v: got %q, want %q", x, got, want)
		}
	}
	ctx := context.Background()
	meshtest.WaitFor(t, "XLEN 0", func() bool { return rdb.XLen(ctx, "addjob").Val() == 0 })
	if p := rdb.XPending(ctx, "addjob", "serving").Val(); p.Count != 0 {
		t.Errorf("got %d pending entries, want 0", p.Count)
	}
}

func TestBadRecordsAnswerNaN(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "bad", addModel)
	runDoor(t, addr, "bad", m.client)
	ctx := context.Background()

	enqueue(t, rdb, "bad", "bad-json", `{"instances":[{`, true)
	enqueue(t, rdb, "bad", "wrong-shape", `{"instances":[{"x":[1,2]}]}`, true)
	enqueue(t, rdb, "bad", "bad-arrow", "bm90IGFycm93", false)
	rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "bad", Values: []any{"uri", "no-data"}})
	rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "bad", Values: []any{"data", "no uri"}})
	x := []float32{1, 2, 3, 4}
	enqueue(t, rdb, "bad", "good", instances(x), true)

	for _, uri := range []string{"bad-json", "wrong-shape", "bad-arrow", "no-data"} {
		if got := query(t, rdb, "bad", uri); got != "NaN" {
			t.Errorf("%s: got %q, want NaN", uri, got)
		}
	}
	if got, want := query(t, rdb, "bad", "good"), wantAdd(t, direct, x); got != want {
		t.Errorf("good record after bad ones: got %q, want %q", got, want)
	}
	meshtest.WaitFor(t, "XLEN 0", func() bool { return rdb.XLen(ctx, "bad").Val() == 0 })
}

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

func TestTwoJobsStayApart(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	a := startJob(t, s, "joba", addModel)
	b := startJob(t, s, "jobb", addModel)
	runDoor(t, addr, "joba", a.client)
	runDoor(t, addr, "jobb", b.client)

	xa, xb := []float32{1, 1, 1, 1}, []float32{5, 6, 7, 8}
	for i := range 20 {
		enqueue(t, rdb, "joba", fmt.Sprint("same-", i), instances(xa), true)
		enqueue(t, rdb, "jobb", fmt.Sprint("same-", i), instances(xb), true)
	}
	for i := range 20 {
		if got, want := query(t, rdb, "joba", fmt.Sprint("same-", i)), wantAdd(t, direct, xa); got != want {
			t.Errorf("joba: got %q, want %q", got, want)
		}
		if got, want := query(t, rdb, "jobb", fmt.Sprint("same-", i)), wantAdd(t, direct, xb); got != want {
			t.Errorf("jobb: got %q, want %q", got, want)
		}
	}
}

// A client that created the group with $ after adding entries made the
// group skip them; a door that crashed left entries pending. Both are served.
func TestSkippedAndPendingEntriesServed(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "late", addModel)
	ctx := context.Background()

	x := []float32{0.5, 1.5, 2.5, 3.5}
	for i := range 5 {
		enqueue(t, rdb, "late", fmt.Sprint("early-", i), instances(x), true)
	}
	// What the Python client does: XGROUP CREATE <stream> serving $.
	if err := rdb.XGroupCreate(ctx, "late", "serving", "$").Err(); err != nil {
		t.Fatal(err)
	}
	// A door that died after XREADGROUP: two entries pending for it.
	enqueue(t, rdb, "late", "pending-0", instances(x), true)
	enqueue(t, rdb, "late", "pending-1", instances(x), true)
	if err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "serving", Consumer: "dead-door", Streams: []string{"late", ">"}}).Err(); err != nil {
		t.Fatal(err)
	}
	runDoor(t, addr, "late", m.client)
	enqueue(t, rdb, "late", "after", instances(x), true)

	want := wantAdd(t, direct, x)
	for _, uri := range []string{"early-0", "early-1", "early-2", "early-3", "early-4", "pending-0", "pending-1", "after"} {
		if got := query(t, rdb, "late", uri); got != want {
			t.Errorf("%s: got %q, want %q", uri, got, want)
		}
	}
	meshtest.WaitFor(t, "XLEN 0", func() bool { return rdb.XLen(ctx, "late").Val() == 0 })
}

// A door restarted between inference and the HSET loses nothing: the
// results wait in the durable consumer.
func TestRestartedDoorWritesWaitingResults(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "restart", addModel)
	ctx := context.Background()

	// A door ran once (its durable results consumer exists), then stopped.
	stop := runDoor(t, addr, "restart", m.client)
	meshtest.WaitFor(t, "group", func() bool { return rdb.XInfoGroups(ctx, "restart").Err() == nil })
	stop()
	// Requests go in through the mesh as the door would; the results are
	// computed while no door runs.
	x := []float32{9, 8, 7, 6}
	for i := range 10 {
		err := m.client.Enqueue(ctx, "restart", mesh.Request{URI: fmt.Sprint("r", i), ContentType: wire.MediaTypeRedisJSON, Body: []byte(instances(x))}, mesh.ResultsSubject("restart", "redis"))
		if err != nil {
			t.Fatal(err)
		}
	}
	runDoor(t, addr, "restart", m.client)
	want := wantAdd(t, direct, x)
	for i := range 10 {
		if got := query(t, rdb, "restart", fmt.Sprint("r", i)); got != want {
			t.Errorf("r%d: got %q, want %q", i, got, want)
		}
	}
}

// When Redis is full (maxmemory reached, noeviction) the door still
// consumes and deletes entries, which frees memory; the results wait in
// JetStream and are written once Redis has room again.
func TestRedisFullLosesNothing(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "full", addModel)
	ctx := context.Background()

	x := []float32{-1, 0, 1, 2}
	for i := range 20 {
		enqueue(t, rdb, "full", fmt.Sprint("f", i), instances(x), true)
	}
	if err := rdb.XGroupCreate(ctx, "full", "serving", "0").Err(); err != nil {
		t.Fatal(err)
	}
	// Full: every command that may grow memory (HSET, XADD) is refused.
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") })
	if err := rdb.HSet(ctx, "probe", "a", "b").Err(); err == nil {
		t.Fatal("HSET accepted with maxmemory 1; want an OOM error")
	}
	logs, _ := runLoggedDoor(t, addr, "full", m.client)
	meshtest.WaitFor(t, "XLEN 0 while Redis is full", func() bool { return rdb.XLen(ctx, "full").Val() == 0 })
	time.Sleep(500 * time.Millisecond) // results are computed and refused meanwhile
	if keys := rdb.Keys(ctx, "cluster-serving_full:*").Val(); len(keys) != 0 {
		t.Fatalf("got %d result keys while Redis refuses writes", len(keys))
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	want := wantAdd(t, direct, x)
	for i := range 20 {
		if got := query(t, rdb, "full", fmt.Sprint("f", i)); got != want {
			t.Errorf("f%d: got %q, want %q", i, got, want)
		}
	}
	// Refused writes are logged once per cause, not once per retry.
	if n := logs.count("they wait in JetStream"); n < 1 || n > 2 {
		t.Errorf("got %d lines for the refused writes, want 1 or 2:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}
