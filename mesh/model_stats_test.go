package mesh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// waitWorkers polls Client.Stats until n workers of job answer.
func waitWorkers(tb testing.TB, c *mesh.Client, job string, n int) {
	tb.Helper()
	meshtest.WaitFor(tb, fmt.Sprintf("%d workers of %s", n, job), func() bool {
		st, err := c.Stats(context.Background(), job)
		return err == nil && st.Workers == n
	})
}

// statsResponder answers $SRV.STATS.cluster-serving-worker as a worker of
// job with stats, once release closes (never when it stays open): a
// worker that answers late, or not at all.
func statsResponder(tb testing.TB, nc *nats.Conn, job string, stats mesh.WorkerStats, release <-chan struct{}) {
	tb.Helper()
	data, _ := json.Marshal(stats)
	answer, _ := json.Marshal(micro.Stats{ServiceIdentity: micro.ServiceIdentity{Name: mesh.WorkerServiceName, ID: "late-" + job,
		Metadata: map[string]string{mesh.MetadataJob: job}}, Endpoints: []*micro.EndpointStats{{Name: "stats", Data: data}}})
	sub, err := nc.Subscribe("$SRV.STATS."+mesh.WorkerServiceName, func(m *nats.Msg) {
		go func() {
			<-release
			_ = m.Respond(answer)
		}()
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
}

// TestStatsSumsWorkers runs records of known batch sizes through two
// workers of one job, each with a real engine, while a third "worker"
// answers STATS only after Stats returned and a fourth never does: the
// sum is the two workers' counts, exactly.
func TestStatsSumsWorkers(t *testing.T) {
	infertest.RequireLibrary(t)
	s := meshtest.StartServer(t)
	job := "stats2"
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}}
	nc := meshtest.Connect(t, s)
	ensure(t, nc, cfg.Stream)
	for range 2 {
		runWorker(t, meshtest.Connect(t, s), cfg, newPredictor(t, "add_f32"))
	}
	c := newClient(t, nc)
	waitWorkers(t, c, job, 2)

	never, late := make(chan struct{}), make(chan struct{})
	statsResponder(t, meshtest.Connect(t, s), job, mesh.WorkerStats{Infer: mesh.InferStats{InferenceCount: 1000}}, late)
	statsResponder(t, meshtest.Connect(t, s), job, mesh.WorkerStats{Infer: mesh.InferStats{InferenceCount: 1000}}, never)

	sizes := []int{1, 3, 2, 3, 1, 4}
	rows := 0
	for _, b := range sizes {
		rows += b
		inst := slices.Repeat([]string{`{"x":[1,2,3,4]}`}, b)
		body := fmt.Sprintf(`{"instances":[%s]}`, strings.Join(inst, ","))
		if _, err := c.Submit(context.Background(), job, mesh.Request{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	// A record the model refuses ends as a failure, not a success.
	if _, err := c.Submit(context.Background(), job, mesh.Request{Body: []byte(`{"instances":[{"x":[1]}]}`)}); err == nil {
		t.Fatal("a record of the wrong shape was answered")
	}
	st, err := c.Stats(context.Background(), job)
	close(late)
	if err != nil {
		t.Fatal(err)
	}
	if st.Workers != 2 {
		t.Errorf("workers: got %d, want 2 (the late and silent ones left out)", st.Workers)
	}
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"inference_count", st.InferenceCount, uint64(rows)},
		{"execution_count", st.ExecutionCount, uint64(len(sizes))},
		{"success.count", st.Success.Count, uint64(len(sizes))},
		{"fail.count", st.Fail.Count, 1},
		{"queue.count", st.Queue.Count, uint64(len(sizes))},
		{"compute_infer.count", st.ComputeInfer.Count, uint64(len(sizes))},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %d, want %d", ch.name, ch.got, ch.want)
		}
	}
	for name, d := range map[string]mesh.StatDuration{"success": st.Success, "fail": st.Fail, "queue": st.Queue,
		"compute_input": st.ComputeInput, "compute_infer": st.ComputeInfer, "compute_output": st.ComputeOutput} {
		if d.NS == 0 {
			t.Errorf("%s.ns: got 0, want > 0", name)
		}
	}
	checkBatches(t, st.Batches, sizes)
	if now := uint64(time.Now().UnixMilli()); st.LastInference == 0 || st.LastInference > now {
		t.Errorf("last_inference: got %d, want in (0, %d]", st.LastInference, now)
	}
}

// checkBatches checks that batches has one entry per size of sizes,
// counting the runs of that size, each of some time.
func checkBatches(tb testing.TB, batches []mesh.BatchStats, sizes []int) {
	tb.Helper()
	want := map[uint64]uint64{}
	for _, b := range sizes {
		want[uint64(b)]++
	}
	got := map[uint64]uint64{}
	for _, b := range batches {
		got[b.Size] = b.ComputeInfer.Count
		if b.ComputeInfer.NS == 0 || b.ComputeInput.Count != b.ComputeInfer.Count || b.ComputeOutput.Count != b.ComputeInfer.Count {
			tb.Errorf("batch size %d: %+v, want equal counts and infer ns > 0", b.Size, b)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		tb.Errorf("batch_stats runs by size: got %v, want %v", got, want)
	}
}

// TestStatsNoWorkers: a job without workers sums to zero, without an
// error.
func TestStatsNoWorkers(t *testing.T) {
	s := meshtest.StartServer(t)
	c := newClient(t, meshtest.Connect(t, s))
	st, err := c.Stats(context.Background(), "nobody")
	if err != nil || st.Workers != 0 || st.InferenceCount != 0 {
		t.Errorf("got %+v, %v; want no workers, no error", st, err)
	}
}
