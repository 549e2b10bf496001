package httpdoor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// statsJSON is the part of Triton's ModelStatisticsResponse the tests
// read; its integer fields fail to decode when the door writes strings.
type statsJSON struct {
	ModelStats []struct {
		Name           string `json:"name"`
		Version        string `json:"version"`
		LastInference  uint64 `json:"last_inference"`
		InferenceCount uint64 `json:"inference_count"`
		ExecutionCount uint64 `json:"execution_count"`
		InferenceStats map[string]struct {
			Count uint64 `json:"count"`
			NS    uint64 `json:"ns"`
		} `json:"inference_stats"`
		BatchStats []struct {
			BatchSize    uint64 `json:"batch_size"`
			ComputeInfer struct {
				Count uint64 `json:"count"`
				NS    uint64 `json:"ns"`
			} `json:"compute_infer"`
		} `json:"batch_stats"`
	} `json:"model_stats"`
}

// addWorker runs one more worker of job on model file, until the test
// ends.
func addWorker(tb testing.TB, nc *nats.Conn, job, file string) {
	tb.Helper()
	wc, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(wc.Close)
	e := infertest.NewEngine(tb, infer.Config{ModelPath: infertest.Model(file), MaxBatch: 8})
	w, err := mesh.NewWorker(wc, mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job, Storage: jetstream.MemoryStorage}, ShutdownGrace: time.Second},
		wire.NewPredictor(e, wire.Model{Name: job}))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	for !w.Consuming() {
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatsRoutes sends requests of known batch sizes to a model served
// by two workers and reads Triton's statistics back through every route.
func TestStatsRoutes(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"}, served{name: "stats", file: "add_f32"})
	addWorker(t, e.nc, "add", "add_f32")
	meshtest.WaitFor(t, "two workers of add", func() bool {
		st, err := e.client.Stats(context.Background(), "add")
		return err == nil && st.Workers == 2
	})
	sizes := []int{2, 1, 3, 2}
	rows := 0
	for _, b := range sizes {
		rows += b
		data := strings.TrimSuffix(strings.Repeat("1,2,3,4,", b), ",")
		body := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,4],"data":[%s]}]}`, b, data)
		if st, ans := call(t, "POST", e.url+"/v2/models/add/infer", body); st != http.StatusOK {
			t.Fatalf("infer: got %d %s", st, ans)
		}
	}
	st, body := call(t, "GET", e.url+"/v2/models/add/versions/1/stats", "")
	if st != http.StatusOK {
		t.Fatalf("stats: got %d %s, want 200", st, body)
	}
	var got statsJSON
	if err := json.Unmarshal(body, &got); err != nil || len(got.ModelStats) != 1 {
		t.Fatalf("stats %s: %v, want one model of numbers", body, err)
	}
	m := got.ModelStats[0]
	n := uint64(len(sizes))
	if m.Name != "add" || m.Version != "1" || m.InferenceCount != uint64(rows) || m.ExecutionCount != n || m.LastInference == 0 {
		t.Errorf("got %s v%s inference_count %d execution_count %d last_inference %d, want add v1 %d %d > 0",
			m.Name, m.Version, m.InferenceCount, m.ExecutionCount, m.LastInference, rows, n)
	}
	for _, k := range []string{"success", "queue", "compute_input", "compute_infer", "compute_output"} {
		if d := m.InferenceStats[k]; d.Count != n || d.NS == 0 {
			t.Errorf("%s: got %+v, want count %d, ns > 0", k, d, n)
		}
	}
	runs := map[uint64]uint64{}
	for _, b := range m.BatchStats {
		runs[b.BatchSize] = b.ComputeInfer.Count
	}
	if want := map[uint64]uint64{1: 1, 2: 2, 3: 1}; fmt.Sprint(runs) != fmt.Sprint(want) {
		t.Errorf("batch_stats runs by size: got %v, want %v", runs, want)
	}

	tests := []struct {
		path   string
		status int
		models []string
	}{
		{"/v2/models/stats", http.StatusOK, []string{"add", "stats"}},
		{"/v2/models/add/stats", http.StatusOK, []string{"add"}},
		{"/v2/models/stats/stats", http.StatusOK, []string{"stats"}},
		{"/v2/models/nope/stats", http.StatusNotFound, nil},
		{"/v2/models/add/versions/9/stats", http.StatusNotFound, nil},
		{"/v2/models/stats/ready", http.StatusOK, nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			st, body := call(t, "GET", e.url+tt.path, "")
			if st != tt.status {
				t.Fatalf("got %d %s, want %d", st, body, tt.status)
			}
			if tt.models == nil {
				return
			}
			var got statsJSON
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			var names []string
			for _, m := range got.ModelStats {
				names = append(names, m.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.models) {
				t.Errorf("models: got %v, want %v", names, tt.models)
			}
		})
	}
}

// TestStatsRole: statistics are read-only, so an infer token reads them;
// no token does not.
func TestStatsRole(t *testing.T) {
	e, _, _ := tokenDoor(t, httpdoor.Config{})
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/v2/models/add/stats", "Bearer " + oldToken, http.StatusOK},
		{"/v2/models/stats", "Bearer " + oldToken, http.StatusOK},
		{"/v2/models/stats", "", http.StatusUnauthorized},
	} {
		st, _, body, err := send(httpClient, "GET", e.url+tc.path, tc.auth, "")
		if err != nil || st != tc.want {
			t.Errorf("GET %s (token %v): got %d %s %v, want %d", tc.path, tc.auth != "", st, body, err, tc.want)
		}
	}
}
