package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
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
	writeFile(t, filepath.Join(dir, "model.onnx"), data, 0o644)
}

const addModelFile = "../../infer/testdata/add_f32.onnx"

// startRepoNode runs a serving node on the model repository repo, given
// add version 1, with its HTTP door, and its gRPC door too when withGRPC,
// as `start` wires them, until the test ends; extra is more config.yaml.
// It returns the ports: NATS, HTTP, gRPC.
func startRepoNode(t *testing.T, repo, extra string, withGRPC bool) (ports []int) {
	t.Helper()
	requireORT(t)
	putRepoModel(t, repo, "add", "1")
	ports = freePorts(t, 3)
	yaml := fmt.Sprintf("modelRepository: %s\njobName: add\nqueueStorage: memory\n"+
		"natsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nhttpInterface: 127.0.0.1\nhttpPort: %d\nthreadPerModel: 1\n%s",
		repo, ports[0], t.TempDir(), ports[1], extra)
	if withGRPC {
		yaml += fmt.Sprintf("grpcPort: %d\n", ports[2])
	}
	file, err := serving.ParseFile([]byte(yaml))
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
	deps := doorDeps{p: &process{file: file}, node: node, log: log}
	runners := []func(context.Context) error{node.Run}
	door, err := httpRunner(deps)
	if err != nil {
		t.Fatal(err)
	}
	runners = append(runners, door)
	if withGRPC {
		if door, err = grpcRunner(deps); err != nil {
			t.Fatal(err)
		}
		runners = append(runners, door)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(runners))
	for _, run := range runners {
		go func() { _ = run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range runners {
			<-done
		}
		_ = node.Close()
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := node.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	return ports
}

// repoDoor is startRepoNode without gRPC; it returns call, which sends one
// request to the HTTP door with the header "Authorization: <auth>" (none
// when "") and returns the answer.
func repoDoor(t *testing.T, repo, extra string) func(method, path, auth, body string) (int, string) {
	t.Helper()
	base := fmt.Sprintf("http://127.0.0.1:%d", startRepoNode(t, repo, extra, false)[1])
	return func(method, path, auth, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return httpDo(t, req)
	}
}

// TestHTTPModelRepository runs a serving node on a model repository (polling
// off) with its HTTP door, as `start` wires them, and drives the
// model_repository extension: index, load of a model added later, bad
// bodies, unknown models, unload, and the 404 after it.
func TestHTTPModelRepository(t *testing.T) {
	repo := t.TempDir()
	send := repoDoor(t, repo, "modelRepositoryPoll: -1\n")
	call := func(method, path, body string) (int, string) { t.Helper(); return send(method, path, "", body) }
	infer := `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`

	putRepoModel(t, repo, "other", "2") // after start, polling off
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string // in the answer; "" for an empty body
	}{
		{"GET", "/v2", "", 200, `"extensions":["model_repository","model_configuration","system_shared_memory","binary_tensor_data","statistics"]`},
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
		{"GET", "/v2/models/add/versions/1/ready", "", 200, `{"name":"add","ready":true}`},
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

// TestGRPCModelRepository runs a serving node on a model repository
// (polling off) with its HTTP and gRPC doors, as `start` wires them, and
// drives it over gRPC: the repository adapter is the gRPC door's
// door.Control too, so a model added after start loads with
// RepositoryModelLoad and serves at once, and one not loaded or unloaded
// is NotFound saying why, and not ready.
func TestGRPCModelRepository(t *testing.T) {
	repo := t.TempDir()
	ports := startRepoNode(t, repo, "modelRepositoryPoll: -1\n", true)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ports[2]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := kservepb.NewGRPCInferenceServiceClient(cc)
	inferReq := func(model string) *kservepb.ModelInferRequest {
		return &kservepb.ModelInferRequest{ModelName: model, Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}
	}
	// notFound checks that every model RPC on model answers NotFound with
	// want, and ModelReady not ready.
	notFound := func(model, want string) {
		t.Helper()
		_, e1 := c.ModelInfer(wctx, inferReq(model))
		_, e2 := c.ModelMetadata(wctx, &kservepb.ModelMetadataRequest{Name: model})
		_, e3 := c.ModelConfig(wctx, &kservepb.ModelConfigRequest{Name: model})
		for _, err := range []error{e1, e2, e3} {
			if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), want) {
				t.Errorf("%s: got %v, want NotFound with %q", model, err, want)
			}
		}
		if r, err := c.ModelReady(wctx, &kservepb.ModelReadyRequest{Name: model}); err != nil || r.Ready {
			t.Errorf("ModelReady %s: got %v %v, want not ready", model, r, err)
		}
	}

	putRepoModel(t, repo, "other", "2") // after start, polling off
	notFound("other", `model "other" is not loaded (unavailable: not loaded yet`)
	notFound("nope", `unknown model "nope"`)
	if md, err := c.ServerMetadata(wctx, &kservepb.ServerMetadataRequest{}); err != nil || len(md.Extensions) == 0 || md.Extensions[0] != "model_repository" {
		t.Errorf("ServerMetadata: got %v %v, want model_repository first among the extensions", md, err)
	}

	if _, err := c.RepositoryModelLoad(wctx, &kservepb.RepositoryModelLoadRequest{ModelName: "other"}); err != nil {
		t.Fatalf("RepositoryModelLoad other: %v", err)
	}
	resp, err := c.ModelInfer(wctx, inferReq("other"))
	if err != nil || resp.ModelName != "other" || resp.ModelVersion != "2" || !reflect.DeepEqual(resp.Outputs[0].Contents.GetFp32Contents(), []float32{3, 5, 7, 9}) {
		t.Errorf("ModelInfer other after load: got %v %v, want version 2 and y [3 5 7 9]", resp, err)
	}
	md, err := c.ModelMetadata(wctx, &kservepb.ModelMetadataRequest{Name: "other"})
	if err != nil || !reflect.DeepEqual(md.Versions, []string{"2"}) || len(md.Inputs) != 1 || md.Inputs[0].Datatype != "FP32" {
		t.Errorf("ModelMetadata other: got %v %v, want version 2 with input x FP32", md, err)
	}
	if r, err := c.ModelReady(wctx, &kservepb.ModelReadyRequest{Name: "other", Version: "2"}); err != nil || !r.Ready {
		t.Errorf("ModelReady other 2: got %v %v, want ready", r, err)
	}
	if r, err := c.RepositoryIndex(wctx, &kservepb.RepositoryIndexRequest{Ready: true}); err != nil || len(r.Models) != 2 {
		t.Errorf("RepositoryIndex ready: got %v %v, want add and other", r, err)
	}

	if _, err := c.RepositoryModelUnload(wctx, &kservepb.RepositoryModelUnloadRequest{ModelName: "other"}); err != nil {
		t.Fatalf("RepositoryModelUnload other: %v", err)
	}
	notFound("other", `model "other" is not loaded (unavailable: unloaded`)
	if _, err := c.RepositoryModelLoad(wctx, &kservepb.RepositoryModelLoadRequest{ModelName: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("RepositoryModelLoad nope: got %v, want NotFound", err)
	}
	if resp, err := c.ModelInfer(wctx, inferReq("add")); err != nil || resp.ModelVersion != "1" {
		t.Errorf("ModelInfer add: got %v %v, want version 1", resp, err)
	}
}

// errorBody returns the message of a door's JSON error body, which must
// hold exactly {"error": "..."}.
func errorBody(t *testing.T, body string) string {
	t.Helper()
	var e map[string]string
	if err := json.Unmarshal([]byte(body), &e); err != nil || len(e) != 1 || e["error"] == "" {
		t.Fatalf("got %s (%v), want a JSON body {\"error\": ...}", body, err)
	}
	return e["error"]
}

// TestHTTPRepositoryRoles: behind a token file with an infer token and an
// admin token, the repository extension needs the admin token: the infer
// token gets a JSON 403 on index, load and unload (and still infers), no
// token a 401, the admin token does both.
func TestHTTPRepositoryRoles(t *testing.T) {
	const inferTok, adminTok = "planted-infer-tok-61ab", "planted-admin-tok-d03f"
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, tokens, "# clients\n"+inferTok+"\n"+adminTok+" admin\n", 0o600)
	call := repoDoor(t, t.TempDir(), "modelControl: explicit\nhttpAuthTokenFile: "+tokens+"\n")
	infer := `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`
	for _, tc := range []struct {
		path, auth, body string
		status           int
	}{
		{"/v2/repository/index", "", "", 401},
		{"/v2/repository/models/add/load", "", "", 401},
		{"/v2/repository/index", "Bearer " + inferTok, "", 403},
		{"/v2/repository/models/add/load", "Bearer " + inferTok, "", 403},
		{"/v2/repository/models/add/unload", "Bearer " + inferTok, "", 403},
		{"/v2/repository/models/nope/unload", "Bearer " + inferTok, "", 403},
		{"/v2/%72epository/models/add/unload", "Bearer " + inferTok, "", 403}, // escaped: the same route
		{"/v2//repository/models/add/unload", "Bearer " + inferTok, "", 403},  // unclean: redirected there
		{"/v2/models/add/infer", "Bearer " + inferTok, infer, 200},
		{"/v2/repository/index", "Bearer " + adminTok, "", 200},
		{"/v2/repository/models/add/unload", "Bearer " + adminTok, "", 200},
		{"/v2/models/add/infer", "Bearer " + inferTok, infer, 404},
		{"/v2/repository/models/add/load", "Bearer " + adminTok, "", 200},
		{"/v2/models/add/infer", "Bearer " + adminTok, infer, 200},
	} {
		st, body := call("POST", tc.path, tc.auth, tc.body)
		if st != tc.status {
			t.Errorf("POST %s as %q: got %d %s, want %d", tc.path, tc.auth, st, body, tc.status)
			continue
		}
		if st == 403 {
			if msg := errorBody(t, body); !strings.Contains(msg, "role admin") || strings.Contains(msg, "planted") {
				t.Errorf("POST %s as %q: got 403 %q, want one naming role admin and no token", tc.path, tc.auth, msg)
			}
		}
	}
}

// TestHTTPModelControl: with modelControl none, poll or left out (poll),
// load and unload answer a JSON 403 naming the mode, even to a door
// without tokens, and the model keeps serving; the index answers.
func TestHTTPModelControl(t *testing.T) {
	for _, tc := range []struct{ name, extra, mode string }{
		{"default", "", "modelControl poll"},
		{"poll", "modelControl: poll\nmodelRepositoryPoll: 1\n", "modelControl poll"},
		{"none", "modelControl: none\n", "modelControl none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := repoDoor(t, t.TempDir(), tc.extra)
			for _, path := range []string{"/v2/repository/models/add/unload", "/v2/repository/models/add/load"} {
				st, body := call("POST", path, "", "")
				if msg := errorBody(t, body); st != 403 || !strings.Contains(msg, tc.mode) || !strings.Contains(msg, "modelControl: explicit") {
					t.Errorf("POST %s: got %d %q, want 403 naming %s and modelControl: explicit", path, st, msg, tc.mode)
				}
			}
			if st, body := call("POST", "/v2/repository/index", "", ""); st != 200 || !strings.Contains(body, `"state":"READY"`) {
				t.Errorf("index: got %d %s, want 200 with add READY", st, body)
			}
			if st, body := call("POST", "/predict", "", `{"instances":[{"x":[1,2,3,4]}]}`); st != 200 {
				t.Errorf("predict after the refused unload: got %d %s, want 200", st, body)
			}
		})
	}
}
