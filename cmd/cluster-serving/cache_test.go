package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStartResponseCache runs `cluster-serving start` with config.yaml's
// responseCache on and checks the wiring end to end: the model's config
// says response_cache, a repeat of a request (another id) is answered
// from the cache, and the statistics show one run, one miss and one hit.
func TestStartResponseCache(t *testing.T) {
	ports := freePorts(t, 1)
	cfg, _, job, env := testJob(t, fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d\nresponseCache: true\nresponseCacheTTL: 60\n", ports[0]))
	p := spawn(t, env, "start", "-c", cfg)
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	waitHTTPReady(t, p, base)
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, v); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %s: %v", path, resp.StatusCode, b, err)
		}
	}
	var config struct {
		ResponseCache struct {
			Enable bool `json:"enable"`
		} `json:"response_cache"`
	}
	get("/v2/models/"+job+"/config", &config)
	if !config.ResponseCache.Enable {
		t.Error("config: response_cache is not enabled")
	}
	for _, id := range []string{"a", "b"} {
		body := `{"id":"` + id + `","inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`
		resp, err := http.Post(base+"/v2/models/"+job+"/infer", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"id":"`+id+`"`) || !strings.Contains(string(b), `"data":[3,5,7,9]`) {
			t.Fatalf("request %s: %d %s", id, resp.StatusCode, b)
		}
	}
	var stats struct {
		ModelStats []struct {
			ExecutionCount uint64 `json:"execution_count"`
			InferenceStats map[string]struct {
				Count uint64 `json:"count"`
			} `json:"inference_stats"`
		} `json:"model_stats"`
	}
	get("/v2/models/"+job+"/stats", &stats)
	if len(stats.ModelStats) != 1 {
		t.Fatalf("stats: %+v", stats)
	}
	st := stats.ModelStats[0]
	if st.ExecutionCount != 1 || st.InferenceStats["cache_hit"].Count != 1 || st.InferenceStats["cache_miss"].Count != 1 {
		t.Errorf("stats: executions %d, hits %d, misses %d; want 1, 1, 1", st.ExecutionCount,
			st.InferenceStats["cache_hit"].Count, st.InferenceStats["cache_miss"].Count)
	}
}
