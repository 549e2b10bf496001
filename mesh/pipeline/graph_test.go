package pipeline

// This test is in package pipeline, not pipeline_test, so that it can
// check Graph.needed, which the Pipeline uses to skip the steps that
// feed no output a request asks for.

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// models are the composing models the tests' ensembles may name, as
// their completed configs.
var models = map[string]string{
	// pre, left and right: y = f(x), batching, [3] fp32.
	"pre":   `max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [3] }] output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]`,
	"left":  `max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [3] }] output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]`,
	"right": `max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [3] }] output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]`,
	// join: sum = a + b.
	"join": `max_batch_size: 8 input [{ name: "a" data_type: TYPE_FP32 dims: [3] }, { name: "b" data_type: TYPE_FP32 dims: [3] }]
		output [{ name: "sum" data_type: TYPE_FP32 dims: [3] }]`,
	// two: two outputs of one input.
	"two": `max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [3] }]
		output [{ name: "o1" data_type: TYPE_FP32 dims: [3] }, { name: "o2" data_type: TYPE_FP32 dims: [3] }]`,
	"small":         `max_batch_size: 4 input [{ name: "x" data_type: TYPE_FP32 dims: [3] }] output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]`,
	"nobatch":       `max_batch_size: 0 input [{ name: "x" data_type: TYPE_FP32 dims: [-1, 3] }] output [{ name: "y" data_type: TYPE_FP32 dims: [-1, 3] }]`,
	"nobatch_fixed": `max_batch_size: 0 input [{ name: "x" data_type: TYPE_FP32 dims: [3] }] output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]`,
	"int":           `max_batch_size: 8 input [{ name: "x" data_type: TYPE_INT64 dims: [3] }] output [{ name: "y" data_type: TYPE_INT64 dims: [3] }]`,
	"wide":          `max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [4] }] output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]`,
	"var":           `max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [-1] }] output [{ name: "y" data_type: TYPE_FP32 dims: [-1] }]`,
}

// errNoModel is what resolve answers for a model not in models.
var errNoModel = errors.New("no such model")

// parse parses a config.pbtxt, failing on a field it does not know (a
// typo in a test would otherwise test nothing).
func parse(tb testing.TB, text string) *kservepb.ModelConfig {
	tb.Helper()
	cfg, warnings, err := modelconfig.Parse([]byte(text))
	if err != nil {
		tb.Fatalf("parse %q: %v", text, err)
	}
	if len(warnings) > 0 {
		tb.Fatalf("parse %q: %v", text, warnings)
	}
	return cfg
}

// resolver resolves the models in models (version 1, job "job-NAME")
// and records the versions it was asked for, by model.
func resolver(tb testing.TB) (Resolve, map[string]int64) {
	tb.Helper()
	asked := map[string]int64{}
	return func(name string, version int64) (Member, error) {
		asked[name] = version
		if name == "noconfig" {
			return Member{Name: name, Version: "1", Job: "job-" + name}, nil
		}
		text, ok := models[name]
		if !ok {
			return Member{}, fmt.Errorf("model %q: %w", name, errNoModel)
		}
		return Member{Name: name, Version: "1", Job: "job-" + name, Config: parse(tb, text)}, nil
	}, asked
}

// build builds ensemble "e" of config text (which the caller writes
// whole, platform included).
func build(tb testing.TB, text string) (*Graph, map[string]int64, error) {
	tb.Helper()
	resolve, asked := resolver(tb)
	g, err := Build("e", parse(tb, text), resolve)
	return g, asked, err
}

const (
	head = `name: "e" platform: "ensemble" `
	// io is an ensemble's IN and OUT, [3] fp32.
	io = `input [{ name: "IN" data_type: TYPE_FP32 dims: [3] }] output [{ name: "OUT" data_type: TYPE_FP32 dims: [3] }] `
	// preStep runs pre on IN into OUT.
	preStep = `{ model_name: "pre" input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } }`
)

// ens is an ensemble of max_batch_size mb with ensemble io and steps.
func ens(mb int, io string, steps ...string) string {
	return fmt.Sprintf("%smax_batch_size: %d %s ensemble_scheduling { step [ %s ] }", head, mb, io, strings.Join(steps, ", "))
}

// via is a step running model on in (input x) into out (output y).
func via(model, in, out string) string {
	return fmt.Sprintf(`{ model_name: %q input_map { key: "x" value: %q } output_map { key: "y" value: %q } }`, model, in, out)
}

// TestBuildRefuses checks every config Build refuses: the error wraps
// ErrEnsemble and says, in Triton's words where Triton has them, what is
// at fault (the ensemble, the step, the model, the tensor).
func TestBuildRefuses(t *testing.T) {
	fp := func(name string, dims string) string {
		return fmt.Sprintf(`{ name: %q data_type: TYPE_FP32 dims: %s }`, name, dims)
	}
	for _, tc := range []struct {
		name, config string
		want         []string // each in the error message
		cause        error    // also wrapped, when not nil
	}{
		// Settings an ensemble cannot have.
		{name: "not an ensemble", config: `name: "e" platform: "onnxruntime_onnx" ` + io,
			want: []string{"model 'e' is not an ensemble"}},
		{name: "platform without ensemble_scheduling", config: head + io,
			want: []string{"ensemble scheduling must be set for ensemble 'e' whose platform is ensemble"}},
		{name: "ensemble_scheduling on another platform", config: `name: "e" platform: "onnxruntime_onnx" ` + io + `ensemble_scheduling { step [` + preStep + `] }`,
			want: []string{"ensemble scheduling cannot be set for model 'e' whose platform is not ensemble", `set platform: "ensemble"`}},
		{name: "no steps", config: head + io + `ensemble_scheduling { }`,
			want: []string{"must specify 'step' for ensemble 'e'"}},
		{name: "instance_group", config: ens(8, io+`instance_group [{ count: 1 kind: KIND_CPU }]`, preStep),
			want: []string{"instance group should not be specified for ensemble 'e'"}},
		{name: "optimization", config: ens(8, io+`optimization { priority: PRIORITY_MAX }`, preStep),
			want: []string{"optimization should not be specified for ensemble 'e'"}},
		// dynamic_batching and sequence_batching are a oneof with
		// ensemble_scheduling: a config has either, never both.
		{name: "dynamic_batching", config: head + `max_batch_size: 8 ` + io + `dynamic_batching { }`,
			want: []string{"dynamic batching should not be specified for ensemble 'e'", "replace dynamic_batching with ensemble_scheduling"}},
		{name: "sequence_batching", config: head + io + `sequence_batching { }`,
			want: []string{"sequence batching should not be specified for ensemble 'e'", "replace sequence_batching with ensemble_scheduling"}},
		{name: "model_warmup", config: ens(8, io+`model_warmup [{ name: "w" batch_size: 1 }]`, preStep),
			want: []string{"model_warmup can not be specified for ensemble 'e'"}},
		{name: "negative max_batch_size", config: ens(-1, io, preStep),
			want: []string{"'max_batch_size' must be non-negative value for e"}},
		{name: "no inputs", config: ens(8, `output [`+fp("OUT", "[3]")+`]`, preStep),
			want: []string{"ensemble 'e' must declare its input and output tensors"}},
		{name: "input declared twice", config: ens(8, `input [`+fp("IN", "[3]")+`, `+fp("IN", "[3]")+`] output [`+fp("OUT", "[3]")+`]`, preStep),
			want: []string{"input 'IN' of ensemble 'e' is declared twice"}},

		// A step's own fields.
		{name: "no model_name", config: ens(8, io, `{ input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } }`),
			want: []string{"must specify 'model_name' in step 0 of ensemble 'e'"}},
		{name: "no input_map", config: ens(8, io, `{ model_name: "pre" output_map { key: "y" value: "OUT" } }`),
			want: []string{"must specify 'input_map' in step 0 of ensemble 'e'", "'pre'"}},
		{name: "no output_map", config: ens(8, io, preStep, `{ model_name: "left" input_map { key: "x" value: "IN" } }`),
			want: []string{"must specify 'output_map' in step 1 of ensemble 'e'", "'left'"}},
		{name: "model_version -2", config: ens(8, io, `{ model_name: "pre" model_version: -2 input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } }`),
			want: []string{"step 0: model_version -2 of model 'pre' is not valid"}},
		{name: "unknown model", config: ens(8, io, preStep, via("nosuch", "IN", "OUT2")),
			want: []string{"step 1: ensemble 'e' depends on 'nosuch' which is not available", "no such model"}, cause: errNoModel},
		{name: "model without a config", config: ens(8, io, via("noconfig", "IN", "OUT")),
			want: []string{"step 0: ensemble 'e' depends on 'noconfig' which is not available"}},

		// A step's maps against its model.
		{name: "model input not mapped", config: ens(8, io, `{ model_name: "join" input_map { key: "a" value: "IN" } output_map { key: "sum" value: "OUT" } }`),
			want: []string{"step 0: in ensemble 'e', input 'b' in model 'join' is not mapped to any ensemble tensors", "input_map"}},
		{name: "input_map key not a model input", config: ens(8, io, `{ model_name: "pre" input_map { key: "x" value: "IN" } input_map { key: "z" value: "IN" } output_map { key: "y" value: "OUT" } }`),
			want: []string{"step 0: in ensemble 'e', ensemble tensor 'IN' is mapping to non-existing input 'z' in model 'pre'", "[x]"}},
		{name: "input_map typo", config: ens(8, io, `{ model_name: "pre" input_map { key: "X" value: "IN" } output_map { key: "y" value: "OUT" } }`),
			want: []string{"ensemble tensor 'IN' is mapping to non-existing input 'X' in model 'pre'"}},
		{name: "output_map key not a model output", config: ens(8, io, `{ model_name: "pre" input_map { key: "x" value: "IN" } output_map { key: "nope" value: "OUT" } }`),
			want: []string{"step 0: in ensemble 'e', ensemble tensor 'OUT' is mapped from non-existing output 'nope' in model 'pre'", "[y]"}},

		// The tensors between the steps.
		{name: "tensor produced by two steps", config: ens(8, io, preStep, via("left", "IN", "OUT")),
			want: []string{"ensemble tensor 'OUT' can appear in an output map only once for ensemble 'e' step 1", "step 0 produces it already"}},
		{name: "tensor produced twice by one step", config: ens(8, io, `{ model_name: "two" input_map { key: "x" value: "IN" } output_map { key: "o1" value: "OUT" } output_map { key: "o2" value: "OUT" } }`),
			want: []string{"ensemble tensor 'OUT' can appear in an output map only once for ensemble 'e' step 0", "another output of model 'two'"}},
		{name: "step output named like an ensemble input", config: ens(8, io, preStep, via("left", "OUT", "IN")),
			want: []string{"ensemble tensor 'IN' can appear in an output map only once for ensemble 'e' step 1", "an input of the ensemble"}},
		{name: "ensemble output not produced", config: ens(8, `input [`+fp("IN", "[3]")+`] output [`+fp("OUT", "[3]")+`, `+fp("OUT2", "[3]")+`]`, preStep),
			want: []string{"output 'OUT2' for ensemble 'e' is not written", "output_map"}},
		{name: "step input produced by nothing", config: ens(8, io, `{ model_name: "join" input_map { key: "a" value: "IN" } input_map { key: "b" value: "GHOST" } output_map { key: "sum" value: "OUT" } }`),
			want: []string{"in ensemble 'e', ensemble tensor 'GHOST' is not connected", "input of model 'join'"}},
		{name: "ensemble input not used", config: ens(8, `input [`+fp("IN", "[3]")+`, `+fp("IN2", "[3]")+`] output [`+fp("OUT", "[3]")+`]`, preStep),
			want: []string{"ensemble input 'IN2' for ensemble 'e' is not used"}},
		{name: "step output not used", config: ens(8, io, `{ model_name: "two" input_map { key: "x" value: "IN" } output_map { key: "o1" value: "OUT" } output_map { key: "o2" value: "EXTRA" } }`),
			want: []string{"ensemble tensor 'EXTRA' is unused in ensemble 'e'", "step 0", "model 'two'"}},
		{name: "cycle", config: ens(8, io,
			`{ model_name: "join" input_map { key: "a" value: "IN" } input_map { key: "b" value: "T2" } output_map { key: "sum" value: "T1" } }`,
			`{ model_name: "two" input_map { key: "x" value: "T1" } output_map { key: "o1" value: "T2" } output_map { key: "o2" value: "OUT" } }`),
			want: []string{"circular dependency between the steps of ensemble 'e'", "step 0 (model 'join')", "step 1 (model 'two')"}},
		{name: "cycle holds up a later step", config: ens(8, io,
			`{ model_name: "join" input_map { key: "a" value: "IN" } input_map { key: "b" value: "T2" } output_map { key: "sum" value: "T1" } }`,
			via("left", "T1", "T2"), via("right", "T1", "OUT")),
			want: []string{"circular dependency", "step 0 (model 'join'), step 1 (model 'left'), step 2 (model 'right')"}},

		// Batch sizes, dtypes and shapes.
		{name: "max_batch_size above a model's", config: ens(8, io, via("small", "IN", "OUT")),
			want: []string{"ensemble 'e' allows maximum batch size 8, but it contains model 'small' which only allows maximum batch size to be 4"}},
		{name: "non-batching model without the batch dim", config: ens(8, io, via("nobatch_fixed", "IN", "OUT")),
			want: []string{"in ensemble 'e', ensemble tensor 'IN': inconsistent shape: [-1,3] is inferred from ensemble 'e' while [3] is inferred from model 'nobatch_fixed'"}},
		{name: "dtype of an ensemble input", config: ens(8, io, via("int", "IN", "OUT")),
			want: []string{"in ensemble 'e', ensemble tensor 'IN': inconsistent data type: TYPE_FP32 is inferred from ensemble 'e' while TYPE_INT64 is inferred from model 'int'"}},
		{name: "dtype between steps", config: ens(8, `input [`+fp("IN", "[3]")+`] output [{ name: "OUT" data_type: TYPE_INT64 dims: [3] }]`, via("pre", "IN", "T"), via("int", "T", "OUT")),
			want: []string{"in ensemble 'e', ensemble tensor 'T': inconsistent data type: TYPE_FP32 is inferred from model 'pre' while TYPE_INT64 is inferred from model 'int'"}},
		{name: "dtype of an ensemble output", config: ens(8, `input [`+fp("IN", "[3]")+`] output [{ name: "OUT" data_type: TYPE_INT64 dims: [3] }]`, preStep),
			want: []string{"ensemble tensor 'OUT': inconsistent data type: TYPE_FP32 is inferred from model 'pre' while TYPE_INT64 is inferred from ensemble 'e' output"}},
		{name: "shape between steps", config: ens(8, `input [`+fp("IN", "[3]")+`] output [`+fp("OUT", "[4]")+`]`, via("pre", "IN", "T"), via("wide", "T", "OUT")),
			want: []string{"ensemble tensor 'T': inconsistent shape: [-1,3] is inferred from model 'pre' while [-1,4] is inferred from model 'wide'"}},
		{name: "rank of an ensemble output", config: ens(8, `input [`+fp("IN", "[3]")+`] output [`+fp("OUT", "[1, 3]")+`]`, preStep),
			want: []string{"ensemble tensor 'OUT': inconsistent shape: [-1,3] is inferred from model 'pre' while [-1,1,3] is inferred from ensemble 'e' output"}},
		{name: "non-batching ensemble without the batch dim", config: ens(0, io, preStep),
			want: []string{"ensemble tensor 'IN': inconsistent shape: [3] is inferred from ensemble 'e' while [-1,3] is inferred from model 'pre'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, err := build(t, tc.config)
			if err == nil {
				t.Fatalf("Build = %v, nil; want an error", g)
			}
			if !errors.Is(err, ErrEnsemble) {
				t.Errorf("got %v, want it to wrap ErrEnsemble", err)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("got %v, want it to wrap %v", err, tc.cause)
			}
			if !strings.HasPrefix(err.Error(), `ensemble "e": `) {
				t.Errorf("got %q, want it to start with the ensemble's name", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestBuildAccepts checks configs Build accepts: the wildcard dim, the
// batch dim moving between batching and non-batching parties, equal
// max_batch_sizes and the unset model_version.
func TestBuildAccepts(t *testing.T) {
	fp := func(name string, dims string) string {
		return fmt.Sprintf(`{ name: %q data_type: TYPE_FP32 dims: %s }`, name, dims)
	}
	for _, tc := range []struct{ name, config string }{
		{"one step", ens(8, io, preStep)},
		{"max_batch_size equal to a model's", ens(4, io, via("small", "IN", "OUT"))},
		{"max_batch_size below a model's", ens(2, io, via("small", "IN", "OUT"))},
		{"wildcard in the model", ens(8, io, via("var", "IN", "OUT"))},
		{"wildcard in the ensemble", ens(8, `input [`+fp("IN", "[-1]")+`] output [`+fp("OUT", "[-1]")+`]`, preStep)},
		{"non-batching ensemble over a batching model", ens(0, `input [`+fp("IN", "[-1, 3]")+`] output [`+fp("OUT", "[2, 3]")+`]`, preStep)},
		{"batching ensemble over a non-batching model", ens(8, io, via("nobatch", "IN", "OUT"))},
		{"non-batching model between batching ones", ens(8, io, via("pre", "IN", "A"), via("nobatch", "A", "B"), via("left", "B", "OUT"))},
		{"non-batching ensemble and model", ens(0, io, via("nobatch_fixed", "IN", "OUT"))},
		{"one tensor into two inputs of a step", ens(8, io, `{ model_name: "join" input_map { key: "a" value: "IN" } input_map { key: "b" value: "IN" } output_map { key: "sum" value: "OUT" } }`)},
		{"ensemble output read by a later step", ens(8, `input [`+fp("IN", "[3]")+`] output [`+fp("OUT", "[3]")+`, `+fp("OUT2", "[3]")+`]`, preStep, via("left", "OUT", "OUT2"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := build(t, tc.config); err != nil {
				t.Errorf("Build: %v, want nil", err)
			}
		})
	}
}

// diamond is an ensemble whose steps are listed out of order: pre feeds
// left and right, which join joins into OUT; side feeds SIDE on its own.
var diamond = strings.Replace(ens(8, `input [{ name: "IN" data_type: TYPE_FP32 dims: [3] }]
	output [{ name: "OUT" data_type: TYPE_FP32 dims: [3] }, { name: "SIDE" data_type: TYPE_FP32 dims: [-1] }]`,
	`{ model_name: "join" input_map { key: "a" value: "L" } input_map { key: "b" value: "R" } output_map { key: "sum" value: "OUT" } }`,
	via("left", "A", "L"),
	via("right", "A", "R"),
	via("pre", "IN", "A"),
	via("var", "IN", "SIDE"),
), "ensemble_scheduling {", "ensemble_scheduling { max_inflight_requests: 3", 1)

// TestBuildDiamond checks the Graph of a valid diamond: one tensor feeds
// two steps and a step joins them.
func TestBuildDiamond(t *testing.T) {
	g, _, err := build(t, diamond)
	if err != nil {
		t.Fatal(err)
	}
	if g.Name() != "e" {
		t.Errorf("Name = %q, want %q", g.Name(), "e")
	}
	var got []string
	for _, m := range g.Members() {
		if m.Version != "1" || m.Job != "job-"+m.Name || m.Config == nil {
			t.Errorf("member %+v: want version 1, job job-%s and a config", m, m.Name)
		}
		got = append(got, m.Name)
	}
	if want := []string{"pre", "var", "left", "right", "join"}; !slices.Equal(got, want) {
		t.Errorf("Members = %v, want %v (each after the steps it needs)", got, want)
	}
	if g.inflight != 3 {
		t.Errorf("inflight = %d, want 3", g.inflight)
	}
	wantProducer := map[string]int{"A": 3, "L": 1, "R": 2, "OUT": 0, "SIDE": 4}
	if !maps.Equal(g.producer, wantProducer) {
		t.Errorf("producer = %v, want %v", g.producer, wantProducer)
	}
	info := g.Info()
	want := infer.ModelInfo{
		Name:    "e",
		Inputs:  []infer.IO{{Name: "IN", DType: infer.Float32, Shape: []int64{-1, 3}}},
		Outputs: []infer.IO{{Name: "OUT", DType: infer.Float32, Shape: []int64{-1, 3}}, {Name: "SIDE", DType: infer.Float32, Shape: []int64{-1, -1}}},
	}
	if info.Name != want.Name || !reflect.DeepEqual(info.Inputs, want.Inputs) || !reflect.DeepEqual(info.Outputs, want.Outputs) {
		t.Errorf("Info = %+v, want %+v", info, want)
	}
	if info.DynamicBatch || info.BatchReason == "" {
		t.Errorf("Info: DynamicBatch %v, BatchReason %q; want false and a reason", info.DynamicBatch, info.BatchReason)
	}
}

// TestInfoWithoutBatch checks that a non-batching ensemble's Info has
// its dims as declared, with no batch dim.
func TestInfoWithoutBatch(t *testing.T) {
	g, _, err := build(t, ens(0, `input [{ name: "IN" data_type: TYPE_INT64 dims: [-1, 3] }] output [{ name: "OUT" data_type: TYPE_INT64 dims: [-1, 3] }]`, via("int", "IN", "OUT")))
	if err != nil {
		t.Fatal(err)
	}
	wantIn := []infer.IO{{Name: "IN", DType: infer.Int64, Shape: []int64{-1, 3}}}
	wantOut := []infer.IO{{Name: "OUT", DType: infer.Int64, Shape: []int64{-1, 3}}}
	if info := g.Info(); !reflect.DeepEqual(info.Inputs, wantIn) || !reflect.DeepEqual(info.Outputs, wantOut) {
		t.Errorf("Info: inputs %v, outputs %v; want %v, %v", info.Inputs, info.Outputs, wantIn, wantOut)
	}
}

// TestNeeded checks that a request runs only the steps that feed the
// outputs it asks for.
func TestNeeded(t *testing.T) {
	g, _, err := build(t, diamond)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		wanted []string
		want   []int // step indexes in the config
	}{
		{[]string{"OUT", "SIDE"}, []int{0, 1, 2, 3, 4}},
		{[]string{"OUT"}, []int{0, 1, 2, 3}},
		{[]string{"SIDE"}, []int{4}},
		{[]string{"L"}, []int{1, 3}}, // an inner tensor: its step and what feeds it
		{[]string{"IN"}, nil},        // an ensemble input: no step
		{nil, nil},
	} {
		t.Run(strings.Join(tc.wanted, ","), func(t *testing.T) {
			got := slices.Sorted(maps.Keys(g.needed(tc.wanted)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("needed(%v) = %v, want %v", tc.wanted, got, tc.want)
			}
		})
	}
}

// TestModelVersion checks the version Build asks resolve for: unset (0)
// is the latest, as -1.
func TestModelVersion(t *testing.T) {
	for _, tc := range []struct{ version, want int64 }{{0, -1}, {-1, -1}, {3, 3}} {
		t.Run(fmt.Sprint(tc.version), func(t *testing.T) {
			step := fmt.Sprintf(`{ model_name: "pre" model_version: %d input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } }`, tc.version)
			_, asked, err := build(t, ens(8, io, step))
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := asked["pre"]; !ok || got != tc.want {
				t.Errorf("resolve asked for version %d (asked: %v), want %d", got, ok, tc.want)
			}
		})
	}
	t.Run("-2", func(t *testing.T) {
		step := `{ model_name: "pre" model_version: -2 input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } }`
		_, asked, err := build(t, ens(8, io, step))
		if !errors.Is(err, ErrEnsemble) {
			t.Errorf("got %v, want ErrEnsemble", err)
		}
		if len(asked) > 0 {
			t.Errorf("resolve was asked for %v, want no call", asked)
		}
	})
}

func TestIsEnsemble(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    *kservepb.ModelConfig
		expect bool
	}{
		{"nil", nil, false},
		{"onnx", parse(t, `platform: "onnxruntime_onnx"`), false},
		{"empty", parse(t, ``), false},
		{"platform", parse(t, `platform: "ensemble"`), true},
		{"ensemble_scheduling only", parse(t, `ensemble_scheduling { }`), true},
		{"both", parse(t, `platform: "ensemble" ensemble_scheduling { step [`+preStep+`] }`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsEnsemble(tc.cfg); got != tc.expect {
				t.Errorf("IsEnsemble = %v, want %v", got, tc.expect)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *kservepb.ModelConfig
		want []string
	}{
		{"nil", nil, nil},
		{"not an ensemble", parse(t, `platform: "onnxruntime_onnx"`), nil},
		{"no steps", parse(t, head+`ensemble_scheduling { }`), nil},
		{"diamond, each model once", parse(t, diamond), []string{"join", "left", "right", "pre", "var"}},
		{"repeated model", parse(t, ens(8, io, via("pre", "IN", "A"), via("left", "A", "B"), via("pre", "B", "OUT"))), []string{"pre", "left"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Steps(tc.cfg); !slices.Equal(got, tc.want) {
				t.Errorf("Steps = %q, want %q", got, tc.want)
			}
		})
	}
}
