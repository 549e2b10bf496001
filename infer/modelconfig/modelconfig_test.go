package modelconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// triton is the directory of Triton's own test cases (see its README).
const triton = "testdata/triton"

// graphOf loads model with the real ONNX Runtime and returns its graph.
func graphOf(t testing.TB, model string) infer.ModelInfo {
	t.Helper()
	return infertest.NewSession(t, model).Info()
}

// modelOf is a Triton case's model: its 1/model.onnx, or the stand-in
// for the cases whose model is not in Triton's tree.
func modelOf(dir string) string {
	switch filepath.Base(dir) {
	case "cpu_instance":
		return infertest.Model("identity_f16_3d")
	case "densenet_onnx":
		return infertest.Model("densenet_io")
	}
	return filepath.Join(dir, "1", "model.onnx")
}

func readCase(t *testing.T, dir string) *kservepb.ModelConfig {
	t.Helper()
	cfg, warnings, err := modelconfig.Read(dir)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Read(%s): warnings %q, err %v", dir, warnings, err)
	}
	return cfg
}

// TestTritonAutofillSuccess completes the configs of Triton's
// qa/L0_model_config/autofill_noplatform_success/onnx and compares them
// with the completed configs Triton gives (its `expected` files).
func TestTritonAutofillSuccess(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(triton, "autofill_noplatform_success", "onnx", "*"))
	if len(dirs) != 4 {
		t.Fatalf("got %d cases, want 4", len(dirs))
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			cfg := readCase(t, dir)
			info := graphOf(t, modelOf(dir))
			got := modelconfig.Complete(cfg, name, info, 0)
			b, err := os.ReadFile(filepath.Join(dir, "expected"))
			if err != nil {
				t.Fatal(err)
			}
			want, warnings, err := modelconfig.Parse(b)
			if err != nil || len(warnings) > 0 {
				t.Fatalf("parse expected: warnings %q, err %v", warnings, err)
			}
			if cfg == nil || len(cfg.InstanceGroup) == 0 {
				// Triton adds a group for the GPU its test machine had;
				// Complete adds none (the engine's parallelism applies).
				want.InstanceGroup = nil
			}
			for _, g := range want.InstanceGroup {
				g.Gpus = nil
			}
			sortIO(got)
			sortIO(want)
			if !proto.Equal(got, want) {
				t.Errorf("Complete: got\n%v\nwant\n%v", got, want)
			}
			if err := modelconfig.Check(got, info); err != nil {
				t.Errorf("Check(completed config): %v", err)
			}
		})
	}
}

// sortIO orders c's inputs and outputs by name: Triton's expected files
// come in every order the graph's may.
func sortIO(c *kservepb.ModelConfig) {
	slices.SortFunc(c.Input, func(a, b *kservepb.ModelInput) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(c.Output, func(a, b *kservepb.ModelOutput) int { return strings.Compare(a.Name, b.Name) })
}

// TestTritonAutofillRejected runs the configs Triton rejects
// (qa/L0_model_config/autofill_noplatform/onnx) through Complete and
// Check: each must fail naming what Triton's error names. Every fragment
// is asked of Triton's `expected` too, so that the table cannot drift from
// it.
func TestTritonAutofillRejected(t *testing.T) {
	tests := map[string][]string{
		"bad_input_dims":     {"'bad_input_dims'", "tensor 'INPUT0'", "the model expects 2 dimensions (shape [-1,16])", "making complete shape [-1,16,1]"},
		"bad_max_batch_size": {"autofill failed for model 'bad_max_batch_size': model does not support batching while non-zero max_batch_size is specified"},
		"bad_output_dims":    {"'bad_output_dims'", "tensor 'OUTPUT1'", "the model expects 2 dimensions (shape [-1,16])", "making complete shape [-1,1]"},
		"too_few_inputs":     {"configuration expects 1 inputs, model provides 2"},
		"too_many_inputs":    {"configuration expects 3 inputs, model provides 2"},
		"unknown_input":      {"unexpected inference input 'INPUT_UNKNOWN', allowed inputs are: INPUT0, INPUT1"},
		"unknown_output":     {"unexpected inference output 'OUTPUT_UNKNOWN', allowed outputs are: OUTPUT0, OUTPUT1"},
	}
	dirs, _ := filepath.Glob(filepath.Join(triton, "autofill_noplatform", "onnx", "*"))
	if len(dirs) != len(tests) {
		t.Fatalf("got %d cases, want %d", len(dirs), len(tests))
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, "expected"))
			if err != nil {
				t.Fatal(err)
			}
			expected := strings.ReplaceAll(string(b), `\`, "") // Triton's are regular expressions
			info := graphOf(t, modelOf(dir))
			err = modelconfig.Check(modelconfig.Complete(readCase(t, dir), name, info, 0), info)
			if !errors.Is(err, modelconfig.ErrMismatch) {
				t.Fatalf("Check: got %v, want an error wrapping ErrMismatch", err)
			}
			for _, frag := range tests[name] {
				if !strings.Contains(expected, frag) {
					t.Errorf("Triton's expected %q lacks %q", expected, frag)
				}
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("Check: got %q, want it to name %q", err, frag)
				}
			}
		})
	}
}

// TestTritonExamples reads Triton's example repository configs: simple
// with its own model, densenet_onnx (which reshapes its input and output)
// with a stand-in graph of the same inputs and outputs, served by an
// engine that takes the declared dims and answers them.
func TestTritonExamples(t *testing.T) {
	t.Run("simple", func(t *testing.T) {
		got, _ := example(t, "simple", 16)
		s := modelconfig.SettingsOf(got)
		if s.MaxBatch != 8 || s.Dynamic || len(got.Input) != 2 || got.Input[0].Dims[0] != 16 {
			t.Errorf("got max batch %d, dynamic %v, inputs %v; want 8, false, the config's", s.MaxBatch, s.Dynamic, got.Input)
		}
	})
	t.Run("densenet_onnx", func(t *testing.T) {
		got, dir := example(t, "densenet_onnx", 0)
		if got.MaxBatchSize != 0 || got.GetDynamicBatching() != nil {
			t.Errorf("got max_batch_size %d, dynamic_batching %v; want 0, none", got.MaxBatchSize, got.GetDynamicBatching())
		}
		s := modelconfig.SettingsOf(got)
		e := infertest.NewEngine(t, infer.Config{ModelPath: modelOf(dir), Reshape: s.EngineReshape()})
		served := e.Info()
		if !slices.Equal(served.Inputs[0].Shape, []int64{3, 224, 224}) || !slices.Equal(served.Outputs[0].Shape, []int64{1000}) {
			t.Errorf("engine shows %v -> %v, want [3 224 224] -> [1000]", served.Inputs[0].Shape, served.Outputs[0].Shape)
		}
		if err := modelconfig.Check(got, served); err != nil {
			t.Errorf("Check against the engine's info: %v", err)
		}
		in := infer.NewTensor(infer.Float32, []int64{3, 224, 224})
		for i := range in.Data.([]float32) {
			in.Data.([]float32)[i] = 0.5
		}
		outs, err := e.Infer(t.Context(), [][]infer.Tensor{{in}})
		if err != nil {
			t.Fatal(err)
		}
		out := outs[0][0]
		if !slices.Equal(out.Shape, []int64{1000}) || out.Data.([]float32)[999] != 0.5 {
			t.Errorf("got shape %v, [999] = %v; want [1000], 0.5", out.Shape, out.Data.([]float32)[999])
		}
	})
	t.Run("inception_onnx", func(t *testing.T) {
		s := modelconfig.SettingsOf(readCase(t, filepath.Join(triton, "model_repository", "inception_onnx")))
		want := map[string]infer.Reshape{
			"input:0":                           {Dims: []int64{299, 299, 3}, Shape: []int64{1, 299, 299, 3}},
			"InceptionV3/Predictions/Softmax:0": {Dims: []int64{1001}, Shape: []int64{1, 1001}},
		}
		if got := s.EngineReshape(); !equalReshapes(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

// example reads, completes and checks the config of Triton's example
// model name against its graph; dir is the model's directory.
func example(t *testing.T, name string, maxBatch int) (cfg *kservepb.ModelConfig, dir string) {
	t.Helper()
	dir = filepath.Join(triton, "model_repository", name)
	info := graphOf(t, modelOf(dir))
	cfg = modelconfig.Complete(readCase(t, dir), name, info, maxBatch)
	if err := modelconfig.Check(cfg, info); err != nil {
		t.Fatal(err)
	}
	return cfg, dir
}

func equalReshapes(a, b map[string]infer.Reshape) bool {
	if len(a) != len(b) {
		return false
	}
	for k, r := range a {
		if !slices.Equal(r.Dims, b[k].Dims) || !slices.Equal(r.Shape, b[k].Shape) {
			return false
		}
	}
	return true
}

func TestParseUnknownFields(t *testing.T) {
	const clean = `name: "m"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
`
	tests := []struct {
		name string
		text string
		want []string // one fragment per warning
	}{
		{"none", clean, nil},
		{"scalar at top", "colour: blue\n" + clean, []string{"unknown field colour ignored (line 1:1)"}},
		{"signs, extension, utf-8", "a: - 1 [x.y]: -inf\nb: 'é' c: 2\n" + clean, []string{
			"unknown field a ignored (line 1:1)", "unknown field [x.y] ignored (line 1:8)",
			"unknown field b ignored (line 2:1)", "unknown field c ignored (line 2:8)",
		}},
		{
			"nested, list, message, strings",
			`name: "m"
max_batch_size: 8 # ok
input [ { name: "x" data_type: TYPE_FP32 shape_hint: [1, 2] dims: [ 4 ] } ]
extra { a: "}" b: [ { c: 1 } ] }
dynamic_batching { max_queue_delay_microseconds: 100 preserve: 'it''s' }
tags: "a" "b";
`,
			[]string{
				"unknown field shape_hint ignored (line 3:42)",
				"unknown field extra ignored (line 4:1)",
				"unknown field preserve ignored (line 5:54)",
				"unknown field tags ignored (line 6:1)",
			},
		},
	}
	want, _, err := modelconfig.Parse([]byte(clean))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if len(warnings) != len(tc.want) {
				t.Fatalf("got warnings %q, want %d", warnings, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(warnings[i], "config.pbtxt: ") || !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d: got %q, want %q", i, warnings[i], w)
				}
			}
		})
	}
}

func TestParseSyntaxError(t *testing.T) {
	tests := []struct{ text, at string }{
		{"name: \"m\"\nmax_batch_size: \"eight\"\n", "config.pbtxt:2:17: "},
		{"input [ { name: \"x\" }\n", "config.pbtxt:2:1: "},
		{"instance_group { kind: KIND_TPU }", "config.pbtxt:1:24: "},
	}
	for _, tc := range tests {
		_, _, err := modelconfig.Parse([]byte(tc.text))
		if !errors.Is(err, modelconfig.ErrSyntax) || !strings.Contains(err.Error(), tc.at) {
			t.Errorf("Parse(%q): got %v, want ErrSyntax at %s", tc.text, err, tc.at)
		}
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	cfg, warnings, err := modelconfig.Read(dir)
	if cfg != nil || warnings != nil || err != nil {
		t.Errorf("no file: got %v, %v, %v; want nil, nil, nil", cfg, warnings, err)
	}
	path := filepath.Join(dir, modelconfig.FileName)
	if err := os.WriteFile(path, []byte("name: \"m\"\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err = modelconfig.Read(dir)
	if err != nil || cfg.GetName() != "m" || len(warnings) != 1 || !strings.HasPrefix(warnings[0], path+": unknown field bogus") {
		t.Errorf("got %v, %q, %v; want name m and one warning naming %s", cfg, warnings, err, path)
	}
	if err := os.WriteFile(path, []byte("name: m m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err = modelconfig.Read(dir); !errors.Is(err, modelconfig.ErrSyntax) || !strings.Contains(err.Error(), path+":1:") {
		t.Errorf("got %v, want ErrSyntax naming %s:1:", err, path)
	}
}

// FuzzParse feeds Parse, and what takes its result, any bytes: nothing
// may panic, and a config without error is a config.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(triton, "*", "*", "*", "*"))
	more, _ := filepath.Glob(filepath.Join(triton, "model_repository", "*", "config.pbtxt"))
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil && !strings.HasSuffix(p, ".onnx") && !slices.Contains([]string{"1", "LICENSE"}, filepath.Base(p)) {
			f.Add(b)
		}
	}
	f.Add([]byte("x { y: [ '\\'' , \"}\" ] # ]\n} z: <a: 1> input [{name: \"i\" q: 1}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, _, err := modelconfig.Parse(b)
		if err != nil {
			return
		}
		if cfg == nil {
			t.Fatal("nil config without error")
		}
		_ = modelconfig.SettingsOf(cfg)
		_, _ = modelconfig.Versions(cfg, []int64{1, 2, 3})
	})
}

// TestComplete covers the max_batch_size rules of Triton's
// AutoCompleteMaxBatch beyond its own tests, on the simple example's
// graph (dim 0 dynamic everywhere) and a graph without a batch dim.
func TestComplete(t *testing.T) {
	batching := graphOf(t, filepath.Join(triton, "model_repository", "simple", "1", "model.onnx"))
	fixed := graphOf(t, filepath.Join(triton, "autofill_noplatform_success", "onnx", "no_config_no_batch", "1", "model.onnx"))
	const io = `input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1, 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1, 16 ] } ]
	output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1, 16 ] } ]`
	tests := []struct {
		name, text string
		fixed      bool
		maxBatch   int
		wantMax    int32
		preferred  []int32 // nil: no dynamic_batching
		dims       []int64 // of the first input
	}{
		{"engine's batch size", ``, false, 16, 16, []int32{16}, []int64{16}},
		{"default", ``, false, 0, 4, []int32{4}, []int64{16}},
		{"batch of 1, no dynamic batching", ``, false, 1, 1, nil, []int64{16}},
		{"config's own", `max_batch_size: 2 dynamic_batching { max_queue_delay_microseconds: 5 }`, false, 16, 2, []int32{2}, []int64{16}},
		{"listed inputs and outputs: untouched", `max_batch_size: 0 ` + io, false, 16, 0, nil, []int64{-1, 16}},
		{"0 reads as unset while outputs are missing", `input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]`, false, 8, 8, []int32{8}, []int64{16}},
		{"no batch dim", ``, true, 16, 0, nil, []int64{16}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			info := batching
			if tc.fixed {
				info = fixed
			}
			got := modelconfig.Complete(cfg, "m", info, tc.maxBatch)
			var preferred []int32
			if db := got.GetDynamicBatching(); db != nil {
				preferred = db.PreferredBatchSize
			}
			if got.MaxBatchSize != tc.wantMax || !slices.Equal(preferred, tc.preferred) || (got.GetDynamicBatching() == nil) != (tc.preferred == nil) ||
				!slices.Equal(got.Input[0].Dims, tc.dims) {
				t.Errorf("got max_batch_size %d, dynamic_batching %v, dims %v; want %d, %v, %v", got.MaxBatchSize, got.GetDynamicBatching(), got.Input[0].Dims, tc.wantMax, tc.preferred, tc.dims)
			}
			if got.Name != "m" || got.Platform != modelconfig.Platform || got.Backend != modelconfig.Backend || got.GetVersionPolicy().GetLatest().GetNumVersions() != 1 {
				t.Errorf("got name %q, platform %q, backend %q, policy %v", got.Name, got.Platform, got.Backend, got.VersionPolicy)
			}
		})
	}
	cfg, _, _ := modelconfig.Parse([]byte(`max_batch_size: 3`))
	if got := modelconfig.Complete(cfg, "m", batching, 16); got == cfg || cfg.Name != "" || len(cfg.Input) != 0 || cfg.VersionPolicy != nil {
		t.Errorf("Complete changed or returned its argument: %v", cfg)
	}
}

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
		{"threads", `parameters { key: "intra_op_thread_count" value: { string_value: "many" } } ` + io, modelconfig.ErrInvalid, `intra_op_thread_count: got "many"`},
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

func TestSettingsOf(t *testing.T) {
	tests := []struct {
		name, text string
		want       modelconfig.Settings
	}{
		{"empty", ``, modelconfig.Settings{}},
		{
			"dynamic batching",
			`max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 2000 }`,
			modelconfig.Settings{MaxBatch: 8, Dynamic: true, Preferred: []int{4, 8}, MaxQueueDelay: 2 * time.Millisecond},
		},
		{
			"cpu groups, default count 2",
			`instance_group [ { kind: KIND_CPU }, { count: 3 kind: KIND_CPU } ]`,
			modelconfig.Settings{Instances: 5, ExecutionProvider: "cpu"},
		},
		{"gpu group", `instance_group { count: 2 kind: KIND_GPU }`, modelconfig.Settings{Instances: 2, ExecutionProvider: "cuda"}},
		{
			"gpu accelerator on gpu",
			`instance_group { kind: KIND_GPU } optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" } ] } }`,
			modelconfig.Settings{Instances: 1, ExecutionProvider: "tensorrt"},
		},
		{
			"gpu accelerator on cpu",
			`instance_group { kind: KIND_CPU } optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" } ] } }`,
			modelconfig.Settings{Instances: 2, ExecutionProvider: "cpu"},
		},
		{
			"cpu accelerator on cpu",
			`instance_group { kind: KIND_CPU count: 1 } optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }`,
			modelconfig.Settings{Instances: 1, ExecutionProvider: "openvino"},
		},
		{
			"accelerator, no group",
			`optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "cuda" } ] } }`,
			modelconfig.Settings{ExecutionProvider: "cuda"},
		},
		{
			"threads",
			`parameters { key: "intra_op_thread_count" value: { string_value: "3" } }`,
			modelconfig.Settings{Parameters: map[string]string{"intra_op_thread_count": "3"}, Threads: 3},
		},
		{
			"parameters and reshape",
			`parameters { key: "k" value: { string_value: "v" } }
			 input [ { name: "a" dims: [ 4 ] reshape { shape: [ 2, 2 ] } }, { name: "b" dims: [ 1 ] } ]
			 output [ { name: "s" dims: [ 1 ] reshape { } } ]`,
			modelconfig.Settings{
				Parameters: map[string]string{"k": "v"},
				Reshape:    map[string][]int64{"a": {2, 2}, "s": {}},
				Dims:       map[string][]int64{"a": {4}, "s": {1}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := modelconfig.SettingsOf(cfg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVersions(t *testing.T) {
	disk := []int64{3, 1, 2, 7}
	tests := []struct {
		policy string
		want   []int64
		err    error
	}{
		{``, []int64{7}, nil},
		{`version_policy { latest { } }`, []int64{7}, nil},
		{`version_policy { latest { num_versions: 2 } }`, []int64{3, 7}, nil},
		{`version_policy { latest { num_versions: 9 } }`, []int64{1, 2, 3, 7}, nil},
		{`version_policy { all { } }`, []int64{1, 2, 3, 7}, nil},
		{`version_policy { specific { versions: [ 2, 1 ] } }`, []int64{1, 2}, nil},
		{`version_policy { specific { versions: [ 4 ] } }`, nil, modelconfig.ErrInvalid},
	}
	for _, tc := range tests {
		cfg, _, err := modelconfig.Parse([]byte(tc.policy))
		if err != nil {
			t.Fatal(err)
		}
		got, err := modelconfig.Versions(cfg, disk)
		if !slices.Equal(got, tc.want) || !errors.Is(err, tc.err) {
			t.Errorf("%q: got %v, %v; want %v, %v", tc.policy, got, err, tc.want, tc.err)
		}
	}
	if got, err := modelconfig.Versions(nil, nil); len(got) != 0 || err != nil {
		t.Errorf("nil config, no versions: got %v, %v", got, err)
	}
}
