package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestModelsConfig(t *testing.T) {
	cfg, err := parseConfig([]byte("jobName: j\nmodels:\n  - {name: a, path: /m/a}\n  - name: b\n    version: \"3\"\n    path: /m/b\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.servedModels()
	want := []servedModel{
		{name: "a", version: "1", path: "/m/a", job: "j"},
		{name: "b", version: "3", path: "/m/b", job: "j-b-v3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	cfg, err = parseConfig([]byte("modelPath: /m\njobName: j\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.servedModels(); !reflect.DeepEqual(got, []servedModel{{name: "j", version: "1", path: "/m", job: "j"}}) {
		t.Errorf("modelPath form: got %+v", got)
	}
}

func TestHTTPConfigKeys(t *testing.T) {
	cfg, err := parseConfig([]byte("modelPath: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if httpAddr(cfg) != "0.0.0.0:10020" || cfg.HTTPRequestTimeout != 30000 || cfg.HTTPMaxBodyBytes != 16<<20 || cfg.TokenBucketEnabled {
		t.Errorf("defaults: got %s %d %d %v", httpAddr(cfg), cfg.HTTPRequestTimeout, cfg.HTTPMaxBodyBytes, cfg.TokenBucketEnabled)
	}
	cfg, err = parseConfig([]byte("modelPath: m\ntimeWindow: 5\ncountWindow: 32\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxWait != 5 || cfg.MaxBatch != 32 {
		t.Errorf("aliases: got maxWait %d maxBatch %d, want 5 and 32", cfg.MaxWait, cfg.MaxBatch)
	}
}

func TestModelsAndHTTPConfigErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"both", "modelPath: m\nmodels:\n  - {name: a, path: p}\n", `config key "models": set modelPath (one model) or models (several), not both`},
		{"neither", "jobName: j\n", `config key "modelPath": required`},
		{"unknown entry key", "models:\n  - {name: a, path: p, pth: q}\n", `unknown key "pth" in a model entry`},
		{"no path", "models:\n  - {name: a}\n", `config key "models": entry 1: path is required`},
		{"bad name", "models:\n  - {name: a.b, path: p}\n", `entry 1: name "a.b"`},
		{"twice", "models:\n  - {name: a, path: p}\n  - {name: a, version: \"1\", path: q}\n", "a version 1 is listed twice"},
		{"not a list of mappings", "models:\n  - a\n", "each entry is a mapping"},
		{"port", "modelPath: m\nhttpPort: 70000\n", `config key "httpPort"`},
		{"timeout", "modelPath: m\nhttpRequestTimeout: -5\n", `config key "httpRequestTimeout"`},
		{"alias conflict", "modelPath: m\nmaxBatch: 8\ncountWindow: 4\n", `config key "countWindow": 4 conflicts with maxBatch: 8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestStartServesHTTP runs `cluster-serving start` with two models and
// checks that the HTTP door becomes ready and serves both.
func TestStartServesHTTP(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	port, hp := ports[0], ports[1]
	add, _ := filepath.Abs("../../infer/testdata/add_f32.onnx")
	cls, _ := filepath.Abs("../../infer/testdata/classifier.onnx")
	requireORT(t)
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("jobName: h%d\nmodels:\n  - {name: add, path: %s}\n  - {name: cls, version: \"2\", path: %s}\n"+
		"natsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nthreadPerModel: 1\nhttpInterface: 127.0.0.1\nhttpPort: %d\n",
		port, add, cls, port, filepath.Join(dir, "js"), hp)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := spawn(t, []string{"XDG_RUNTIME_DIR=" + dir}, "start", "-c", cfgPath)
	base := fmt.Sprintf("http://127.0.0.1:%d", hp)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/v2/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-p.done:
			t.Fatalf("start exited early:\n%s", p.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/v2/health/ready never 200:\n%s", p.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	post := func(path, body string) (int, string) {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	st, body := post("/predict", `{"instances":[{"x":[1,2,3,4]}]}`)
	if got, err := decodePrediction([]byte(body)); st != 200 || err != nil || !reflect.DeepEqual(got, []float32{3, 5, 7, 9}) {
		t.Errorf("/predict: got %d %s", st, body)
	}
	st, body = post("/v2/models/cls/versions/2/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,8],"data":[1,0,0,0,0,0,0,0]}]}`)
	var ans struct {
		Outputs []struct {
			Name  string
			Shape []int64
		}
	}
	if st != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.Outputs) != 1 || ans.Outputs[0].Name != "probs" {
		t.Errorf("infer cls: got %d %s", st, body)
	}
	p.signalAndWait(t, syscall.SIGTERM)
}

// TestHTTPCommand runs `cluster-serving http` against the NATS of a running
// `start` (whose own HTTP door is off) and predicts through it.
func TestHTTPCommand(t *testing.T) {
	cfgPath, url, _, env := testJob(t, "httpPort: -1\n")
	start := spawn(t, env, "start", "-c", cfgPath)
	waitReady(t, url, start)

	hp := freePorts(t, 1)[0]
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	httpCfg := filepath.Join(filepath.Dir(cfgPath), "http.yaml")
	cfg := strings.Replace(string(data), "httpPort: -1\n", fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d\n", hp), 1)
	if err := os.WriteFile(httpCfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	door := spawn(t, env, "http", "-c", httpCfg, "-nats", url)
	base := fmt.Sprintf("http://127.0.0.1:%d", hp)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(base+"/predict", "application/json", strings.NewReader(`{"instances":[{"x":[1,2,3,4]}]}`))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got, derr := decodePrediction(b)
			if resp.StatusCode != 200 || derr != nil || !reflect.DeepEqual(got, []float32{3, 5, 7, 9}) {
				t.Fatalf("got %d %s", resp.StatusCode, b)
			}
			break
		}
		select {
		case <-door.done:
			t.Fatalf("http exited early:\n%s", door.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("http door never answered:\n%s", door.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	door.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
}
