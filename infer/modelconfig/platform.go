package modelconfig

import (
	"fmt"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// exportHints says, for another Triton platform or backend, how to get an
// ONNX model from it.
var exportHints = map[string]string{
	"tensorflow_graphdef":   "convert it with tf2onnx: python -m tf2onnx.convert --graphdef model.graphdef --inputs IN:0 --outputs OUT:0 --output model.onnx",
	"tensorflow_savedmodel": "convert it with tf2onnx: python -m tf2onnx.convert --saved-model model.savedmodel --output model.onnx",
	"tensorflow":            "convert it with tf2onnx: python -m tf2onnx.convert --saved-model DIR --output model.onnx",
	"pytorch_libtorch":      "export the PyTorch model with torch.onnx.export(model, example_input, \"model.onnx\")",
	"pytorch":               "export the PyTorch model with torch.onnx.export(model, example_input, \"model.onnx\")",
	"tensorrt_plan":         "a TensorRT plan does not convert back: export the source model to ONNX (torch.onnx.export, tf2onnx) and serve that; executionProvider tensorrt runs it with TensorRT",
	"tensorrt":              "a TensorRT plan does not convert back: export the source model to ONNX (torch.onnx.export, tf2onnx) and serve that; executionProvider tensorrt runs it with TensorRT",
	"openvino":              "export the source model to ONNX (torch.onnx.export, tf2onnx) and serve that; executionProvider openvino runs it with OpenVINO",
}

// otherHint is the hint for platforms exportHints does not name (python,
// ensemble, custom backends).
const otherHint = "export the model to ONNX (torch.onnx.export for PyTorch, tf2onnx for TensorFlow and Keras, the framework's ONNX exporter otherwise)"

// CheckPlatform accepts ONNX Runtime's platform and backend, or none;
// any other is an error wrapping ErrPlatform that says how to export the
// model to ONNX.
func CheckPlatform(cfg *kservepb.ModelConfig) error {
	p, b := cfg.Platform, cfg.Backend
	if (p == "" || p == Platform) && (b == "" || b == Backend) {
		return nil
	}
	field, value := "platform", p
	if p == "" || p == Platform {
		field, value = "backend", b
	}
	hint, ok := exportHints[value]
	if !ok {
		hint = otherHint
	}
	return fmt.Errorf("%w: %s %q: this server runs ONNX models only (platform %q, backend %q); %s",
		ErrPlatform, field, value, Platform, Backend, hint)
}
