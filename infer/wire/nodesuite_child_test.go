package wire_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// This file is the child side of TestONNXNodeSuite (nodesuite_test.go): a
// SIGFPE or SIGSEGV inside ONNX Runtime's C++ code ends the whole process,
// which no recover can stop, so the cases run in a child process (this test
// binary, re-executed) that reports each case as it goes; the parent names
// the case a child died in and starts a new child after it.

// Environment of a child: the file listing its case directories, one per
// line, and the file it appends its report to.
const (
	nodeChildCasesEnv  = "CLUSTER_SERVING_NODE_CHILD_CASES"
	nodeChildReportEnv = "CLUSTER_SERVING_NODE_CHILD_REPORT"
)

// TestMain runs the binary as a node-suite child when the parent asked
// for one, else runs the tests.
func TestMain(m *testing.M) {
	if cases := os.Getenv(nodeChildCasesEnv); cases != "" {
		os.Exit(nodeChild(cases, os.Getenv(nodeChildReportEnv)))
	}
	os.Exit(m.Run())
}

// nodeResult is what a child reports of one case.
type nodeResult struct {
	Case   string `json:"case"`
	Load   string `json:"load,omitempty"`   // infer.New's error
	Build  string `json:"build,omitempty"`  // the request could not be built from the test data
	Status int    `json:"status,omitempty"` // the answer's wire status
	Msg    string `json:"msg,omitempty"`    // the error message of a non-200 answer
	Match  string `json:"match,omitempty"`  // 200 only: "" when the outputs match, else how they differ
	Panic  string `json:"panic,omitempty"`  // a panic that escaped infer.New or Predict
	Death  string `json:"-"`                // set by the parent: how the child died in this case
}

// nodeChild runs every case listed in the file cases, appending to
// report a line "start <case>" before each and its nodeResult as JSON
// after. The start line is written (and reaches the kernel) before the
// case runs, so it survives the child's death.
func nodeChild(cases, report string) int {
	list, err := os.ReadFile(cases)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	f, err := os.OpenFile(report, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer f.Close()
	lib, err := infer.FindLibrary("", os.Getenv("ONNXRUNTIME_LIB"))
	if err == nil {
		err = infer.Init(lib)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ONNX Runtime:", err)
		return 3
	}
	for _, dir := range strings.Fields(string(list)) {
		fmt.Fprintf(f, "start %s\n", filepath.Base(dir))
		b, _ := json.Marshal(runNodeCase(dir))
		fmt.Fprintf(f, "%s\n", b)
	}
	return 0
}

// runNodeCase loads the case's model the way a worker does (infer.New,
// then a wire.Predictor in front) and sends one OIP request built from
// test_data_set_0/input_*.pb.
func runNodeCase(dir string) (r nodeResult) {
	r.Case = filepath.Base(dir)
	e, err := loadGuarded(filepath.Join(dir, "model.onnx"), &r)
	if err != nil || r.Panic != "" {
		if err != nil {
			r.Load = err.Error()
		}
		return r
	}
	defer e.Close()
	body, err := nodeRequest(dir, e.Info())
	if err != nil {
		r.Build = err.Error()
		return r
	}
	p := wire.NewPredictor(e, wire.Model{})
	out, err := predictGuarded(p, body, &r)
	if r.Panic != "" {
		return r
	}
	r.Status = wire.Status(err)
	if err != nil {
		r.Msg = err.Error()
		return r
	}
	r.Match = compareNodeOutputs(dir, out)
	return r
}

func loadGuarded(model string, r *nodeResult) (e *infer.Engine, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.Panic = fmt.Sprintf("infer.New: %v\n%s", p, debug.Stack())
		}
	}()
	return infer.New(infer.Config{ModelPath: model})
}

func predictGuarded(p *wire.Predictor, body []byte, r *nodeResult) (out []byte, err error) {
	defer func() {
		if x := recover(); x != nil {
			r.Panic = fmt.Sprintf("Predict: %v\n%s", x, debug.Stack())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.Predict(ctx, wire.MediaTypeOIP, body)
}

// nodeTensors reads the case's test_data_set_0/<kind>_N.pb files in order.
func nodeTensors(dir, kind string) (names []string, ts []infer.Tensor, err error) {
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("%s_%d.pb", kind, i)))
		if os.IsNotExist(err) {
			return names, ts, nil
		}
		if err != nil {
			return nil, nil, err
		}
		name, t, err := infer.DecodeTensorProto(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%s_%d.pb: %w", kind, i, err)
		}
		names, ts = append(names, name), append(ts, t)
	}
}

// nodeRequest builds the OIP request of the case's inputs: each tensor
// with its own name (or the model input's at its place when it has
// none), datatype, shape and flat data.
func nodeRequest(dir string, info infer.ModelInfo) ([]byte, error) {
	names, ts, err := nodeTensors(dir, "input")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(`{"inputs":[`)
	for i, t := range ts {
		name := names[i]
		if name == "" && i < len(info.Inputs) {
			name = info.Inputs[i].Name
		}
		if i > 0 {
			b.WriteByte(',')
		}
		if i < len(info.Inputs) && info.Inputs[i].DType == infer.BFloat16 {
			t = bf16FromUint16(t)
		}
		shape, _ := json.Marshal(t.Shape)
		fmt.Fprintf(&b, `{"name":%q,"datatype":%q,"shape":%s,"data":[%s]}`, name, wire.OIPDatatype(t.DType), shape, jsonData(t))
	}
	b.WriteString(`]}`)
	return []byte(b.String()), nil
}

// bf16FromUint16 reads a Uint16 tensor as bfloat16 bits: onnx 1.12 writes
// the node cases' bfloat16 data as uint16 tensors (numpy has no bfloat16).
func bf16FromUint16(t infer.Tensor) infer.Tensor {
	u, ok := t.Data.([]uint16)
	if !ok {
		return t
	}
	d := make([]infer.BF16, len(u))
	for i, v := range u {
		d[i] = infer.BF16(v)
	}
	return infer.Tensor{DType: infer.BFloat16, Shape: t.Shape, Data: d}
}

// jsonData writes t's elements as a flat JSON list: NaN as null (OIP's
// reading), infinities as 1e999 (which no float parses: an honest 400).
func jsonData(t infer.Tensor) string {
	if d, ok := t.Data.([]string); ok {
		b, _ := json.Marshal(d)
		return string(b[1 : len(b)-1])
	}
	vals := asFloat64s(t)
	parts := make([]string, len(vals))
	for i, v := range vals {
		switch {
		case t.DType == infer.Bool:
			parts[i] = strconv.FormatBool(v != 0)
		case math.IsNaN(v):
			parts[i] = "null"
		case math.IsInf(v, 1):
			parts[i] = "1e999"
		case math.IsInf(v, -1):
			parts[i] = "-1e999"
		case t.DType == infer.Float32:
			parts[i] = strconv.FormatFloat(v, 'g', -1, 32)
		default:
			parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return strings.Join(parts, ",")
}

// asFloat64s is infer.Float64s without its error: a dtype it does not
// know gives nil, which the callers treat as "cannot compare".
func asFloat64s(t infer.Tensor) []float64 {
	v, _ := infer.Float64s(t)
	return v
}

// compareNodeOutputs compares an OIP answer with the case's
// output_*.pb, as ONNX's backend tests do (rtol 1e-3, with a small atol);
// "" means every expected output matched.
func compareNodeOutputs(dir string, answer []byte) string {
	names, want, err := nodeTensors(dir, "output")
	if err != nil {
		return "expected outputs unreadable: " + err.Error()
	}
	var resp infertest.OIPResponse
	if err := json.Unmarshal(answer, &resp); err != nil {
		return "answer is not OIP JSON: " + err.Error()
	}
	for i, w := range want {
		j := slices.IndexFunc(resp.Outputs, func(o infertest.OIPOutput) bool { return o.Name == names[i] })
		if j < 0 {
			return fmt.Sprintf("output %q missing", names[i])
		}
		if msg := compareTensor(resp.Outputs[j], w); msg != "" {
			return fmt.Sprintf("output %q: %s", names[i], msg)
		}
	}
	return ""
}

func compareTensor(got infertest.OIPOutput, want infer.Tensor) string {
	if !slices.Equal(got.Shape, want.Shape) {
		return fmt.Sprintf("shape %v, want %v", got.Shape, want.Shape)
	}
	if got.Datatype == "BF16" {
		want = bf16FromUint16(want)
	}
	var data []any
	if err := json.Unmarshal(got.Data, &data); err != nil {
		return "data: " + err.Error()
	}
	if ws, ok := want.Data.([]string); ok {
		for k, v := range data {
			if k >= len(ws) || v != ws[k] {
				return fmt.Sprintf("element %d: %v, want %q", k, v, ws[min(k, len(ws)-1)])
			}
		}
		if len(data) != len(ws) {
			return fmt.Sprintf("%d elements, want %d", len(data), len(ws))
		}
		return ""
	}
	w := asFloat64s(want)
	if len(data) != len(w) {
		return fmt.Sprintf("%d elements, want %d", len(data), len(w))
	}
	for k, v := range data {
		var g float64
		switch x := v.(type) {
		case float64:
			g = x
		case bool:
			if x {
				g = 1
			}
		case nil: // NaN or an infinity
			if math.IsNaN(w[k]) || math.IsInf(w[k], 0) {
				continue
			}
			return fmt.Sprintf("element %d: null, want %v", k, w[k])
		}
		if math.Abs(g-w[k]) > 1e-5+1e-3*math.Abs(w[k]) {
			return fmt.Sprintf("element %d: %v, want %v", k, g, w[k])
		}
	}
	return ""
}

// readNodeReport reads a child's report: the finished cases' results,
// and the case it started last without finishing ("" when none).
func readNodeReport(path string) (done []nodeResult, started string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "start "); ok {
			started = name
			continue
		}
		var r nodeResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, "", fmt.Errorf("report line %q: %w", line, err)
		}
		done, started = append(done, r), ""
	}
	return done, started, sc.Err()
}
