package infer_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestExecutionProviderCPU: "cpu" (and the default) load and answer.
func TestExecutionProviderCPU(t *testing.T) {
	for _, p := range []string{"", "cpu"} {
		e := newEngine(t, infer.Config{ModelPath: model("add_f32"), ExecutionProvider: p})
		out, err := e.Infer(context.Background(), [][]infer.Tensor{{{DType: infer.Float32, Shape: []int64{4}, Data: []float32{1, 2, 3, 4}}}})
		if err != nil {
			t.Fatalf("executionProvider %q: %v", p, err)
		}
		if got := out[0][0].Data.([]float32); !slices.Equal(got, []float32{3, 5, 7, 9}) {
			t.Errorf("executionProvider %q: got %v, want [3 5 7 9]", p, got)
		}
	}
	if _, err := infer.New(infer.Config{ModelPath: model("add_f32"), ExecutionProvider: "gpu"}); !errors.Is(err, infer.ErrConfigValidation) || !strings.Contains(err.Error(), "executionProvider") {
		t.Errorf("executionProvider gpu: got %v, want ErrConfigValidation naming executionProvider", err)
	}
}

// TestExecutionProviderMissing asks a library for a provider it lacks:
// the load fails naming the provider, the library and what it offers.
// With the CPU release of ONNX Runtime (`make ort`) that is every GPU
// provider.
func TestExecutionProviderMissing(t *testing.T) {
	lib := infertest.RequireLibrary(t)
	offers, err := infer.AvailableProviders()
	if err != nil {
		t.Fatal(err)
	}
	if offers[0] != "CPUExecutionProvider" {
		t.Errorf("AvailableProviders: got %v, want CPUExecutionProvider first", offers)
	}
	ortNames := map[string]string{"cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider", "openvino": "OpenVINOExecutionProvider"}
	tried := 0
	for _, p := range []string{"cuda", "tensorrt", "openvino"} {
		if slices.Contains(offers, ortNames[p]) {
			continue
		}
		tried++
		_, err := infer.New(infer.Config{ModelPath: model("add_f32"), ExecutionProvider: p})
		want := `executionProvider "` + p + `": this ONNX Runtime library (` + lib + `) offers ` + strings.Join(offers, ", ")
		if !errors.Is(err, infer.ErrExecutionProvider) || !strings.Contains(err.Error(), want) {
			t.Errorf("executionProvider %s: got %v, want ErrExecutionProvider saying %q", p, err, want)
		}
	}
	if tried == 0 {
		t.Skipf("the library %s offers every provider (%v): none to miss", lib, offers)
	}
}

// TestExecutionProviderCUDA runs a model on the GPU. It needs an NVIDIA
// GPU and ONNXRUNTIME_LIB pointing at a CUDA build of ONNX Runtime
// (onnxruntime-linux-x64-gpu-<ORTVersion>, with CUDA 12 and cuDNN 9 on the
// library path); without either it skips, saying which.
func TestExecutionProviderCUDA(t *testing.T) {
	if gpus, _ := filepath.Glob("/proc/driver/nvidia/gpus/*"); len(gpus) == 0 {
		t.Skip("no NVIDIA GPU on this machine (/proc/driver/nvidia/gpus is empty)")
	}
	lib := infertest.RequireLibrary(t)
	offers, err := infer.AvailableProviders()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(offers, "CUDAExecutionProvider") {
		t.Skipf("ONNXRUNTIME_LIB=%s offers %v, not CUDA: point it at onnxruntime-linux-x64-gpu-%s/lib/libonnxruntime.so.1 (CUDA 12, cuDNN 9 on LD_LIBRARY_PATH)",
			lib, offers, infer.ORTVersion)
	}
	x := make([]float32, 128)
	for i := range x {
		x[i] = float32(i)
	}
	e := newEngine(t, infer.Config{ModelPath: model("add_f32_128"), ExecutionProvider: "cuda"})
	out, err := e.Infer(context.Background(), [][]infer.Tensor{{{DType: infer.Float32, Shape: []int64{128}, Data: x}}})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0][0].Data.([]float32)
	for i, v := range got {
		if v != 2*x[i]+1 {
			t.Fatalf("y[%d]: got %v, want %v (y = 2x+1)", i, v, 2*x[i]+1)
		}
	}
}
