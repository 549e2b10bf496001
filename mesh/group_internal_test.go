package mesh

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// groupWait is the GroupWait of sessionRunner's batcher: longer than a
// caller waits (callerWait), so that a group whose wait ran out shows as
// callers not answered. What ends a group's wait in these tests is its
// requests arriving or leaving, never the clock.
const (
	groupWait  = time.Minute
	callerWait = 20 * time.Second
)

// sessionRunner is a wire.Runner, as *infer.Engine is, over an
// infer.Batcher whose runs go to real ONNX Runtime sessions of add_f32
// (one per runner), with a GroupWait of groupWait.
type sessionRunner struct {
	b    *infer.Batcher
	runs atomic.Int64
}

// newSessionPredictor returns a wire.Predictor of add_f32 over a
// sessionRunner of two runners and MaxBatch 16.
func newSessionPredictor(tb testing.TB) (*wire.Predictor, *sessionRunner) {
	tb.Helper()
	path := infertest.Model("add_f32")
	ss := []*infer.Session{infertest.NewSession(tb, path), infertest.NewSession(tb, path)}
	r := &sessionRunner{}
	r.b = infer.NewBatcher(infer.BatcherConfig{Runners: len(ss), MaxBatch: 16, GroupWait: groupWait,
		OnBatch: func(int, int) { r.runs.Add(1) }},
		func(i int, in []infer.Tensor) ([]infer.Tensor, error) { return ss[i].Run(in) })
	tb.Cleanup(func() { _ = r.b.Close() })
	info, err := infer.DecideBatching(ss[0].Info(), "")
	if err != nil {
		tb.Fatal(err)
	}
	return wire.NewRunnerPredictor(r, wire.Spec{Model: wire.Model{Name: "add_f32"}, Info: info}, infer.Hooks{}, false), r
}

// Infer gives each record its batch dim (wire's JSON codec hands one
// row per record without it), as Engine.Infer does, and takes it away
// from the outputs.
func (r *sessionRunner) Infer(ctx context.Context, records [][]infer.Tensor) ([][]infer.Tensor, error) {
	batched := make([][]infer.Tensor, len(records))
	for i, rec := range records {
		batched[i] = make([]infer.Tensor, len(rec))
		for j, t := range rec {
			t.Shape = append([]int64{1}, t.Shape...)
			batched[i][j] = t
		}
	}
	outs, err := r.b.Submit(ctx, batched)
	for _, rec := range outs {
		for j := range rec {
			rec[j].Shape = rec[j].Shape[1:]
		}
	}
	return outs, err
}

// groupMesh runs a server with job's streams and a Worker of cfg
// serving p, and returns the worker and a connection.
func groupMesh(t *testing.T, cfg WorkerConfig, p Predictor) (*Worker, *nats.Conn) {
	t.Helper()
	s := meshtest.StartServer(t)
	nc := meshtest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureStreams(ctx, js, cfg.Stream); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(meshtest.Connect(t, s), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, w.Run)
	meshtest.WaitFor(t, "the worker", w.Consuming)
	return w, nc
}

// callerRequest is a NATS caller's request for x as a worker reads it,
// answered on to.
func callerRequest(to string, x float32, deadline time.Time) *nats.Msg {
	m := nats.NewMsg("")
	Reply{ReplyCaller, to}.set(m.Header)
	m.Header.Set(HeaderDeadline, strconv.FormatInt(deadline.UnixNano(), 10))
	m.Data = fmt.Appendf(nil, `{"instances":[{"x":[%v,1,2,3]}]}`, x)
	return m
}

// publishWork stores msgs as one batch work message of job, as a door
// coalesces them (batch), or the lone msgs[0] as it is.
func publishWork(t *testing.T, nc *nats.Conn, job string, msgs []*nats.Msg, batch bool) {
	t.Helper()
	m := msgs[0]
	if batch {
		m = nats.NewMsg("")
		m.Header.Set(HeaderBatch, strconv.Itoa(len(msgs)))
		m.Header.Set(HeaderBatchCallers, "true")
		m.Header.Set(HeaderContentType, BatchContentType)
		m.Data = encodeBatch(msgs)
	}
	m.Subject = WorkSubject(job)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// checkAnswers reads n answers from sub (the callers' subjects end with
// their request's index k): request k's error code is bad[k], or its
// answer is add_f32's of x = k (y = 2x + 1).
func checkAnswers(t *testing.T, sub *nats.Subscription, n int, bad map[int]string) {
	t.Helper()
	for range n {
		m, err := sub.NextMsg(callerWait)
		if err != nil {
			t.Fatalf("answers: %v", err)
		}
		k, _ := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		code := m.Header.Get("Nats-Service-Error-Code")
		if code != bad[k] {
			t.Errorf("request %d: got error code %q (%s), want %q", k, code, m.Header.Get("Nats-Service-Error"), bad[k])
			continue
		}
		if want := fmt.Sprintf("[%v,3,5,7]", 2*k+1); code == "" && !strings.Contains(string(m.Data), want) {
			t.Errorf("request %d: got %s, want y = %s", k, m.Data, want)
		}
	}
}

// TestBatchRunsAsOneModelRun stores the requests of NATS callers as one
// batch work message, as the NATS door coalesces them, and checks that
// the worker runs them through the model (real ONNX Runtime) in one run:
// the model's statistics count 16 inferences and 1 execution. A request
// that never reaches the model (bad JSON, a passed deadline) leaves the
// group, and so do those the worker's gate holds back, so that the
// others do not wait for them; a lone request and a batch of one wait
// for nobody.
func TestBatchRunsAsOneModelRun(t *testing.T) {
	infertest.RequireLibrary(t)
	tests := []struct {
		name        string
		n           int
		batch       bool
		bad         map[int]string // request → the error code its caller gets
		maxInflight int
		wantRuns    uint64 // 0: not checked (the gate makes it vary)
	}{
		{name: "sixteen", n: 16, batch: true, wantRuns: 1},
		{name: "one bad, one expired", n: 16, batch: true, bad: map[int]string{3: "400", 9: "504"}, wantRuns: 1},
		{name: "gate of four", n: 16, batch: true, maxInflight: 4},
		{name: "batch of one", n: 1, batch: true, wantRuns: 1},
		{name: "lone request", n: 1, wantRuns: 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := "group" + strconv.Itoa(i)
			p, r := newSessionPredictor(t)
			w, nc := groupMesh(t, WorkerConfig{Stream: StreamConfig{Job: job}, MaxInflight: tt.maxInflight}, p)
			sub, err := nc.SubscribeSync("callers." + job + ".>")
			if err != nil {
				t.Fatal(err)
			}
			msgs := make([]*nats.Msg, tt.n)
			for k := range msgs {
				dl := time.Now().Add(callerWait)
				if tt.bad[k] == "504" {
					dl = time.Now().Add(-time.Second)
				}
				msgs[k] = callerRequest(fmt.Sprintf("callers.%s.%d", job, k), float32(k), dl)
				if tt.bad[k] == "400" {
					msgs[k].Data = []byte(`{"instances":[{`)
				}
			}
			publishWork(t, nc, job, msgs, tt.batch)
			checkAnswers(t, sub, tt.n, tt.bad)
			st := w.Stats().Infer
			t.Logf("inference_count %d, execution_count %d, batcher runs %d", st.InferenceCount, st.ExecutionCount, r.runs.Load())
			if want := uint64(tt.n - len(tt.bad)); st.InferenceCount != want {
				t.Errorf("inference_count: got %d, want %d", st.InferenceCount, want)
			}
			if tt.wantRuns != 0 && st.ExecutionCount != tt.wantRuns {
				t.Errorf("execution_count: got %d, want %d", st.ExecutionCount, tt.wantRuns)
			}
		})
	}
}
