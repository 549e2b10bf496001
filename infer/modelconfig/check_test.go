package modelconfig_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
)

// TestCheck runs configs of Triton's simple example (INPUT0, INPUT1,
// OUTPUT0, OUTPUT1: INT32 [-1,16]) against its real graph.
func TestCheck(t *testing.T) {
	info := graphOf(t, filepath.Join(triton, "model_repository", "simple", "1", "model.onnx"))
	const io = `input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
	output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]`
	tests := []struct {
		name, text string
		err        error
		says       string
	}{
		{"ok", `max_batch_size: 8 ` + io, nil, ""},
		{"no batching", `max_batch_size: 0 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 3, 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1, 16 ] } ]
			output [ { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 3, 16 ] } ]`, nil, ""},
		{"pytorch", `platform: "pytorch_libtorch"`, modelconfig.ErrPlatform, "torch.onnx.export"},
		{"tensorflow", `platform: "tensorflow_savedmodel"`, modelconfig.ErrPlatform, "tf2onnx"},
		{"python backend", `backend: "python"`, modelconfig.ErrPlatform, `backend "python"`},
		{"negative batch", `max_batch_size: -1 ` + io, modelconfig.ErrInvalid, "max_batch_size: got -1"},
		{"data type", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
			modelconfig.ErrMismatch, "input[0].data_type: configuration expects datatype TYPE_FP32 for input 'INPUT0', model provides TYPE_INT32"},
		{"reshape fits", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4, 4 ] reshape { shape: [ 16 ] } }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`, nil, ""},
		{"reshape count", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4, 5 ] reshape { shape: [ 16 ] } }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
			modelconfig.ErrMismatch, "input[0].reshape.shape: [16] holds 16 elements, dims [4,5] hold 20"},
		{"reshape shape", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 4, 4 ] } }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
			modelconfig.ErrMismatch, "input[0].reshape.shape: model 'simple', tensor 'INPUT0'"},
		{"preferred", `max_batch_size: 8 dynamic_batching { preferred_batch_size: 16 } ` + io, modelconfig.ErrInvalid, "preferred_batch_size: 16"},
		{"accelerator", `max_batch_size: 8 optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "openvino" } ] } } ` + io,
			modelconfig.ErrInvalid, "unknown Execution Accelerator 'openvino'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			err = modelconfig.Check(modelconfig.Complete(cfg, "simple", info, 0), info)
			if !errors.Is(err, tc.err) || (tc.err != nil && !strings.Contains(err.Error(), tc.says)) {
				t.Errorf("got %v, want %v saying %q", err, tc.err, tc.says)
			}
		})
	}
}
