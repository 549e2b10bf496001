package serving_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// TestNodeServesTheNATSDoorAndDrains runs on the machine's cores and as
// on 8, where the doors get connections of their own (openDoorConns).
func TestNodeServesTheNATSDoorAndDrains(t *testing.T) {
	for _, procs := range []int{runtime.GOMAXPROCS(0), 8} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			testNodeServesTheNATSDoorAndDrains(t)
		})
	}
}

func testNodeServesTheNATSDoorAndDrains(t *testing.T) {
	cfg := addConfig(t, "node", "")
	cfg.Serve, cfg.Service = true, true
	n := runReady(t, cfg)
	if !n.Ready() {
		t.Error("Ready: got false after WaitReady, want true")
	}
	if got := n.Models()[0].Info.InputNames(); len(got) != 1 || got[0] != "x" {
		t.Errorf("model inputs: got %v, want [x]", got)
	}
	requestAdd(t, n.URL(), "node")
	if got := n.Units()[0].Stats().Processed; got != 1 {
		t.Errorf("processed: got %d, want 1", got)
	}
	if err := n.wait(t, serving.ErrShutdown); err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n.Ready() {
		t.Error("Ready: got true after Close, want false")
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if nc2, err := nats.Connect(n.URL(), nats.Timeout(time.Second)); err == nil {
		nc2.Close()
		t.Error("the embedded server still accepts connections after Close")
	}
}

// TestStopNowHandsWorkBack stops a worker node at once while it holds a
// request, then starts another: the request is answered by the second,
// through a door-only node on the same external NATS.
func TestStopNowHandsWorkBack(t *testing.T) {
	infertest.RequireLibrary(t)
	url := externalNATS(t)
	workerCfg := addConfig(t, "handback", url)
	workerCfg.Serve = true
	doorCfg := addConfig(t, "handback", url)
	doorCfg.Describe = true

	first := runNode(t, workerCfg)
	first.StopNow() // every request it takes fails over
	door := runNode(t, doorCfg)
	if got := door.Models()[0].Info.InputNames(); len(got) != 1 || got[0] != "x" {
		t.Errorf("described inputs: got %v, want [x]", got)
	}
	answered := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		answered <- submitAdd(ctx, door.Client(), "handback")
	}()
	waitFor(t, "the first worker to hand the request back", func() bool { return first.Units()[0].Stats().Retried > 0 })
	if err := first.wait(t, serving.ErrStopNow); err != nil {
		t.Errorf("Run after stop-now: got %v, want nil", err)
	}
	second := runNode(t, workerCfg)
	if err := <-answered; err != nil {
		t.Fatalf("request handed back: %v", err)
	}
	if a, b := first.Units()[0].Stats().Processed, second.Units()[0].Stats().Processed; a != 0 || b != 1 {
		t.Errorf("processed: got first %d, second %d; want 0 and 1", a, b)
	}
}

func TestNewNodeErrors(t *testing.T) {
	infertest.RequireLibrary(t)
	two := addConfig(t, "two", "")
	two.Serve = true
	two.Models = append(two.Models, serving.Model{Name: "missing", Version: "2", Path: "no/such/model", Job: "two-missing-v2"})
	described := addConfig(t, "described", "")
	described.Describe = true
	described.Models[0].Path = "no/such/model"
	tests := []struct {
		name string
		cfg  serving.Config
		want string
	}{
		{"no models", serving.Config{}, "Models is empty"},
		{"bad job", serving.Config{Models: []serving.Model{{Name: "m", Job: "a.b"}}}, "Models: m"},
		{"missing second model", two, "model missing version 2: "},
		{"describe a missing model", described, "model described version 1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := serving.NewNode(context.Background(), tt.cfg)
			if err == nil {
				_ = n.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestDoorsServeTheNATSDoor runs what a cluster deployment runs, no
// `start`: a worker node and two door-only nodes (as `http` and `bridge`
// run them) on one NATS. Both doors serve the NATS door as one queue
// group, the worker does not; once one door stops, the other answers
// every request.
func TestDoorsServeTheNATSDoor(t *testing.T) {
	url := externalNATS(t)
	workerCfg := addConfig(t, "doors", url)
	workerCfg.Serve = true
	doorCfg := addConfig(t, "doors", url)
	doorCfg.Describe, doorCfg.Service = true, true
	worker, a, b := runNode(t, workerCfg), runNode(t, doorCfg), runNode(t, doorCfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range []*running{worker, a, b} {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := doorInstances(t, nc, 2); len(got) != 2 {
		t.Fatalf("door instances: got %d (%v), want 2", len(got), got)
	}
	if err := a.wait(t, serving.ErrShutdown); err != nil {
		t.Fatalf("Run of the stopped door: %v", err)
	}
	if got := doorInstances(t, nc, 1); len(got) != 1 {
		t.Fatalf("door instances after one stopped: got %d, want 1", len(got))
	}
	const n = 20
	for i := range n {
		reply, err := nc.Request(mesh.PredictSubject("doors"), []byte(addBody), 10*time.Second)
		if err != nil || !strings.Contains(string(reply.Data), addData) {
			t.Fatalf("request %d after one door stopped: got %v, %v; want %s", i, reply, err, addData)
		}
		if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
			t.Fatalf("request %d: error %s %s", i, code, reply.Header.Get(micro.ErrorHeader))
		}
	}
	if got := worker.Units()[0].Stats().Processed; got != n {
		t.Errorf("processed by the worker: got %d, want %d", got, n)
	}
}

// doorInstances polls $SRV.INFO of the NATS door until want instances
// answer (or 30 s pass) and returns each instance's predict endpoint
// queue group by id. Every endpoint must be in mesh.ServiceQueueGroup.
func doorInstances(tb testing.TB, nc *nats.Conn, want int) map[string]string {
	tb.Helper()
	var got map[string]string
	waitFor(tb, fmt.Sprintf("%d NATS door instances", want), func() bool {
		got = map[string]string{}
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			tb.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.PublishRequest("$SRV.INFO."+mesh.ServiceName, inbox, nil); err != nil {
			tb.Fatal(err)
		}
		for {
			m, err := sub.NextMsg(200 * time.Millisecond)
			if err != nil {
				return len(got) == want
			}
			var info micro.Info
			if err := json.Unmarshal(m.Data, &info); err != nil {
				tb.Fatalf("$SRV.INFO answer %q: %v", m.Data, err)
			}
			for _, e := range info.Endpoints {
				if e.Name != mesh.EndpointName || e.Metadata[mesh.MetadataJob] != "doors" || e.QueueGroup != mesh.ServiceQueueGroup {
					tb.Fatalf("instance %s endpoint: got %+v, want %s of job doors in queue group %q", info.ID, e, mesh.EndpointName, mesh.ServiceQueueGroup)
				}
				got[info.ID] = e.QueueGroup
			}
		}
	})
	return got
}

// externalNATS runs an embedded server for the test, as the external NATS
// several nodes join, and returns its URL.
func externalNATS(tb testing.TB) string {
	tb.Helper()
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv.ClientURL()
}

// TestBatchingReported serves three models and checks that each one's
// batching decision and reason reach the node's models (what the HTTP
// door's metadata shows) and worker discovery (what status shows): a
// model summing over dim 0 (its output's dim 0 is fixed) does not batch,
// a models entry's batching: off wins over the shapes. Each model's
// Triton config, completed from the graph, says the same: the engine's
// batch size as max_batch_size where it batches, else 0.
func TestBatchingReported(t *testing.T) {
	cfg := addConfig(t, "badd", "")
	cfg.Serve = true
	cfg.Models = []serving.Model{
		{Name: "add", Version: "1", Path: addModel, Job: "badd"},
		{Name: "sum", Version: "1", Path: "../../infer/testdata/sum_batch.onnx", Job: "bsum"},
		{Name: "off", Version: "1", Path: addModel, Job: "boff", Batching: "off"},
	}
	want := map[string]struct{ batching, reason string }{
		"badd": {"true", "dim 0 of every input and output is dynamic"},
		"bsum": {"false", `output "y" has fixed dim 0 = 1`},
		"boff": {"false", "config batching: off"},
	}
	// (A model whose batching is off by config gets what auto-complete
	// makes of its graph.)
	maxBatch := map[string]int32{"badd": infer.DefaultMaxBatch, "bsum": 0}
	r := runReady(t, cfg)
	for _, m := range r.Models() {
		w := want[m.Job]
		if got := m.Info.DynamicBatch; (got && w.batching != "true") || (!got && w.batching != "false") || m.Info.BatchReason != w.reason {
			t.Errorf("model %s: got batching %v (%s), want %s (%s)", m.Name, got, m.Info.BatchReason, w.batching, w.reason)
		}
		if want, ok := maxBatch[m.Job]; m.Config == nil || m.Config.Name != m.Name || (ok && m.Config.MaxBatchSize != want) {
			t.Errorf("model %s: config: got %v, want its name and max_batch_size %d", m.Name, m.Config, want)
		}
	}
	var ws []mesh.WorkerInfo
	waitFor(t, "three workers", func() bool {
		var err error
		ws, err = mesh.DiscoverWorkers(context.Background(), r.Conn(), 200*time.Millisecond)
		return err == nil && len(ws) == 3
	})
	for _, w := range ws {
		if got := (struct{ batching, reason string }{w.Batching, w.BatchReason}); got != want[w.Job] {
			t.Errorf("worker of %s: got %+v, want %+v", w.Job, got, want[w.Job])
		}
	}

	// A door node that only describes the models decides the same way.
	door := addConfig(t, "badd", r.URL())
	door.Describe = true
	door.Models = cfg.Models
	d := runReady(t, door)
	for _, m := range d.Models() {
		if w := want[m.Job]; m.Info.BatchReason != w.reason {
			t.Errorf("described model %s: got reason %q, want %q", m.Name, m.Info.BatchReason, w.reason)
		}
		if want, ok := maxBatch[m.Job]; m.Config == nil || (ok && m.Config.MaxBatchSize != want) {
			t.Errorf("described model %s: config: got %v, want max_batch_size %d", m.Name, m.Config, want)
		}
	}
}

// TestNATSDoorStatsCountBadRequests sends a request the model refuses
// (a row of 2 values for an input of 4) through the NATS door of a real
// node: the worker answers the caller a 400 itself (Client.Forward), so
// the failure counts in the worker's stats, and the door's $SRV.STATS
// count one request taken, without an error of the door's own.
func TestNATSDoorStatsCountBadRequests(t *testing.T) {
	cfg := addConfig(t, "bstats", "")
	cfg.Serve, cfg.Service = true, true
	r := runReady(t, cfg)
	nc := r.Conn()
	m, err := nc.Request(mesh.PredictSubject("bstats"), []byte(`{"instances":[{"x":[1,2]}]}`), 10*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "400" || !strings.Contains(m.Header.Get(micro.ErrorHeader), `"x"`) {
		t.Fatalf("bad request: got %v, %v; want a 400 error reply about input x", m, err)
	}
	// The door counts the request once its store is acknowledged, which
	// may come after the worker's answer did.
	var st micro.Stats
	waitFor(t, "the door to count the request", func() bool {
		m, err = nc.Request("$SRV.STATS."+mesh.ServiceName, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(m.Data, &st); err != nil || len(st.Endpoints) != 1 {
			t.Fatalf("got %s (%v), want the stats of one endpoint", m.Data, err)
		}
		return st.Endpoints[0].NumRequests > 0
	})
	if e := st.Endpoints[0]; e.NumRequests != 1 || e.NumErrors != 0 {
		t.Errorf("door: got %d requests %d errors, want 1 request taken and no error of the door's", e.NumRequests, e.NumErrors)
	}
	ws, err := mesh.DiscoverWorkers(context.Background(), nc, 500*time.Millisecond)
	if err != nil || len(ws) != 1 || ws[0].Stats.Failed != 1 || ws[0].Stats.Processed != 0 {
		t.Errorf("workers: got %+v, %v; want one worker that failed 1 record", ws, err)
	}
}

// TestFileDynamicBatching reads config.yaml's dynamicBatching, Triton's
// text format, for the models without a config.pbtxt, and refuses what
// Triton would.
func TestFileDynamicBatching(t *testing.T) {
	f, err := serving.ParseFile([]byte("modelPath: /m\njobName: j\ndynamicBatching: \"priority_levels: 2 default_priority_level: 2 default_queue_policy { max_queue_size: 8 }\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	q := f.ServedModels()[0].Queue
	if q.GetPriorityLevels() != 2 || q.GetDefaultQueuePolicy().GetMaxQueueSize() != 8 {
		t.Errorf("ServedModels: queue %v", q)
	}
	for text, want := range map[string]string{
		"priority_levels: 2 default_priority_level: 5": "default_priority_level 5 must be in 1..priority_levels (2)",
		"priority_levels: two":                         "not dynamic_batching in config.pbtxt's text format",
	} {
		_, err := serving.ParseFile([]byte("modelPath: /m\njobName: j\ndynamicBatching: \"" + text + "\"\n"))
		if err == nil || !strings.Contains(err.Error(), "dynamicBatching") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error of dynamicBatching saying %q", text, err, want)
		}
	}
}

// TestNodeQueueLevels serves a model without a config.pbtxt with
// config.yaml's priority levels: its config shows them, its worker
// consumes the other level's queue and answers a request there, and the
// NATS door places callers in them.
func TestNodeQueueLevels(t *testing.T) {
	cfg := addConfig(t, "add", "")
	cfg.Serve = true
	cfg.Models[0].Queue = &kservepb.ModelDynamicBatching{PriorityLevels: 2, DefaultPriorityLevel: 2}
	n := runReady(t, cfg)
	if got := n.Models()[0].ServedConfig().GetDynamicBatching().GetPriorityLevels(); got != 2 {
		t.Errorf("served config: priority_levels %d, want 2", got)
	}
	if q := n.QueueOf("add"); q.Levels != 2 || q.DefaultLevel != 2 {
		t.Errorf("QueueOf: %+v", q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(n.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Consumer(ctx, mesh.StreamName("add"), mesh.LevelConsumer(1)); err != nil {
		t.Fatalf("level 1's consumer: %v", err)
	}
	res, err := n.Client().Submit(ctx, "add", mesh.Request{Body: []byte(addBody), Schedule: mesh.Schedule{Level: 1}})
	if err != nil || res.Status != 200 {
		t.Fatalf("a request at level 1: %+v, %v", res, err)
	}
}
