package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
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

// TestGRPCModelRepository runs a serving node on a model repository
// (polling off) with its HTTP and gRPC doors, as `start` wires them: a
// model added and loaded after start serves over gRPC at once, and one
// not loaded or unloaded is NotFound saying why.
func TestGRPCModelRepository(t *testing.T) {
	requireORT(t)
	repo := t.TempDir()
	putRepoModel(t, repo, "add", "1")
	ports := freePorts(t, 3)
	file, err := serving.ParseFile(fmt.Appendf(nil, "modelRepository: %s\nmodelRepositoryPoll: -1\njobName: add\nqueueStorage: memory\n"+
		"natsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nhttpInterface: 127.0.0.1\nhttpPort: %d\ngrpcPort: %d\nthreadPerModel: 1\n",
		repo, ports[0], t.TempDir(), ports[1], ports[2]))
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
	httpDoor, err := httpRunner(deps)
	if err != nil {
		t.Fatal(err)
	}
	grpcDoor, err := grpcRunner(deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { _ = node.Run(ctx); done <- struct{}{} }()
	go func() { _ = httpDoor(ctx); done <- struct{}{} }()
	go func() { _ = grpcDoor(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; <-done; _ = node.Close() })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := node.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}

	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ports[2]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := kservepb.NewGRPCInferenceServiceClient(cc)
	control := func(path string) {
		t.Helper()
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d%s", ports[1], path), "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: got %d %s", path, resp.StatusCode, b)
		}
	}
	inferReq := func(model string) *kservepb.ModelInferRequest {
		return &kservepb.ModelInferRequest{ModelName: model, Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}
	}
	// notFound checks that every model RPC on model answers NotFound with want.
	notFound := func(model, want string) {
		t.Helper()
		_, e1 := c.ModelInfer(wctx, inferReq(model))
		_, e2 := c.ModelMetadata(wctx, &kservepb.ModelMetadataRequest{Name: model})
		_, e3 := c.ModelReady(wctx, &kservepb.ModelReadyRequest{Name: model})
		for _, err := range []error{e1, e2, e3} {
			if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), want) {
				t.Errorf("%s: got %v, want NotFound with %q", model, err, want)
			}
		}
	}

	putRepoModel(t, repo, "other", "2") // after start, polling off
	notFound("other", `model "other" is not loaded (unavailable: not loaded yet`)
	notFound("nope", `unknown model "nope"`)

	control("/v2/repository/models/other/load")
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

	control("/v2/repository/models/other/unload")
	notFound("other", `model "other" is not loaded (unavailable: unloaded`)
	if resp, err := c.ModelInfer(wctx, inferReq("add")); err != nil || resp.ModelVersion != "1" {
		t.Errorf("ModelInfer add: got %v %v, want version 1", resp, err)
	}
}
