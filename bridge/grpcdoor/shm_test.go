package grpcdoor_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

type param = kservepb.InferParameter

func strParam(s string) *param {
	return &param{ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: s}}
}

func intParam(n int64) *param {
	return &param{ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: n}}
}

// shmParams are the shared memory parameters of a tensor.
func shmParams(region string, offset, size int64) map[string]*param {
	return map[string]*param{door.ParamSHMRegion: strParam(region), door.ParamSHMOffset: intParam(offset), door.ParamSHMByteSize: intParam(size)}
}

// want2x1 is y = 2x + 1 (add_f32) of x = 1..8.
var want2x1 = []float32{3, 5, 7, 9, 11, 13, 15, 17}

// shmRequest asks add for y of x [2, 4] in region in.
func shmRequest(out map[string]*param) *kservepb.ModelInferRequest {
	req := &kservepb.ModelInferRequest{ModelName: "add",
		Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{2, 4}, Parameters: shmParams("in", 0, 32)}}}
	if out != nil {
		req.Outputs = []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: out}}
	}
	return req
}

func TestSHMInferGRPC(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{Config: door.Config{SharedMemory: door.NewSharedMemory()}}, served{name: "add", file: "add_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	inKey, inPath := doortest.SHMFile(t, 32)
	if err := os.WriteFile(inPath, doortest.F32Bytes(1, 2, 3, 4, 5, 6, 7, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	outKey, outPath := doortest.SHMFile(t, 64)
	for _, r := range []*kservepb.SystemSharedMemoryRegisterRequest{{Name: "in", Key: inKey, ByteSize: 32}, {Name: "out", Key: outKey, ByteSize: 64}} {
		if _, err := c.SystemSharedMemoryRegister(ctx, r); err != nil {
			t.Fatalf("register %s: %v", r.Name, err)
		}
	}
	st, err := c.SystemSharedMemoryStatus(ctx, &kservepb.SystemSharedMemoryStatusRequest{})
	if err != nil || len(st.Regions) != 2 || st.Regions["out"].GetByteSize() != 64 || st.Regions["in"].GetKey() != inKey {
		t.Fatalf("status: got %v %v", st, err)
	}

	// Input and output in regions.
	resp, err := c.ModelInfer(ctx, shmRequest(shmParams("out", 16, 48)))
	if err != nil || len(resp.Outputs) != 1 || len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 0 {
		t.Fatalf("infer: got %v %v, want one output with an empty raw_output_contents", resp, err)
	}
	p := resp.Outputs[0].Parameters
	if p[door.ParamSHMRegion].GetStringParam() != "out" || p[door.ParamSHMOffset].GetInt64Param() != 16 || p[door.ParamSHMByteSize].GetInt64Param() != 32 ||
		!slices.Equal(resp.Outputs[0].Shape, []int64{2, 4}) {
		t.Errorf("output: got %v, want shape [2 4] and the region's parameters", resp.Outputs[0])
	}
	file, _ := os.ReadFile(outPath)
	if got := doortest.F32s(file[16:48]); !slices.Equal(got, want2x1) {
		t.Errorf("region out at 16: got %v, want %v", got, want2x1)
	}

	// Input in a region, output raw in the answer.
	resp, err = c.ModelInfer(ctx, shmRequest(nil))
	if err != nil || len(resp.RawOutputContents) != 1 || !slices.Equal(doortest.F32s(resp.RawOutputContents[0]), want2x1) {
		t.Errorf("output in the answer: got %v %v", resp, err)
	}

	if _, err := c.SystemSharedMemoryUnregister(ctx, &kservepb.SystemSharedMemoryUnregisterRequest{Name: "in"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ModelInfer(ctx, shmRequest(nil)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "'in' is not registered") {
		t.Errorf("infer from an unregistered region: got %v", err)
	}
	if _, err := c.SystemSharedMemoryUnregister(ctx, &kservepb.SystemSharedMemoryUnregisterRequest{}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.SystemSharedMemoryStatus(ctx, &kservepb.SystemSharedMemoryStatusRequest{}); err != nil || len(st.Regions) != 0 {
		t.Errorf("status after unregister all: got %v %v", st, err)
	}
}

func TestSHMErrorsGRPC(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{Config: door.Config{SharedMemory: door.NewSharedMemory()}}, served{name: "add", file: "add_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	key, _ := doortest.SHMFile(t, 32)
	if _, err := c.SystemSharedMemoryRegister(ctx, &kservepb.SystemSharedMemoryRegisterRequest{Name: "in", Key: key, ByteSize: 32}); err != nil {
		t.Fatal(err)
	}
	withContents := shmRequest(nil)
	withContents.Inputs = append(withContents.Inputs, &inferInput{Name: "z", Datatype: "FP32", Shape: []int64{1}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1}}})
	intRegion := shmRequest(nil)
	intRegion.Inputs[0].Parameters[door.ParamSHMRegion] = intParam(3)
	extraRaw := shmRequest(nil)
	extraRaw.RawInputContents = [][]byte{{1, 2, 3, 4}}
	tests := []struct {
		name string
		call func() error
		code codes.Code
		want string
	}{
		{"unknown output region", func() error { _, err := c.ModelInfer(ctx, shmRequest(shmParams("nope", 0, 32))); return err }, codes.InvalidArgument, "'nope' is not registered"},
		{"output too large for its window", func() error { _, err := c.ModelInfer(ctx, shmRequest(shmParams("in", 0, 8))); return err }, codes.InvalidArgument,
			"output y: shared memory region 'in' at offset 0 needs 32 bytes, shared_memory_byte_size gives 8"},
		{"input past the region", func() error {
			req := shmRequest(nil)
			req.Inputs[0].Parameters = shmParams("in", 8, 32)
			_, err := c.ModelInfer(ctx, req)
			return err
		}, codes.InvalidArgument, "offset 8 needs 32 bytes, the region has 24 bytes past the offset"},
		{"typed contents beside a region", func() error { _, err := c.ModelInfer(ctx, withContents); return err }, codes.InvalidArgument, "input z: typed contents cannot go with shared memory"},
		{"region not a string", func() error { _, err := c.ModelInfer(ctx, intRegion); return err }, codes.InvalidArgument, "parameter shared_memory_region: want a string_param"},
		{"raw contents left over", func() error { _, err := c.ModelInfer(ctx, extraRaw); return err }, codes.InvalidArgument, "raw_input_contents has 1 entries, the inputs outside shared memory take 0"},
		{"double register", func() error {
			_, err := c.SystemSharedMemoryRegister(ctx, &kservepb.SystemSharedMemoryRegisterRequest{Name: "in", Key: key, ByteSize: 8})
			return err
		}, codes.InvalidArgument, "shared memory region 'in' already in manager"},
		{"escaping key", func() error {
			_, err := c.SystemSharedMemoryRegister(ctx, &kservepb.SystemSharedMemoryRegisterRequest{Name: "x", Key: "../etc/passwd", ByteSize: 8})
			return err
		}, codes.InvalidArgument, "invalid key"},
		{"status of unknown", func() error {
			_, err := c.SystemSharedMemoryStatus(ctx, &kservepb.SystemSharedMemoryStatusRequest{Name: "nope"})
			return err
		}, codes.NotFound, "Unable to find system shared memory region: 'nope'"},
		{"CUDA register", func() error {
			_, err := c.CudaSharedMemoryRegister(ctx, &kservepb.CudaSharedMemoryRegisterRequest{Name: "g", ByteSize: 8})
			return err
		}, codes.Unimplemented, "CUDA shared memory is not supported; use system shared memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.want) {
				t.Errorf("got %v, want %v and %q", err, tt.code, tt.want)
			}
		})
	}
	// A client that clears both kinds of region, as perf_analyzer does.
	if _, err := c.CudaSharedMemoryUnregister(ctx, &kservepb.CudaSharedMemoryUnregisterRequest{}); err != nil {
		t.Errorf("CUDA unregister all: %v", err)
	}
	if st, err := c.CudaSharedMemoryStatus(ctx, &kservepb.CudaSharedMemoryStatusRequest{}); err != nil || len(st.Regions) != 0 {
		t.Errorf("CUDA status: got %v %v, want no region", st, err)
	}
}

// A region may not make the request the door queues larger than a
// message may be.
func TestSHMBodyLimitGRPC(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{MaxRecvBytes: 1024, Config: door.Config{SharedMemory: door.NewSharedMemory()}}, served{name: "add", file: "add_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	key, _ := doortest.SHMFile(t, 4096)
	if _, err := c.SystemSharedMemoryRegister(ctx, &kservepb.SystemSharedMemoryRegisterRequest{Name: "in", Key: key, ByteSize: 4096}); err != nil {
		t.Fatal(err)
	}
	req := shmRequest(nil)
	req.Inputs[0].Shape, req.Inputs[0].Parameters = []int64{256, 4}, shmParams("in", 0, 4096)
	if _, err := c.ModelInfer(ctx, req); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "httpMaxBodyBytes") {
		t.Errorf("got %v, want ResourceExhausted naming httpMaxBodyBytes", err)
	}
}
