package httpdoor_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestHealthBodies: the health routes answer OIP's JSON bodies, and
// {"ready": false} with the error and 503 while the server is not ready.
func TestHealthBodies(t *testing.T) {
	infertest.RequireLibrary(t)
	var ready atomic.Bool
	cfg := httpdoor.Config{}
	cfg.Ready = ready.Load
	e := startDoor(t, cfg, served{name: "add", file: "add_f32"})
	tests := []struct {
		path  string
		ready bool
		st    int
		want  string
	}{
		{"/v2/health/live", false, 200, `{"live":true}`},
		{"/v2/health/ready", false, 503, `{"error":"the server is not ready: models are loading or no worker serves them yet","ready":false}`},
		{"/v2/models/add/ready", false, 503, `{"error":"model add is not ready: models are loading or no worker serves them yet","name":"add","ready":false}`},
		{"/v2/health/live", true, 200, `{"live":true}`},
		{"/v2/health/ready", true, 200, `{"ready":true}`},
		{"/v2/models/add/ready", true, 200, `{"name":"add","ready":true}`},
		{"/v2/models/add/versions/1/ready", true, 200, `{"name":"add","ready":true}`},
	}
	for _, tt := range tests {
		ready.Store(tt.ready)
		req, _ := http.NewRequest("GET", e.url+tt.path, nil)
		resp, b := do(t, req)
		if resp.StatusCode != tt.st || string(b) != tt.want || resp.Header.Get("Content-Type") != wire.MediaTypeJSON {
			t.Errorf("GET %s (ready %v): got %d %s %s, want %d %s %s", tt.path, tt.ready, resp.StatusCode, resp.Header.Get("Content-Type"), b, tt.st, wire.MediaTypeJSON, tt.want)
		}
	}
}

// TestConfigRoute: GET .../config answers the model configuration in
// Triton's JSON shape, 64-bit integers as numbers.
func TestConfigRoute(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"}, served{name: "add", version: "2", file: "add_f64"})
	for _, tt := range []struct{ path, dtype string }{
		{"/v2/models/add/config", "TYPE_FP64"},
		{"/v2/models/add/versions/1/config", "TYPE_FP32"},
	} {
		st, b := call(t, "GET", e.url+tt.path, "")
		var cfg struct {
			Name         string
			MaxBatchSize json.RawMessage `json:"max_batch_size"`
			Input        []struct {
				Name     string
				DataType string `json:"data_type"`
				Dims     []json.RawMessage
			}
		}
		if st != 200 || json.Unmarshal(b, &cfg) != nil || cfg.Name != "add" || len(cfg.Input) != 1 {
			t.Fatalf("GET %s: got %d %s", tt.path, st, b)
		}
		in := cfg.Input[0]
		if _, err := strconv.Atoi(string(cfg.MaxBatchSize)); err != nil || in.DataType != tt.dtype || len(in.Dims) == 0 {
			t.Errorf("GET %s: got %s, want max_batch_size a number and input x %s with dims", tt.path, b, tt.dtype)
		}
		if string(in.Dims[len(in.Dims)-1]) != "4" {
			t.Errorf("GET %s: got dims %s, want them to end in 4", tt.path, in.Dims)
		}
		for _, d := range in.Dims {
			if _, err := strconv.ParseInt(string(d), 10, 64); err != nil {
				t.Errorf("GET %s: dim %s is not a number in %s", tt.path, d, b)
			}
		}
	}
}
