package mesh_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// These tests put the real engine (ONNX Runtime, a generated model) behind
// the workers through its wire.Predictor; they fail in CI
// (CLUSTER_SERVING_REQUIRE_DEPS=1) and skip elsewhere when the library is
// missing.

// newPredictor loads the test model name of infer/testdata and returns
// its wire.Predictor; the engine closes at cleanup.
func newPredictor(tb testing.TB, name string) *wire.Predictor {
	tb.Helper()
	e := infertest.NewEngine(tb, infer.Config{ModelPath: infertest.Model(name), Threads: 1, MaxBatch: 8})
	return wire.NewPredictor(e, wire.Model{Name: name})
}

// predictionData unwraps one prediction of the /predict answer format.
func predictionData(tb testing.TB, body []byte) []float32 {
	tb.Helper()
	var resp struct{ Predictions []string }
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Predictions) != 1 {
		tb.Fatalf("reply %.200s: %v", body, err)
	}
	var v struct{ Value string }
	if err := json.Unmarshal([]byte(resp.Predictions[0]), &v); err != nil {
		tb.Fatalf("prediction %s: %v", resp.Predictions[0], err)
	}
	var t struct{ Data []float32 }
	if err := json.Unmarshal([]byte(v.Value), &t); err != nil {
		tb.Fatalf("value %s: %v", v.Value, err)
	}
	return t.Data
}

func TestEngineThroughTwoWorkers(t *testing.T) {
	infertest.RequireLibrary(t)
	direct := infertest.NewSession(t, infertest.Model("add_f32"))

	s := meshtest.StartServer(t)
	job := "engine2"
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}}
	ensure(t, meshtest.Connect(t, s), cfg.Stream)
	w1, _ := runWorker(t, meshtest.Connect(t, s), cfg, newPredictor(t, "add_f32"))
	w2, _ := runWorker(t, meshtest.Connect(t, s), cfg, newPredictor(t, "add_f32"))
	caller := serveNATS(t, s, job)

	const total, conc = 1000, 32
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range conc {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for next.Add(1) <= total {
				x := []float32{r.Float32()*100 - 50, r.Float32(), float32(r.IntN(1000)), -r.Float32()}
				body := fmt.Sprintf(`{"instances":[{"x":[%v,%v,%v,%v]}]}`, x[0], x[1], x[2], x[3])
				reply, err := requestResult(caller, &nats.Msg{Subject: mesh.PredictSubject(job), Data: []byte(body)}, 30*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				got := predictionData(t, reply.Data)
				mu.Lock() // one direct session, used serially as the reference
				want, err := direct.Run([]infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 4}, Data: x}})
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if fmt.Sprint(got) != fmt.Sprint(want[0].Data) {
					t.Errorf("x=%v: got %v, want %v (ONNX Runtime direct)", x, got, want[0].Data)
				}
			}
		})
	}
	wg.Wait()
	s1, s2 := w1.Stats(), w2.Stats()
	if s1.Processed+s2.Processed != total {
		t.Errorf("got %d+%d processed, want %d", s1.Processed, s2.Processed, total)
	}
	if s1.Processed == 0 || s2.Processed == 0 {
		t.Errorf("got %d and %d processed, want both workers to serve", s1.Processed, s2.Processed)
	}
}

func TestEngineBadInputKeepsServing(t *testing.T) {
	infertest.RequireLibrary(t)
	s := meshtest.StartServer(t)
	job := "engbad"
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}}
	ensure(t, meshtest.Connect(t, s), cfg.Stream)
	p := newPredictor(t, "two_io")
	runWorker(t, meshtest.Connect(t, s), cfg, p)
	caller := serveNATS(t, s, job)
	info := p.Spec().Info
	good := goodTwoIO(t, info)

	tests := []struct{ name, body, want string }{
		{"bad JSON", `{"instances":[{`, "400"},
		{"wrong shape", replaceFirstInput(info, good, `[1]`), "400"},
		{"wrong dtype", replaceFirstInput(info, good, `"a string"`), "400"},
		{"unknown input", `{"instances":[{"nope":[1],"` + info.Inputs[1].Name + `":[1]}]}`, "400"},
		{"no instances", `{"instances":[]}`, "400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply, err := caller.Request(mesh.PredictSubject(job), []byte(tt.body), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			code, msg := reply.Header.Get("Nats-Service-Error-Code"), reply.Header.Get("Nats-Service-Error")
			if code != tt.want || msg == "" {
				t.Errorf("got code %q message %q, want code %s with a message", code, msg, tt.want)
			}
			t.Logf("%s -> %s %s", tt.name, code, msg)
			// The next good request is still served.
			ok, err := caller.Request(mesh.PredictSubject(job), []byte(good), 10*time.Second)
			if err != nil || ok.Header.Get("Nats-Service-Error-Code") != "" {
				t.Fatalf("good request after %s: %v %v", tt.name, err, ok.Header)
			}
		})
	}
}

// goodTwoIO builds a valid one-instance body for the two-input test model.
func goodTwoIO(tb testing.TB, info infer.ModelInfo) string {
	tb.Helper()
	inst := map[string]any{}
	for _, in := range info.Inputs {
		inst[in.Name] = filled(in.Shape[1:])
	}
	b, _ := json.Marshal(map[string]any{"instances": []any{inst}})
	return string(b)
}

func filled(shape []int64) any {
	if len(shape) == 0 {
		return 1
	}
	out := make([]any, max(shape[0], 1))
	for i := range out {
		out[i] = filled(shape[1:])
	}
	return out
}

func replaceFirstInput(info infer.ModelInfo, good, value string) string {
	var m map[string][]map[string]json.RawMessage
	_ = json.Unmarshal([]byte(good), &m)
	m["instances"][0][info.Inputs[0].Name] = json.RawMessage(value)
	b, _ := json.Marshal(m)
	return string(b)
}

// serveNATS runs the NATS door of job on s and returns a separate caller
// connection once the service answers.
func serveNATS(tb testing.TB, s *embedded.Server, job string) *nats.Conn {
	tb.Helper()
	startService(tb, meshtest.Connect(tb, s), meshtest.Connect(tb, s), mesh.ServiceConfig{Jobs: []string{job}})
	caller := meshtest.Connect(tb, s)
	meshtest.WaitFor(tb, "service", func() bool {
		_, err := caller.Request("$SRV.PING."+mesh.ServiceName, nil, time.Second)
		return err == nil
	})
	return caller
}
