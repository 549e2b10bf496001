package httpdoor_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// A region registered over HTTP serves a gRPC request, as in Triton:
// both doors, built as cmd builds them (no SharedMemory set), share the
// process's registry.
func TestSHMAcrossDoors(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, err := grpcdoor.New(e.client, grpcdoor.Config{Config: door.Config{Addr: ln.Addr().String(),
		Models: []door.Model{{Name: "add", Job: "add"}}, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })

	inKey, inPath := doortest.SHMFile(t, 32)
	if err := os.WriteFile(inPath, doortest.F32Bytes(1, 2, 3, 4, 5, 6, 7, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	outKey, outPath := doortest.SHMFile(t, 32)
	in, out := "cross-in-"+inKey[1:], "cross-out-"+outKey[1:] // unique in the process's registry
	register(t, e, in, inKey, 0, 32, 200)
	register(t, e, out, outKey, 0, 32, 200)
	t.Cleanup(func() { door.DefaultSharedMemory.Unregister(in); door.DefaultSharedMemory.Unregister(out) })

	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	p := func(region string) map[string]*kservepb.InferParameter {
		return map[string]*kservepb.InferParameter{
			door.ParamSHMRegion:   {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: region}},
			door.ParamSHMByteSize: {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 32}},
		}
	}
	_, err = kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "add",
		Inputs:  []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{2, 4}, Parameters: p(in)}},
		Outputs: []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: p(out)}}})
	if err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(outPath)
	if got := doortest.F32s(file); !slices.Equal(got, want2x1) {
		t.Errorf("region %s after a gRPC request: got %v, want %v", out, got, want2x1)
	}
}
