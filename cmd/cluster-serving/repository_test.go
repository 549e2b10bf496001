package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// putRepoModel copies the add model (y = 2x+1) to <repo>/<name>/<version>/model.onnx.
func putRepoModel(t *testing.T, repo, name, version string) {
	t.Helper()
	data, err := os.ReadFile(addModelFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, name, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

const addModelFile = "../../infer/testdata/add_f32.onnx"

// TestHTTPModelRepository runs a serving node on a model repository (polling
// off) with its HTTP door, as `start` wires them, and drives the
// model_repository extension: index, load of a model added later, bad
// bodies, unknown models, unload, and the 404 after it.
func TestHTTPModelRepository(t *testing.T) {
	requireORT(t)
	repo := t.TempDir()
	putRepoModel(t, repo, "add", "1")
	ports := freePorts(t, 2)
	file, err := serving.ParseFile(fmt.Appendf(nil, "modelRepository: %s\nmodelRepositoryPoll: -1\njobName: add\nqueueStorage: memory\n"+
		"natsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nhttpInterface: 127.0.0.1\nhttpPort: %d\nthreadPerModel: 1\n",
		repo, ports[0], t.TempDir(), ports[1]))
	if err != nil {
		t.Fatal(err)
	}
	cfg := file.Node(os.Getenv)
	cfg.Serve, cfg.Service = true, true
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Logger = log
	node, err := serving.NewNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	door, err := httpRunner(doorDeps{p: &process{file: file}, node: node, log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = node.Run(ctx); done <- struct{}{} }()
	go func() { _ = door(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; _ = node.Close() })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := node.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}

	base := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	infer := `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`

	putRepoModel(t, repo, "other", "2") // after start, polling off
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string // in the answer; "" for an empty body
	}{
		{"GET", "/v2", "", 200, `"extensions":["model_repository","binary_tensor_data"]`},
		{"POST", "/v2/repository/index", "", 200, `[{"name":"add","version":"1","state":"READY"},{"name":"other","version":"2","state":"UNAVAILABLE","reason":"not loaded yet`},
		{"POST", "/v2/repository/index", `{"ready":true}`, 200, `[{"name":"add","version":"1","state":"READY"}]`},
		{"POST", "/v2/repository/index", `{"ready":"yes"}`, 400, `request body`},
		{"POST", "/v2/repository/index", `{"repository_name":"x"}`, 400, `unknown repository_name \"x\"`},
		{"GET", "/v2/repository/index", "", 405, `use POST`},
		{"POST", "/predict", `{"instances":[{"x":[1,2,3,4]}]}`, 200, `[3,5,7,9]`},
		{"POST", "/v2/models/other/infer", infer, 404, `model \"other\" is not loaded (unavailable: not loaded yet`},
		{"POST", "/v2/repository/models/other/load", `{"parameters":{"config":"{}"}}`, 400, `unsupported parameters config`},
		{"POST", "/v2/repository/models/other/load", `{`, 400, `request body`},
		{"POST", "/v2/repository/models/nope/load", "", 404, `unknown model \"nope\"`},
		{"POST", "/v2/repository/models/other/load", "", 200, ""},
		{"POST", "/v2/models/other/infer", infer, 200, `"model_name":"other","model_version":"2"`},
		{"GET", "/v2/models/other", "", 200, `"versions":["2"]`},
		{"GET", "/v2/models/add/versions/1/ready", "", 200, ""},
		{"POST", "/v2/repository/models/other/load", "{}", 200, ""}, // a reload
		{"POST", "/v2/repository/models/other/unload", `{"parameters":{"unload_dependents":false}}`, 200, ""},
		{"POST", "/v2/models/other/infer", infer, 404, `model \"other\" is not loaded (unavailable: unloaded`},
		{"POST", "/v2/repository/models/other/unload", "", 404, `model \"other\" is not loaded`},
		{"POST", "/v2/repository/index", "", 200, `{"name":"other","version":"2","state":"UNAVAILABLE","reason":"unloaded`},
		{"GET", "/v2/models", "", 200, `{"models":[{"name":"add","versions":["1"]`},
		{"POST", "/v2/models/add/infer", infer, 200, `"model_name":"add","model_version":"1"`},
	} {
		st, body := call(tc.method, tc.path, tc.body)
		if st != tc.status || (tc.want == "" && body != "") || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: got %d %s, want %d with %q", tc.method, tc.path, tc.body, st, body, tc.status, tc.want)
		}
	}
}
