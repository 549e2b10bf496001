package serving_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// TestBatchingReported serves three models and checks that each one's
// batching decision and reason reach the node's models (what the HTTP
// door's metadata shows) and worker discovery (what status shows): a
// model summing over dim 0 (its output's dim 0 is fixed) does not batch,
// a models entry's batching: off wins over the shapes.
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
	r := runReady(t, cfg)
	for _, m := range r.Models() {
		w := want[m.Job]
		if got := m.Info.DynamicBatch; (got && w.batching != "true") || (!got && w.batching != "false") || m.Info.BatchReason != w.reason {
			t.Errorf("model %s: got batching %v (%s), want %s (%s)", m.Name, got, m.Info.BatchReason, w.batching, w.reason)
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
