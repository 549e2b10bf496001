package main

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// tritonSimple is Triton's example model "simple" (its config.pbtxt and
// model.onnx as published): OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 =
// INPUT0 - INPUT1, INT32 rows of 16.
const tritonSimple = "../../infer/modelconfig/testdata/triton/model_repository/simple"

// tritonRepo writes simple into repo three times, as
// /work/triton-check/make_repo.py does: simple as published (max_batch_size
// 8, no dynamic_batching), simple_nobatch (max_batch_size 0, dims
// [-1, 16]) and simple_dyna (dynamic_batching, max_queue_delay 2 ms).
func tritonRepo(t *testing.T, repo string) {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(tritonSimple, "config.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	model, err := os.ReadFile(filepath.Join(tritonSimple, "1", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	nobatch := strings.NewReplacer("max_batch_size: 8", "max_batch_size: 0", "dims: [ 16 ]", "dims: [ -1, 16 ]")
	for name, c := range map[string]string{
		"simple":         string(cfg),
		"simple_nobatch": nobatch.Replace(string(cfg)),
		"simple_dyna":    string(cfg) + "\ndynamic_batching {\n  max_queue_delay_microseconds: 2000\n}\n",
	} {
		if err := os.MkdirAll(filepath.Join(repo, name, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(repo, name, "config.pbtxt"), strings.Replace(c, `name: "simple"`, `name: "`+name+`"`, 1), 0o644)
		writeFile(t, filepath.Join(repo, name, "1", "model.onnx"), model, 0o644)
	}
}

// tritonE2E is a client of both doors of one node.
type tritonE2E struct {
	t    *testing.T
	ctx  context.Context
	base string // the HTTP door
	g    kservepb.GRPCInferenceServiceClient
	nats string
}

// do sends one HTTP request with header (pairs of name, value) and returns
// the answer, its body read as it came (not decoded).
func (e *tritonE2E) do(method, path string, body []byte, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.base+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// getJSON GETs path and decodes its JSON answer into v; it returns the status.
func (e *tritonE2E) getJSON(path string, v any) int {
	e.t.Helper()
	resp, b := e.do("GET", path, nil)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
	return resp.StatusCode
}

// simpleRows is the input of rows rows of simple: INPUT0 row r is
// 16r..16r+15, INPUT1 is 3 everywhere but -7 at column 5.
func simpleRows(rows int) (in0, in1 []int32) {
	for i := range 16 * rows {
		in0 = append(in0, int32(i))
		in1 = append(in1, 3)
		if i%16 == 5 {
			in1[i] = -7
		}
	}
	return in0, in1
}

// sumDiff checks simple's answer to simpleRows(rows).
func sumDiff(rows int, out0, out1 []int32) error {
	in0, in1 := simpleRows(rows)
	for i := range in0 {
		if i >= len(out0) || i >= len(out1) || out0[i] != in0[i]+in1[i] || out1[i] != in0[i]-in1[i] {
			return fmt.Errorf("got OUTPUT0 %v OUTPUT1 %v, want the sum and difference of %v and %v", out0, out1, in0, in1)
		}
	}
	if len(out0) != len(in0) || len(out1) != len(in1) {
		return fmt.Errorf("got %d and %d values, want %d", len(out0), len(out1), len(in0))
	}
	return nil
}

// inferBody is an HTTP infer body of simpleRows(rows), as JSON data, or
// as the binary extension (the JSON header, then the raw tensors; its
// length is the second result) asking binary outputs.
func inferBody(rows int, binaryData bool) ([]byte, int) {
	in0, in1 := simpleRows(rows)
	input := func(name string, v []int32) map[string]any {
		in := map[string]any{"name": name, "datatype": "INT32", "shape": []int{rows, 16}}
		if binaryData {
			in["parameters"] = map[string]any{"binary_data_size": 4 * len(v)}
		} else {
			in["data"] = v
		}
		return in
	}
	req := map[string]any{"inputs": []any{input("INPUT0", in0), input("INPUT1", in1)}}
	if binaryData {
		req["outputs"] = []any{map[string]any{"name": "OUTPUT0", "parameters": map[string]any{"binary_data": true}},
			map[string]any{"name": "OUTPUT1", "parameters": map[string]any{"binary_data": true}}}
	}
	b, _ := json.Marshal(req)
	n := len(b)
	if binaryData {
		b = append(append(b, i32Bytes(in0)...), i32Bytes(in1)...)
	}
	return b, n
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func i32s(b []byte) []int32 {
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// inferAnswer is an HTTP infer answer.
type inferAnswer struct {
	ModelName    string `json:"model_name"`
	ModelVersion string `json:"model_version"`
	Outputs      []struct {
		Name       string         `json:"name"`
		Shape      []int          `json:"shape"`
		Data       []int32        `json:"data"`
		Parameters map[string]any `json:"parameters"`
	} `json:"outputs"`
}

// outputs reads OUTPUT0 and OUTPUT1 of an HTTP infer answer body, whose
// JSON is n bytes long (the rest binary outputs, in order) or all of it
// when n is 0.
func outputs(body []byte, n int) (out0, out1 []int32, err error) {
	if n == 0 {
		n = len(body)
	}
	var a inferAnswer
	if err := json.Unmarshal(body[:n], &a); err != nil {
		return nil, nil, fmt.Errorf("%v in %.200s", err, body)
	}
	raw := body[n:]
	got := map[string][]int32{}
	for _, o := range a.Outputs {
		got[o.Name] = o.Data
		if size, ok := o.Parameters["binary_data_size"].(float64); ok && int(size) <= len(raw) {
			got[o.Name], raw = i32s(raw[:int(size)]), raw[int(size):]
		}
	}
	return got["OUTPUT0"], got["OUTPUT1"], nil
}

// httpInfer sends simpleRows(rows) to model over HTTP (binaryData: the
// binary extension), with header, and checks the answer.
func (e *tritonE2E) httpInfer(model string, rows int, binaryData bool, header ...string) error {
	e.t.Helper()
	body, n := inferBody(rows, binaryData)
	if binaryData {
		header = append(header, "Inference-Header-Content-Length", fmt.Sprint(n))
	}
	resp, b := e.do("POST", "/v2/models/"+model+"/infer", body, header...)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, b)
	}
	n = 0 // the answer's JSON length, if it has binary outputs
	_, _ = fmt.Sscan(resp.Header.Get("Inference-Header-Content-Length"), &n)
	out0, out1, err := outputs(b, n)
	if err != nil {
		return err
	}
	return sumDiff(rows, out0, out1)
}

// grpcRequest is simpleRows(rows) for model as a gRPC request.
func grpcRequest(model, id string, rows int) *kservepb.ModelInferRequest {
	in0, in1 := simpleRows(rows)
	input := func(name string, v []int32) *kservepb.ModelInferRequest_InferInputTensor {
		return &kservepb.ModelInferRequest_InferInputTensor{Name: name, Datatype: "INT32", Shape: []int64{int64(rows), 16},
			Contents: &kservepb.InferTensorContents{IntContents: v}}
	}
	return &kservepb.ModelInferRequest{ModelName: model, Id: id,
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{input("INPUT0", in0), input("INPUT1", in1)}}
}

// grpcOutputs checks a gRPC answer to simpleRows(rows), raw or typed.
func grpcOutputs(resp *kservepb.ModelInferResponse, rows int) error {
	got := map[string][]int32{}
	for i, o := range resp.GetOutputs() {
		got[o.Name] = o.GetContents().GetIntContents()
		if i < len(resp.RawOutputContents) {
			got[o.Name] = i32s(resp.RawOutputContents[i])
		}
	}
	return sumDiff(rows, got["OUTPUT0"], got["OUTPUT1"])
}

// grpcInfer sends simpleRows(rows) to model over gRPC and checks the answer.
func (e *tritonE2E) grpcInfer(model string, rows int, opts ...grpc.CallOption) error {
	resp, err := e.g.ModelInfer(e.ctx, grpcRequest(model, "", rows), opts...)
	if err != nil {
		return err
	}
	return grpcOutputs(resp, rows)
}

// statsView is what the test reads of one model's statistics.
type statsView struct {
	Version        string `json:"version"`
	InferenceCount int64  `json:"inference_count"`
	ExecutionCount int64  `json:"execution_count"`
	InferenceStats struct {
		Success struct {
			Count int64 `json:"count"`
		} `json:"success"`
	} `json:"inference_stats"`
}

func (s statsView) String() string {
	return fmt.Sprintf("v%s inference_count %d execution_count %d success %d", s.Version, s.InferenceCount, s.ExecutionCount, s.InferenceStats.Success.Count)
}

// stats reads model's statistics over HTTP and over gRPC.
func (e *tritonE2E) stats(model string) (h, g statsView) {
	e.t.Helper()
	var doc struct {
		ModelStats []statsView `json:"model_stats"`
	}
	if st := e.getJSON("/v2/models/"+model+"/stats", &doc); st != 200 || len(doc.ModelStats) != 1 {
		e.t.Fatalf("GET /v2/models/%s/stats: got %d %+v, want one model", model, st, doc)
	}
	r, err := e.g.ModelStatistics(e.ctx, &kservepb.ModelStatisticsRequest{Name: model})
	if err != nil || len(r.ModelStats) != 1 {
		e.t.Fatalf("ModelStatistics %s: got %v %v, want one model", model, r, err)
	}
	m := r.ModelStats[0]
	g.Version, g.InferenceCount, g.ExecutionCount = m.Version, int64(m.InferenceCount), int64(m.ExecutionCount)
	g.InferenceStats.Success.Count = int64(m.GetInferenceStats().GetSuccess().GetCount())
	return doc.ModelStats[0], g
}

// startTriton starts a node on a repository of tritonRepo's models (and
// startRepoNode's add), modelControl explicit, with both doors.
func startTriton(t *testing.T) *tritonE2E {
	repo := t.TempDir()
	tritonRepo(t, repo)
	return startTritonOn(t, startRepoNode(t, repo, "modelControl: explicit\n", true))
}

// startTritonOn is the client of the node startRepoNode started on ports.
func startTritonOn(t *testing.T, ports []int) *tritonE2E {
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ports[2]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &tritonE2E{t: t, ctx: t.Context(), base: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		g: kservepb.NewGRPCInferenceServiceClient(cc), nats: fmt.Sprintf("nats://127.0.0.1:%d", ports[0])}
}

// TestTritonDropIn is the end-to-end check of issue 22: a repository of
// Triton's example model "simple" (config.pbtxt and model.onnx as
// published, and two variants), served by the node as `start` wires it,
// answers Triton's HTTP and gRPC protocols alike, row by row;
// `go test -run TestTritonDropIn -v` prints the table.
func TestTritonDropIn(t *testing.T) {
	e := startTriton(t)
	row := func(t *testing.T, name, h, g string) { t.Helper(); t.Logf("%-16s | %s | %s", name, h, g) }
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *tritonE2E) (h, g string)
	}{
		{"health", tritonHealth},
		{"extensions", tritonExtensions},
		{"ready unknown", tritonReadyUnknown},
		{"config", tritonConfig},
		{"infer", tritonInfer},
		{"statistics", tritonStatistics},
		{"stream", tritonStream},
		{"compression", tritonCompression},
		{"shared memory", tritonSHM},
		{"batching", tritonBatching},
		{"repository", tritonRepository},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			e := *e
			e.t = t
			h, g := tc.run(t, &e)
			row(t, tc.name, h, g)
		})
	}
}

func tritonHealth(t *testing.T, e *tritonE2E) (h, g string) {
	var live, ready map[string]bool
	stl, str := e.getJSON("/v2/health/live", &live), e.getJSON("/v2/health/ready", &ready)
	if stl != 200 || !live["live"] || len(live) != 1 || str != 200 || !ready["ready"] {
		t.Errorf("health: got live %d %v, ready %d %v, want 200 {\"live\":true} and 200 {\"ready\":true}", stl, live, str, ready)
	}
	gl, err1 := e.g.ServerLive(e.ctx, &kservepb.ServerLiveRequest{})
	gr, err2 := e.g.ServerReady(e.ctx, &kservepb.ServerReadyRequest{})
	if err1 != nil || err2 != nil || !gl.Live || !gr.Ready {
		t.Errorf("gRPC health: got %v %v, %v %v, want live and ready", gl, err1, gr, err2)
	}
	return fmt.Sprintf("live %d %v, ready %d %v", stl, live, str, ready),
		fmt.Sprintf("ServerLive %v, ServerReady %v", gl.GetLive(), gr.GetReady())
}

func tritonExtensions(t *testing.T, e *tritonE2E) (h, g string) {
	var md struct {
		Extensions []string `json:"extensions"`
	}
	st := e.getJSON("/v2", &md)
	gmd, err := e.g.ServerMetadata(e.ctx, &kservepb.ServerMetadataRequest{})
	if st != 200 || err != nil || !slices.Equal(md.Extensions, gmd.GetExtensions()) {
		t.Errorf("extensions: HTTP %d %v, gRPC %v %v, want the same list", st, md.Extensions, gmd.GetExtensions(), err)
	}
	for _, x := range []string{"model_repository", "model_configuration", "statistics", "system_shared_memory", "binary_tensor_data"} {
		if !slices.Contains(md.Extensions, x) {
			t.Errorf("extensions %v: %s missing", md.Extensions, x)
		}
	}
	return fmt.Sprint(md.Extensions), fmt.Sprint(gmd.GetExtensions())
}

func tritonReadyUnknown(t *testing.T, e *tritonE2E) (h, g string) {
	resp, _ := e.do("GET", "/v2/models/nope/ready", nil)
	r, err := e.g.ModelReady(e.ctx, &kservepb.ModelReadyRequest{Name: "nope"})
	if resp.StatusCode != http.StatusNotFound || err != nil || r.Ready {
		t.Errorf("ready of an unknown model: HTTP %d, gRPC %v %v, want 404 and ready false", resp.StatusCode, r, err)
	}
	return fmt.Sprintf("GET /v2/models/nope/ready %d", resp.StatusCode), fmt.Sprintf("ModelReady ready=%v", r.GetReady())
}

// configView is what the test reads of a model's configuration.
type configView struct {
	MaxBatchSize int `json:"max_batch_size"`
	Input        []struct {
		Dims []int64 `json:"dims"`
	} `json:"input"`
	DynamicBatching *struct {
		MaxQueueDelayMicroseconds int64 `json:"max_queue_delay_microseconds"`
	} `json:"dynamic_batching"`
}

func (c configView) String() string {
	s := fmt.Sprintf("max_batch_size %d", c.MaxBatchSize)
	if len(c.Input) > 0 {
		s += fmt.Sprintf(" dims %v", c.Input[0].Dims)
	}
	if c.DynamicBatching != nil {
		s += fmt.Sprintf(" delay %dus", c.DynamicBatching.MaxQueueDelayMicroseconds)
	}
	return s
}

func tritonConfig(t *testing.T, e *tritonE2E) (h, g string) {
	for _, want := range []struct {
		model string
		batch int
		dims  []int64
		delay int64 // 0: no dynamic_batching
	}{{"simple", 8, []int64{16}, 0}, {"simple_nobatch", 0, []int64{-1, 16}, 0}, {"simple_dyna", 8, []int64{16}, 2000}} {
		var raw map[string]any
		var hc configView
		resp, b := e.do("GET", "/v2/models/"+want.model+"/config", nil)
		if resp.StatusCode != 200 || json.Unmarshal(b, &raw) != nil || json.Unmarshal(b, &hc) != nil {
			t.Fatalf("config of %s: got %d %s", want.model, resp.StatusCode, b)
		}
		_, isNumber := raw["max_batch_size"].(float64)
		r, err := e.g.ModelConfig(e.ctx, &kservepb.ModelConfigRequest{Name: want.model})
		if err != nil {
			t.Fatalf("ModelConfig %s: %v", want.model, err)
		}
		var gc configView // the gRPC answer, in Triton's JSON shape
		if b, err := kservepb.JSON(r.Config); err != nil || json.Unmarshal(b, &gc) != nil {
			t.Fatalf("ModelConfig %s: %v in %s", want.model, err, b)
		}
		for _, c := range []configView{hc, gc} {
			delay := int64(0)
			if c.DynamicBatching != nil {
				delay = c.DynamicBatching.MaxQueueDelayMicroseconds
			}
			if !isNumber || c.MaxBatchSize != want.batch || len(c.Input) != 2 || !slices.Equal(c.Input[0].Dims, want.dims) ||
				delay != want.delay || (want.delay != 0) != (c.DynamicBatching != nil) {
				t.Errorf("config of %s: got %v (max_batch_size a JSON number: %v), want %+v", want.model, c, isNumber, want)
			}
		}
		h += fmt.Sprintf("%s: %v; ", want.model, hc)
		g += fmt.Sprintf("%s: %v; ", want.model, gc)
	}
	return h, g
}

func tritonInfer(t *testing.T, e *tritonE2E) (h, g string) {
	for _, binaryData := range []bool{false, true} {
		if err := e.httpInfer("simple", 2, binaryData); err != nil {
			t.Errorf("HTTP infer (binary %v): %v", binaryData, err)
		}
	}
	if err := e.grpcInfer("simple", 2); err != nil {
		t.Errorf("gRPC ModelInfer: %v", err)
	}
	if err := e.grpcInfer("simple_nobatch", 3); err != nil {
		t.Errorf("gRPC ModelInfer simple_nobatch: %v", err)
	}
	return "JSON and binary: sum and difference", "ModelInfer: sum and difference"
}

func tritonStatistics(t *testing.T, e *tritonE2E) (h, g string) {
	h0, g0 := e.stats("simple")
	// 5 requests, 11 rows: HTTP 1+2 rows, binary 3, gRPC 1+4.
	for _, err := range []error{e.httpInfer("simple", 1, false), e.httpInfer("simple", 2, false), e.httpInfer("simple", 3, true),
		e.grpcInfer("simple", 1), e.grpcInfer("simple", 4)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	h1, g1 := e.stats("simple")
	for _, d := range [][2]statsView{{h0, h1}, {g0, g1}} {
		if d[1].InferenceCount-d[0].InferenceCount != 11 || d[1].InferenceStats.Success.Count-d[0].InferenceStats.Success.Count != 5 ||
			d[1].ExecutionCount <= d[0].ExecutionCount || d[1].Version != "1" {
			t.Errorf("statistics of simple: before %v, after %v, want 11 more inferences, 5 more successes, more executions, version 1", d[0], d[1])
		}
	}
	delta := func(a, b statsView) string {
		return fmt.Sprintf("v%s +%d inference_count, +%d success, +%d execution_count", b.Version, b.InferenceCount-a.InferenceCount,
			b.InferenceStats.Success.Count-a.InferenceStats.Success.Count, b.ExecutionCount-a.ExecutionCount)
	}
	return "5 requests, 11 rows: " + delta(h0, h1), delta(g0, g1)
}

func tritonStream(t *testing.T, e *tritonE2E) (h, g string) {
	s, err := e.g.ModelStreamInfer(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n, bad = 10, 6
	for i := range n {
		req := grpcRequest("simple", fmt.Sprintf("req-%d", i), 1+i%3)
		if i == bad {
			req.Inputs[1].Name = "NOPE"
		}
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	seen, errs := map[string]bool{}, ""
	for {
		r, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stream after %d answers: %v", len(seen), err)
		}
		id := r.GetInferResponse().GetId()
		var i int
		if _, err := fmt.Sscanf(id, "req-%d", &i); err != nil || seen[id] {
			t.Errorf("answer with id %q: unknown or twice", id)
			continue
		}
		seen[id] = true
		switch {
		case i == bad && !strings.Contains(r.ErrorMessage, "NOPE"):
			t.Errorf("answer %s: got error %q, want one naming input NOPE", id, r.ErrorMessage)
		case i == bad:
			errs = r.ErrorMessage
		case r.ErrorMessage != "":
			t.Errorf("answer %s: %s", id, r.ErrorMessage)
		default:
			if err := grpcOutputs(r.InferResponse, 1+i%3); err != nil {
				t.Errorf("answer %s: %v", id, err)
			}
		}
	}
	if len(seen) != n {
		t.Errorf("got %d answers %v, want %d", len(seen), seen, n)
	}
	return "(gRPC only, as in Triton)", fmt.Sprintf("%d requests, %d answers with their ids, req-%d in band: %q", n, len(seen), bad, errs)
}

// compress is b in coding gzip or deflate (zlib).
func compress(coding string, b []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser = zlib.NewWriter(&buf)
	if coding == "gzip" {
		w = gzip.NewWriter(&buf)
	}
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func tritonCompression(t *testing.T, e *tritonE2E) (h, g string) {
	body, _ := inferBody(8, false)
	_, plain := e.do("POST", "/v2/models/simple/infer", body)
	for _, coding := range []string{"gzip", "deflate"} {
		resp, b := e.do("POST", "/v2/models/simple/infer", compress(coding, body), "Content-Encoding", coding)
		if resp.StatusCode != 200 || !bytes.Equal(b, plain) {
			t.Errorf("Content-Encoding %s: got %d %.200s, want %.200s", coding, resp.StatusCode, b, plain)
		}
	}
	resp, b := e.do("POST", "/v2/models/simple/infer", body, "Accept-Encoding", "gzip")
	zr, err := gzip.NewReader(bytes.NewReader(b))
	var unzipped []byte
	if err == nil {
		unzipped, err = io.ReadAll(zr)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || err != nil || !bytes.Equal(unzipped, plain) {
		t.Errorf("Accept-Encoding gzip: got %d %q (%v), want the plain answer gzipped", resp.StatusCode, resp.Header.Get("Content-Encoding"), err)
	}
	for _, c := range []string{"gzip", "deflate"} {
		if err := e.grpcInfer("simple", 8, grpc.UseCompressor(c)); err != nil {
			t.Errorf("gRPC with compressor %s: %v", c, err)
		}
	}
	return fmt.Sprintf("gzip, deflate in = plain; Accept-Encoding gzip: %d of %d bytes", len(b), len(plain)),
		"UseCompressor gzip, deflate: sum and difference"
}

// shmParams are the parameters that put a tensor of simple's 2 rows at
// offset of region.
func shmParams(region string, offset int) map[string]*kservepb.InferParameter {
	return map[string]*kservepb.InferParameter{
		door.ParamSHMRegion:   {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: region}},
		door.ParamSHMOffset:   {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: int64(offset)}},
		door.ParamSHMByteSize: {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 128}},
	}
}

func tritonSHM(t *testing.T, e *tritonE2E) (h, g string) {
	probe, err := os.CreateTemp(door.SHMDir, "cs-e2e-probe-*")
	if err != nil {
		t.Skipf("%s is not writable (%v): system shared memory needs it", door.SHMDir, err)
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name())
	key, path := doortest.SHMFile(t, 512) // INPUT0, INPUT1, OUTPUT0, OUTPUT1: 2 rows each
	in0, in1 := simpleRows(2)
	if err := os.WriteFile(path, append(append(i32Bytes(in0), i32Bytes(in1)...), make([]byte, 256)...), 0o600); err != nil {
		t.Fatal(err)
	}
	in, out := "e2e-in-"+key[1:], "e2e-out-"+key[1:] // unique in the process's registry
	for _, r := range []struct {
		name   string
		offset int
	}{{in, 0}, {out, 256}} {
		b := fmt.Sprintf(`{"key":%q,"offset":%d,"byte_size":256}`, key, r.offset)
		if resp, body := e.do("POST", "/v2/systemsharedmemory/region/"+r.name+"/register", []byte(b)); resp.StatusCode != 200 {
			t.Fatalf("register %s: got %d %s", r.name, resp.StatusCode, body)
		}
	}
	readOut := func(via string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil || sumDiff(2, i32s(b[256:384]), i32s(b[384:])) != nil {
			t.Errorf("outputs in region %s after %s: got %v %v (%v)", out, via, i32s(b[256:384]), i32s(b[384:]), err)
		}
		clear(b[256:])
		_ = os.WriteFile(path, b, 0o600)
	}
	p := func(region string, offset int) string {
		return fmt.Sprintf(`"parameters":{"shared_memory_region":%q,"shared_memory_offset":%d,"shared_memory_byte_size":128}`, region, offset)
	}
	body := fmt.Sprintf(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2,16],%s},{"name":"INPUT1","datatype":"INT32","shape":[2,16],%s}],`+
		`"outputs":[{"name":"OUTPUT0",%s},{"name":"OUTPUT1",%s}]}`, p(in, 0), p(in, 128), p(out, 0), p(out, 128))
	resp, b := e.do("POST", "/v2/models/simple/infer", []byte(body))
	if resp.StatusCode != 200 || bytes.Contains(b, []byte(`"data"`)) {
		t.Errorf("HTTP infer through regions: got %d %s", resp.StatusCode, b)
	}
	readOut("HTTP")
	req := grpcRequest("simple", "", 2)
	for i, x := range req.Inputs {
		x.Contents, x.Parameters = nil, shmParams(in, 128*i)
	}
	req.Outputs = []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams(out, 0)}, {Name: "OUTPUT1", Parameters: shmParams(out, 128)}}
	if _, err := e.g.ModelInfer(e.ctx, req); err != nil {
		t.Errorf("gRPC infer through regions: %v", err)
	}
	readOut("gRPC")
	for _, r := range []string{in, out} {
		if resp, body := e.do("POST", "/v2/systemsharedmemory/region/"+r+"/unregister", nil); resp.StatusCode != 200 {
			t.Errorf("unregister %s: got %d %s", r, resp.StatusCode, body)
		}
	}
	resp, b = e.do("POST", "/v2/models/simple/infer", []byte(body))
	if _, err := e.g.ModelInfer(e.ctx, req); resp.StatusCode != 400 || err == nil {
		t.Errorf("infer through unregistered regions: got HTTP %d %s, gRPC %v, want 400 and an error", resp.StatusCode, b, err)
	}
	return "register, in+out 2 rows, unregister: 200", "in+out 2 rows through the HTTP-registered regions"
}

// tritonBatching: simple_dyna's workers say they batch with Triton's
// delay, simple's and simple_nobatch's that they run each request alone;
// simple_nobatch runs exactly one execution a request; simple_dyna, 16
// concurrent requests at a time, forms a batch of more than one within
// 5 rounds (each request is held 2 ms for others).
func tritonBatching(t *testing.T, e *tritonE2E) (h, g string) {
	reasons := workerReasons(t, e.nats)
	for model, want := range map[string]string{
		"simple_dyna":    "dynamic_batching, max_batch_size 8, max_queue_delay 2ms",
		"simple":         "max_batch_size 8 without dynamic_batching",
		"simple_nobatch": "max_batch_size 0",
	} {
		if !strings.Contains(reasons[model], want) {
			t.Errorf("worker of %s: batching reason %q, want %q in it", model, reasons[model], want)
		}
	}
	_, n0 := e.stats("simple_nobatch")
	concurrently(t, 16, func() error { return e.httpInfer("simple_nobatch", 1, false) })
	if _, n1 := e.stats("simple_nobatch"); n1.ExecutionCount-n0.ExecutionCount != 16 || n1.InferenceCount-n0.InferenceCount != 16 {
		t.Errorf("simple_nobatch after 16 concurrent requests: before %v, after %v, want 16 more executions", n0, n1)
	}
	sent, d0 := 0, statsView{}
	_, d0 = e.stats("simple_dyna")
	d1 := d0
	for round := 0; round < 5 && d1.ExecutionCount-d0.ExecutionCount == int64(sent); round++ {
		concurrently(t, 16, func() error { return e.httpInfer("simple_dyna", 1, false) })
		sent += 16
		_, d1 = e.stats("simple_dyna")
	}
	if execs := d1.ExecutionCount - d0.ExecutionCount; execs >= int64(sent) || d1.InferenceCount-d0.InferenceCount != int64(sent) {
		t.Errorf("simple_dyna after %d concurrent requests: %d executions, %d inferences, want a batch of more than one", sent, execs, d1.InferenceCount-d0.InferenceCount)
	}
	return fmt.Sprintf("simple_dyna %d requests in %d executions; simple_nobatch 16 in 16", sent, d1.ExecutionCount-d0.ExecutionCount),
		fmt.Sprintf("reason %q", reasons["simple_dyna"])
}

// workerReasons is each model's worker's batching reason (worker
// discovery, as `status` shows it).
func workerReasons(t *testing.T, url string) map[string]string {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ws, err := mesh.DiscoverWorkers(t.Context(), nc, mesh.StatsWait)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, w := range ws {
		out[w.Model] = w.BatchReason
	}
	return out
}

// concurrently runs f n times at once and fails t on an error.
func concurrently(t *testing.T, n int, f func() error) {
	t.Helper()
	errs := make(chan error, n)
	for range n {
		go func() { errs <- f() }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func tritonRepository(t *testing.T, e *tritonE2E) (h, g string) {
	resp, b := e.do("POST", "/v2/repository/index", nil)
	for _, m := range []string{"simple", "simple_nobatch", "simple_dyna"} {
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`{"name":"`+m+`","version":"1","state":"READY"}`)) {
			t.Errorf("index: got %d %s, want %s READY", resp.StatusCode, b, m)
		}
	}
	if _, err := e.g.RepositoryModelUnload(e.ctx, &kservepb.RepositoryModelUnloadRequest{ModelName: "simple_nobatch"}); err != nil {
		t.Fatalf("RepositoryModelUnload simple_nobatch: %v", err)
	}
	ready, _ := e.do("GET", "/v2/models/simple_nobatch/ready", nil)
	gr, err := e.g.ModelReady(e.ctx, &kservepb.ModelReadyRequest{Name: "simple_nobatch"})
	if ready.StatusCode != 404 || err != nil || gr.Ready {
		t.Errorf("simple_nobatch after unload: HTTP ready %d, gRPC %v %v, want 404 and not ready", ready.StatusCode, gr, err)
	}
	_, after := e.do("POST", "/v2/repository/index", nil)
	if load, body := e.do("POST", "/v2/repository/models/simple_nobatch/load", nil); load.StatusCode != 200 {
		t.Fatalf("load simple_nobatch: got %d %s", load.StatusCode, body)
	}
	reloaded, _ := e.do("GET", "/v2/models/simple_nobatch/ready", nil)
	back, err := e.g.ModelReady(e.ctx, &kservepb.ModelReadyRequest{Name: "simple_nobatch"})
	if reloaded.StatusCode != 200 || err != nil || !back.Ready {
		t.Errorf("simple_nobatch after load: HTTP ready %d, gRPC %v %v, want 200 and ready", reloaded.StatusCode, back, err)
	}
	if err := e.grpcInfer("simple_nobatch", 2); err != nil {
		t.Errorf("simple_nobatch after load: %v", err)
	}
	unavailable := bytes.Contains(after, []byte(`"name":"simple_nobatch","version":"1","state":"UNAVAILABLE"`))
	if !unavailable {
		t.Errorf("index after unload: %s, want simple_nobatch UNAVAILABLE", after)
	}
	return fmt.Sprintf("index 3 READY; after unload ready %d, UNAVAILABLE %v; load 200, ready %d", ready.StatusCode, unavailable, reloaded.StatusCode),
		fmt.Sprintf("RepositoryModelUnload ok, ModelReady %v; after load %v", gr.GetReady(), back.GetReady())
}
