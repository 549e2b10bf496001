package wire_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/infertest/onnxnode"
)

// nodeSuiteEnv picks the ONNX node cases TestONNXNodeSuite runs: unset,
// the sample below; "all", every case (`make onnx-crash`); anything else,
// a regular expression of case names.
const nodeSuiteEnv = "CLUSTER_SERVING_ONNX_NODE"

// nodeSample is the part of ONNX's node suite the default `go test` runs:
// the kinds of model and request that once ended the process (scalar
// inputs and outputs, zero-size dims, integer Div and Mod, no inputs) and
// the kinds a worker must refuse cleanly (strings, sequences, training
// ops), beside a few plain ones and float16/bfloat16 casts.
var nodeSample = []string{
	// scalar inputs or outputs
	"test_clip", "test_clip_default_inbounds", "test_clip_default_int8_min", "test_cumsum_1d",
	"test_cumsum_2d_axis_1", "test_tril", "test_triu_zero", "test_tril_zero", "test_onehot_with_axis",
	"test_quantizelinear", "test_dequantizelinear", "test_range_int32_type_negative_delta",
	"test_range_float_type_positive_delta_expanded", "test_pow_bcast_scalar", "test_gemm_default_scalar_bias",
	"test_size", "test_shape", "test_argmax_default_axis_example",
	// zero-size dims
	"test_split_zero_size_splits", "test_constantofshape_int_shape_zero", "test_reshape_allowzero_reordered",
	"test_reduce_sum_empty_axes_input_noop_example", "test_slice_start_out_of_bounds",
	// integer division
	"test_div", "test_div_bcast", "test_div_example", "test_div_uint8", "test_mod_broadcast",
	"test_mod_int64_fmod", "test_mod_mixed_sign_int32", "test_mod_mixed_sign_int64", "test_mod_uint8",
	"test_mod_mixed_sign_float32",
	// strings, no inputs, sequences, optionals, other dtypes, training, random
	"test_strnormalizer_export_monday_casesensintive_lower", "test_castlike_FLOAT_to_STRING_expanded",
	"test_cast_STRING_to_FLOAT", "test_constant", "test_sequence_insert_at_back", "test_identity_sequence",
	"test_optional_has_element_empty", "test_cast_FLOAT_to_FLOAT16", "test_castlike_BFLOAT16_to_FLOAT_expanded",
	"test_max_int16", "test_bitshift_right_uint8", "test_adagrad", "test_bernoulli", "test_isinf",
	// plain
	"test_add", "test_abs", "test_matmul_2d", "test_conv_with_strides_padding", "test_softmax_axis_0_expanded",
	"test_gather_0", "test_einsum_batch_matmul", "test_lstm_defaults", "test_nonzero_example", "test_where_example",
	"test_equal", "test_not_2d", "test_dft", "test_resize_upsample_scales_linear_align_corners",
}

// TestONNXNodeSuite is a crash test: every case of ONNX's node test suite
// (generated on the machine by Debian's python3-onnx, see
// infer/testdata/gen_node_tests.py) is loaded the way a worker loads a
// model (infer.New, a wire.Predictor in front) and sent one OIP request
// built from its test data. Whatever the pass rate, the process must
// survive every case, and every failure must be a clear error: a load
// error naming the model, or an answer of status 400, 413 or 500 with a
// message. Cases run in child processes (see nodesuite_child_test.go) so
// that a death is named and counted instead of ending the run. Matching
// ONNX's expected outputs is reported, not required.
func TestONNXNodeSuite(t *testing.T) {
	lib := infertest.RequireLibrary(t)
	t.Setenv("ONNXRUNTIME_LIB", lib) // the children find the library the same way
	cases := onnxnode.Select(t, onnxnode.Cases(t), nodeSuiteEnv, nodeSample)
	start := time.Now()
	results := runNodeChildren(t, cases)
	t.Logf("%d cases in %v", len(cases), time.Since(start).Round(time.Millisecond))
	for _, c := range cases {
		r := results[filepath.Base(c)]
		switch {
		case r.Death != "":
			t.Errorf("%s: the process died: %s", r.Case, r.Death)
		case r.Panic != "":
			t.Errorf("%s: a panic escaped: %s", r.Case, r.Panic)
		case r.Load != "" && !strings.Contains(r.Load, r.Case):
			t.Errorf("%s: load error does not name the model: %s", r.Case, r.Load)
		case r.Load == "" && r.Build == "" && r.Status != 200 && !slices.Contains([]int{400, 413, 500}, r.Status):
			t.Errorf("%s: got status %d (%s), want 200, 400, 413 or 500", r.Case, r.Status, r.Msg)
		case r.Status >= 400 && r.Msg == "":
			t.Errorf("%s: status %d without a message", r.Case, r.Status)
		case r.Build != "":
			t.Errorf("%s: loaded, but its test data gives no request: %s", r.Case, r.Build)
		}
	}
	t.Log("\n" + nodeSummary(results))
	if os.Getenv(nodeSuiteEnv) != "" {
		t.Log("\n" + nodeDetails(cases, results))
	}
}

// nodeDetails lists every case that did not match ONNX's expected
// outputs, with why, one line each.
func nodeDetails(cases []string, results map[string]nodeResult) string {
	var b strings.Builder
	for _, c := range cases {
		r := results[filepath.Base(c)]
		var why string
		switch {
		case r.Death != "":
			why = "DIED: " + r.Death
		case r.Panic != "":
			why = "PANIC: " + r.Panic
		case r.Load != "":
			why = "load: " + loadCause(r.Load)
		case r.Build != "":
			why = "request: " + r.Build
		case r.Status != 200:
			why = fmt.Sprintf("%d: %s", r.Status, r.Msg)
		case r.Match != "":
			why = "200, outputs differ: " + r.Match
		default:
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", r.Case, why)
	}
	return b.String()
}

// runNodeChildren runs cases in child processes (onnxnode.RunChildrenAs)
// and returns every case's result; a case a child died in gets Death.
func runNodeChildren(t *testing.T, cases []string) map[string]nodeResult {
	t.Helper()
	return onnxnode.RunChildrenAs(t, cases, func(name, how string) nodeResult { return nodeResult{Case: name, Death: how} })
}

// nodeSummary is the table TestONNXNodeSuite logs: counts, then load
// errors and request errors by cause.
func nodeSummary(results map[string]nodeResult) string {
	var loaded, answered, matched, deaths, panics int
	loadCauses, reqCauses := map[string]int{}, map[string]int{}
	for _, r := range results {
		switch {
		case r.Death != "":
			deaths++
		case r.Panic != "":
			panics++
		case r.Load != "":
			loadCauses[loadCause(r.Load)]++
		default:
			loaded++
			switch {
			case r.Build != "":
				reqCauses["request not built from the test data"]++
			case r.Status == 200:
				answered++
				if r.Match == "" {
					matched++
				}
			default:
				reqCauses[fmt.Sprintf("%d %s", r.Status, requestCause(r.Msg))]++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cases %d, process deaths %d, escaped panics %d, loaded %d, answered 200 %d, matched expected outputs %d\n",
		len(results), deaths, panics, loaded, answered, matched)
	writeCauses(&b, "load errors", loadCauses)
	writeCauses(&b, "request errors", reqCauses)
	return b.String()
}

func writeCauses(b *strings.Builder, title string, causes map[string]int) {
	fmt.Fprintf(b, "%s:\n", title)
	keys := slices.Sorted(maps.Keys(causes))
	slices.SortStableFunc(keys, func(x, y string) int { return causes[y] - causes[x] })
	for _, k := range keys {
		fmt.Fprintf(b, "  %4d  %s\n", causes[k], k)
	}
}

// causes maps a substring of an error message to the cause it is counted
// under; the first that matches wins.
type causes [][2]string

func (cs causes) of(msg string) string {
	for _, c := range cs {
		if strings.Contains(msg, c[0]) {
			return c[1]
		}
	}
	if len(msg) > 100 {
		msg = msg[:100] + "..."
	}
	return "other: " + msg
}

var loadCauses = causes{
	{"ONNXTypeSequence", "input or output is a sequence"},
	{"ONNXTypeOptional", "input or output is an optional"},
	{"is a", "input or output is not a tensor"},
	{"element type", "element type infer does not handle"},
	{"holds a zero", "constant zero integer divisor"},
	{"NOT_IMPLEMENTED", "ONNX Runtime has no kernel for it"},
	{"Could not find an implementation", "ONNX Runtime has no kernel for it"},
	{"ai.onnx.preview.training", "training op (ai.onnx.preview.training)"},
	{"Unsupported", "ONNX Runtime: unsupported"},
	{"Error loading", "ONNX Runtime refuses the model at load"},
	{"panic", "panic at load (recovered)"},
}

var requestCauses = causes{
	{"holds a zero", "zero integer divisor refused"},
	{"holds -1", "-1 divisor of a minimum refused"},
	{"out of range", "value out of range (an infinity in the test data)"},
	{"model has no inputs", "model has no inputs"},
	{`has no "inputs"`, "request has no inputs (model has none)"},
	{"does not match model", "shape does not fit the model"},
	{"missing", "input missing from the test data"},
	{"run model", "ONNX Runtime run error"},
	{"panicked", "panic in a run (recovered)"},
}

// loadCause counts a load error under its cause, without the model's
// path that every one starts with.
func loadCause(msg string) string {
	if i := strings.Index(msg, `.onnx": `); i >= 0 {
		msg = msg[i+len(`.onnx": `):]
	}
	return loadCauses.of(msg)
}

func requestCause(msg string) string { return requestCauses.of(msg) }

// TestNodeSuiteNamesADeath checks the crash harness itself on a real
// crash: div_computed_i32 divides by x-1, which infer cannot guard, so
// x = 1 raises SIGFPE in ONNX Runtime and ends the child. The parent must
// name that case and run the next one in a new child.
func TestNodeSuiteNamesADeath(t *testing.T) {
	lib := infertest.RequireLibrary(t)
	t.Setenv("ONNXRUNTIME_LIB", lib)
	dir := t.TempDir()
	crash := writeNodeCase(t, dir, "crash", "div_computed_i32", []int32{1, 1, 1, 1})
	next := writeNodeCase(t, dir, "next", "div_computed_i32", []int32{2, 3, 5, 9})
	results := runNodeChildren(t, []string{crash, next})
	if got := results["crash"].Death; !strings.Contains(got, "SIGFPE") {
		t.Errorf("crash: got death %q, want one naming SIGFPE", got)
	}
	if r := results["next"]; r.Death != "" || r.Status != 200 {
		t.Errorf("next: got %+v, want status 200 from a new child", r)
	}
}

// writeNodeCase writes a case directory as gen_node_tests.py does: the
// committed model and one int32 input [1, len(x)] named "x".
func writeNodeCase(t *testing.T, dir, name, modelName string, x []int32) string {
	t.Helper()
	c := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(c, "test_data_set_0"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(model(modelName))
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	for _, v := range x {
		raw = binary.LittleEndian.AppendUint32(raw, uint32(v))
	}
	var pb []byte
	pb = protowire.AppendTag(pb, 1, protowire.BytesType) // dims, packed
	pb = protowire.AppendBytes(pb, protowire.AppendVarint(protowire.AppendVarint(nil, 1), uint64(len(x))))
	pb = protowire.AppendTag(pb, 2, protowire.VarintType) // data_type INT32
	pb = protowire.AppendVarint(pb, 6)
	pb = protowire.AppendTag(pb, 8, protowire.BytesType) // name
	pb = protowire.AppendString(pb, "x")
	pb = protowire.AppendTag(pb, 9, protowire.BytesType) // raw_data
	pb = protowire.AppendBytes(pb, raw)
	if err := os.WriteFile(filepath.Join(c, "model.onnx"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c, "test_data_set_0", "input_0.pb"), pb, 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}
