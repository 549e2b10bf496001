package prepost_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// parse reads a config.pbtxt as the repository does.
func parse(tb testing.TB, pbtxt string) *kservepb.ModelConfig {
	tb.Helper()
	cfg, warnings, err := modelconfig.Parse([]byte(pbtxt))
	if err != nil || len(warnings) > 0 {
		tb.Fatalf("parse config: %v %v", err, warnings)
	}
	return cfg
}

// newStep returns the step of pbtxt, failing tb on an error.
func newStep(tb testing.TB, pbtxt string) *prepost.Step {
	tb.Helper()
	s, err := prepost.New(parse(tb, pbtxt))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return s
}

// param is a config.pbtxt parameter line.
func param(key, value string) string {
	return `parameters { key: "` + key + `" value: { string_value: "` + value + `" } }` + "\n"
}

const (
	imageHead = "name: \"pre\"\nbackend: \"cluster_serving\"\nmax_batch_size: 8\n" + `parameters { key: "step" value: { string_value: "image" } }` + "\n"
	topNHead  = "name: \"post\"\nbackend: \"cluster_serving\"\nmax_batch_size: 8\n" + `parameters { key: "step" value: { string_value: "topN" } }` + "\n"
)

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name, pbtxt, want string
	}{
		{"no step", "name: \"x\"\nbackend: \"cluster_serving\"\n", `parameters step: got "", want "image" or "topN"`},
		{"unknown step", "backend: \"cluster_serving\"\n" + param("step", "resize"), `parameters step: got "resize"`},
		{"other backend", "backend: \"onnxruntime\"\n", `backend: got "onnxruntime", want "cluster_serving"`},
		{"platform", imageHead + "platform: \"onnxruntime_onnx\"\n", `platform: got "onnxruntime_onnx"`},
		{"negative batch", strings.Replace(imageHead, "max_batch_size: 8", "max_batch_size: -1", 1), "max_batch_size: got -1"},
		{"misspelt key", imageHead + param("imageResise", "224,224"), "parameters imageResise: not a parameter of the image step"},
		{"topN key on image", imageHead + param("postProcessing", "topN(5)"), "parameters postProcessing: not a parameter of the image step"},
		{"image key on topN", topNHead + param("postProcessing", "topN(5)") + param("imageResize", "2,2"), "parameters imageResize: not a parameter of the topN step"},
		{"resize one number", imageHead + param("imageResize", "224"), `parameters imageResize: got "224", want "height,width"`},
		{"resize not numbers", imageHead + param("imageResize", "a,b"), `parameters imageResize: got "a,b"`},
		{"resize zero", imageHead + param("imageResize", "0,224"), "parameters imageResize: got 0,224, want two positive sizes"},
		{"layout", imageHead + param("imageLayout", "NCHW"), `parameters imageLayout: got "NCHW", want CHW or HWC`},
		{"channels", imageHead + param("imageChannels", "RGBA"), `parameters imageChannels: got "RGBA"`},
		{"scale", imageHead + param("imageScale", "-1"), "parameters imageScale: got -1"},
		{"mean two numbers", imageHead + param("imageMean", "1,2"), `parameters imageMean: got "1,2", want three numbers`},
		{"std negative", imageHead + param("imageStd", "1,-2,1"), "parameters imageStd: got [1 -2 1]"},
		{"max pixels", imageHead + param("imageMaxPixels", "40000000"), "parameters imageMaxPixels: got 40000000"},
		{"decodes", imageHead + param("imageDecodeConcurrency", "-1"), "parameters imageDecodeConcurrency: got -1"},
		{"budget", imageHead + param("imageMemoryBudget", "lots"), `parameters imageMemoryBudget: got "lots", want a number of bytes`},
		{"image input not string", imageHead + `input { name: "image" data_type: TYPE_FP32 dims: [1] }`, `input[0]: input "image": data_type: got TYPE_FP32, want TYPE_STRING`},
		{"image input two a row", imageHead + `input { name: "image" data_type: TYPE_STRING dims: [2] }`, `input[0]: input "image": dims: got [2], want [1]`},
		{"image input name", imageHead + `input { name: "INPUT0" data_type: TYPE_STRING dims: [1] }`, `input[0]: unexpected input "INPUT0", the step's inputs are: image`},
		{"image output dims", imageHead + `output { name: "tensor" data_type: TYPE_FP32 dims: [3, 224, 224] }`, `output[0]: output "tensor": dims: got [3 224 224], want [3 -1 -1]`},
		{"image output fp16", imageHead + `output { name: "tensor" data_type: TYPE_FP16 dims: [3, -1, -1] }`, `output[0]: output "tensor": data_type: got TYPE_FP16, want TYPE_FP32`},
		{"image reshape", imageHead + `output { name: "tensor" data_type: TYPE_FP32 dims: [3, -1, -1] reshape: { shape: [3, -1] } }`, "reshape: a cluster_serving step takes none"},
		{"topN missing", topNHead, `parameters postProcessing: required: "topN(n)"`},
		{"topN zero", topNHead + param("postProcessing", "topN(0)"), `parameters postProcessing: "topN(0)": n must be a positive integer`},
		{"pickTopN", topNHead + param("postProcessing", "pickTopN(2)"), `parameters postProcessing: got "pickTopN(2)", want "topN(n)"`},
		{"topN string input", topNHead + param("postProcessing", "topN(5)") + `input { name: "scores" data_type: TYPE_STRING dims: [10] }`, `input[0]: input "scores": data_type: got TYPE_STRING, want a number type`},
		{"topN output dims", topNHead + param("postProcessing", "topN(5)") + `output { name: "values" data_type: TYPE_FP32 dims: [5] }`, `output[0]: output "values": dims: got [5], want [-1]`},
		{"topN output twice", topNHead + param("postProcessing", "topN(5)") + `output { name: "text" data_type: TYPE_STRING dims: [1] } output { name: "text" data_type: TYPE_STRING dims: [1] }`, `output[1]: output "text" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := prepost.New(parse(t, tt.pbtxt))
			if !errors.Is(err, prepost.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an ErrConfig holding %q", err, tt.want)
			}
		})
	}
}

func TestIs(t *testing.T) {
	for _, tt := range []struct {
		pbtxt string
		want  bool
	}{
		{imageHead, true},
		{`backend: "onnxruntime"`, false},
		{`platform: "ensemble"`, false},
		{"", false},
	} {
		if got := prepost.Is(parse(t, tt.pbtxt)); got != tt.want {
			t.Errorf("Is(%q): got %v, want %v", tt.pbtxt, got, tt.want)
		}
	}
	if prepost.Is(nil) {
		t.Error("Is(nil): got true, want false")
	}
}

// ioString formats ios as "name dtype shape; ...".
func ioString(ios []infer.IO) string {
	var parts []string
	for _, io := range ios {
		parts = append(parts, io.Name+" "+io.DType.String()+" "+infer.ShapeString(io.Shape))
	}
	return strings.Join(parts, "; ")
}

func TestInfoAndConfig(t *testing.T) {
	tests := []struct {
		name, pbtxt     string
		ins, outs       string
		dynamic         bool
		configOutputs   []string // names the completed config lists
		configFirstDims []int64  // dims of the completed config's first output
	}{
		{"image default", imageHead, "image string [-1 1]", "tensor float32 [-1 3 -1 -1]", true,
			[]string{"tensor"}, []int64{3, -1, -1}},
		{"image resize HWC uint8", imageHead + param("imageResize", "224,200") + param("imageLayout", "HWC") +
			`output { name: "tensor" data_type: TYPE_UINT8 dims: [224, 200, 3] }`,
			"image string [-1 1]", "tensor uint8 [-1 224 200 3]", true, []string{"tensor"}, []int64{224, 200, 3}},
		{"image no batching", strings.Replace(imageHead, "max_batch_size: 8", "max_batch_size: 0", 1) + param("imageResize", "4,4"),
			"image string [-1]", "tensor float32 [-1 3 4 4]", false, []string{"tensor"}, []int64{-1, 3, 4, 4}},
		{"topN default", topNHead + param("postProcessing", "topN(5)"), "scores float32 [-1 -1]",
			"indices int64 [-1 -1]; values float32 [-1 -1]; text string [-1 1]", true,
			[]string{"indices", "values", "text"}, []int64{-1}},
		{"topN 1000 classes, two outputs", topNHead + param("postProcessing", "topN(5)") +
			`input { name: "scores" data_type: TYPE_FP16 dims: [1000] }` +
			`output { name: "values" data_type: TYPE_FP32 dims: [5] } output { name: "indices" data_type: TYPE_INT64 dims: [5] }`,
			"scores float16 [-1 1000]", "values float32 [-1 5]; indices int64 [-1 5]", true, []string{"values", "indices"}, []int64{5}},
		{"topN fewer scores than n", topNHead + param("postProcessing", "topN(5)") + `input { name: "scores" data_type: TYPE_FP32 dims: [3] }`,
			"scores float32 [-1 3]", "indices int64 [-1 3]; values float32 [-1 3]; text string [-1 1]", true,
			[]string{"indices", "values", "text"}, []int64{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStep(t, tt.pbtxt)
			info := s.Info()
			if got := ioString(info.Inputs); got != tt.ins {
				t.Errorf("inputs: got %q, want %q", got, tt.ins)
			}
			if got := ioString(info.Outputs); got != tt.outs {
				t.Errorf("outputs: got %q, want %q", got, tt.outs)
			}
			if info.DynamicBatch != tt.dynamic || info.Name == "" {
				t.Errorf("info: got name %q, dynamic batch %v; want a name, %v", info.Name, info.DynamicBatch, tt.dynamic)
			}
			cfg := s.Config()
			var names []string
			for _, o := range cfg.Output {
				names = append(names, o.Name)
			}
			if !slices.Equal(names, tt.configOutputs) || !slices.Equal(cfg.Output[0].Dims, tt.configFirstDims) || len(cfg.Input) != 1 {
				t.Errorf("config: got %d inputs, outputs %v, first dims %v; want 1 input, %v, %v",
					len(cfg.Input), names, cfg.Output[0].Dims, tt.configOutputs, tt.configFirstDims)
			}
			if cfg.Backend != prepost.Backend {
				t.Errorf("config backend: got %q, want %q", cfg.Backend, prepost.Backend)
			}
		})
	}
}

// The seed's image pipeline as a model repository declares its steps
// (docs: preprocess → an ONNX classifier → postprocess, top-5 out).
const (
	seedPreprocess = `name: "preprocess"
backend: "cluster_serving"
max_batch_size: 8
input [ { name: "image" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "tensor" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
parameters { key: "step" value: { string_value: "image" } }
parameters { key: "imageResize" value: { string_value: "224,224" } }
`
	seedPostprocess = `name: "postprocess"
backend: "cluster_serving"
max_batch_size: 8
input [ { name: "scores" data_type: TYPE_FP32 dims: [ 1000 ] } ]
output [
  { name: "indices" data_type: TYPE_INT64 dims: [ 5 ] },
  { name: "values" data_type: TYPE_FP32 dims: [ 5 ] },
  { name: "text" data_type: TYPE_STRING dims: [ 1 ] }
]
parameters { key: "step" value: { string_value: "topN" } }
parameters { key: "postProcessing" value: { string_value: "topN(5)" } }
`
)

func TestSeedConfigs(t *testing.T) {
	for _, tt := range []struct{ pbtxt, ins, outs string }{
		{seedPreprocess, "image string [-1 1]", "tensor float32 [-1 3 224 224]"},
		{seedPostprocess, "scores float32 [-1 1000]", "indices int64 [-1 5]; values float32 [-1 5]; text string [-1 1]"},
	} {
		info := newStep(t, tt.pbtxt).Info()
		if ins, outs := ioString(info.Inputs), ioString(info.Outputs); ins != tt.ins || outs != tt.outs {
			t.Errorf("%s: got %s -> %s, want %s -> %s", info.Name, ins, outs, tt.ins, tt.outs)
		}
	}
}

// f32 is a float32 tensor of shape holding v.
func f32(shape []int64, v ...float32) infer.Tensor {
	return infer.Tensor{DType: infer.Float32, Shape: shape, Data: v}
}
