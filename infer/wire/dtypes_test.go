package wire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// dtypeModel is a committed model of infer/testdata whose input x [-1,4]
// and output y have element types beyond the first six: two rows to send,
// and values of x that are out of the input type's range.
type dtypeModel struct {
	model    string
	datatype string // OIP datatype of x
	x        infer.Tensor
	bad      []string
}

func dtypeModels() []dtypeModel {
	s := []int64{2, 4}
	return []dtypeModel{
		{"identity_i8", "INT8", infer.Tensor{DType: infer.Int8, Shape: s, Data: []int8{-128, -1, 0, 127, 1, 2, 3, 4}}, []string{"128", "-129", "1.5"}},
		{"identity_i16", "INT16", infer.Tensor{DType: infer.Int16, Shape: s, Data: []int16{-32768, -1, 0, 32767, 1, 2, 3, 4}}, []string{"32768", "-32769"}},
		{"identity_u16", "UINT16", infer.Tensor{DType: infer.Uint16, Shape: s, Data: []uint16{0, 1, 65534, 65535, 1, 2, 3, 4}}, []string{"65536", "-1"}},
		{"identity_u32", "UINT32", infer.Tensor{DType: infer.Uint32, Shape: s, Data: []uint32{0, 1, 1<<32 - 2, 1<<32 - 1, 1, 2, 3, 4}}, []string{"4294967296", "-1"}},
		{"identity_u64", "UINT64", infer.Tensor{DType: infer.Uint64, Shape: s, Data: []uint64{0, 1, 1<<64 - 2, 1<<64 - 1, 1, 2, 3, 4}}, []string{"18446744073709551616", "-1"}},
		{"identity_f16", "FP16", infer.Tensor{DType: infer.Float16, Shape: s, Data: []infer.F16{0x3c00, 0xc100, 0x7bff, 0x2e66, 0x0001, 0x3555, 0x8000, 0x03ff}}, []string{"65520", "-1e6", "1e400"}},
		{"identity_bf16", "BF16", infer.Tensor{DType: infer.BFloat16, Shape: s, Data: []infer.BF16{0x3f80, 0xc020, 0x7f7f, 0x3dcd, 0x0001, 0x3eab, 0x8000, 0x4049}}, []string{"1e39", "-3.4e38"}},
		{"cast_f32_f16", "FP32", infer.Tensor{DType: infer.Float32, Shape: s, Data: []float32{1, 0.1, 65504, 65519, 1e-8, -2.5, 1.0 / 3, 0x1p-24}}, []string{"1e39"}},
		{"cast_f16_f32", "FP16", infer.Tensor{DType: infer.Float16, Shape: s, Data: []infer.F16{0x3c00, 0xc100, 0x7bff, 0x7bfe, 0x0001, 0x3555, 0x8000, 0x03ff}}, []string{"65520"}},
	}
}

// elemTexts writes t's elements as JSON numbers: 16-bit floats as their
// float32 value, which reads back as the same bits.
func elemTexts(t infer.Tensor) []string {
	v := reflect.ValueOf(t.Data)
	out := make([]string, v.Len())
	for i := range out {
		switch x := v.Index(i).Interface().(type) {
		case infer.F16:
			out[i] = jsonFloat(x.Float32())
		case infer.BF16:
			out[i] = jsonFloat(x.Float32())
		case float32:
			out[i] = jsonFloat(x)
		default:
			out[i] = fmt.Sprint(x)
		}
	}
	return out
}

func jsonFloat(f float32) string { return strconv.FormatFloat(float64(f), 'g', -1, 32) }

// rowJSON is row r of a [rows,4] tensor as a JSON array.
func rowJSON(t infer.Tensor, r int) string {
	return "[" + strings.Join(elemTexts(t)[4*r:4*r+4], ",") + "]"
}

// parseElems reads JSON numbers as the data slice of dt.
func parseElems(dt infer.DType, nums []json.Number) (any, error) {
	t := infer.NewTensor(dt, []int64{int64(len(nums))})
	v := reflect.ValueOf(t.Data)
	for i, n := range nums {
		var x any
		var err error
		switch dt {
		case infer.Int8, infer.Int16:
			var k int64
			k, err = strconv.ParseInt(string(n), 10, 64)
			x = k
		case infer.Uint16, infer.Uint32, infer.Uint64:
			var k uint64
			k, err = strconv.ParseUint(string(n), 10, 64)
			x = k
		case infer.Float16, infer.BFloat16, infer.Float32:
			var f float64
			f, err = strconv.ParseFloat(string(n), 32)
			switch dt {
			case infer.Float16:
				x = infer.F16From(float32(f))
			case infer.BFloat16:
				x = infer.BF16From(float32(f))
			default:
				x = float32(f)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("element %d: %v", i, err)
		}
		v.Index(i).Set(reflect.ValueOf(x).Convert(v.Type().Elem()))
	}
	return t.Data, nil
}

// numbers reads a JSON list of numbers.
func numbers(t testing.TB, raw []byte) []json.Number {
	t.Helper()
	var any []any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&any); err != nil {
		t.Fatalf("data %s: %v", raw, err)
	}
	out := make([]json.Number, len(any))
	for i, v := range any {
		n, ok := v.(json.Number)
		if !ok {
			t.Fatalf("data %s: element %d is %v", raw, i, v)
		}
		out[i] = n
	}
	return out
}

// direct runs the model on x with ONNX Runtime directly (no codec, no
// batcher): the answer every door must give.
func direct(t testing.TB, m dtypeModel) infer.Tensor {
	t.Helper()
	out, err := infertest.NewSession(t, model(m.model)).Run([]infer.Tensor{m.x})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// rowOf returns row r of a [rows,4] tensor's data.
func rowOf(t infer.Tensor, r int) any {
	return reflect.ValueOf(t.Data).Slice(4*r, 4*r+4).Interface()
}

func oipBody(m dtypeModel, rows ...int) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = rowJSON(m.x, r)
	}
	return fmt.Sprintf(`{"inputs":[{"name":"x","datatype":%q,"shape":[%d,4],"data":[%s]}]}`, m.datatype, len(rows), strings.Join(parts, ","))
}

// checkOIPAnswer checks an OIP answer of the given rows against want.
func checkOIPAnswer(t testing.TB, body []byte, want infer.Tensor, rows ...int) {
	t.Helper()
	var got infertest.OIPResponse
	if err := json.Unmarshal(body, &got); err != nil || len(got.Outputs) != 1 {
		t.Fatalf("answer %s: %v", body, err)
	}
	o := got.Outputs[0]
	if o.Name != "y" || o.Datatype != wire.OIPDatatype(want.DType) || !reflect.DeepEqual(o.Shape, []int64{int64(len(rows)), 4}) {
		t.Errorf("answer %s: want y %s [%d 4]", body, wire.OIPDatatype(want.DType), len(rows))
	}
	data, err := parseElems(want.DType, numbers(t, o.Data))
	if err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	for i, r := range rows {
		g := reflect.ValueOf(data).Slice(4*i, 4*i+4).Interface()
		if !reflect.DeepEqual(g, rowOf(want, r)) {
			t.Errorf("row %d: got %v, want %v (answer %s)", i, g, rowOf(want, r), body)
		}
	}
}

// checkInstanceAnswer checks a JSON instances answer of the given rows.
func checkInstanceAnswer(t testing.TB, body []byte, want infer.Tensor, rows ...int) {
	t.Helper()
	values := decodePredictions(t, body)
	if len(values) != len(rows) {
		t.Fatalf("answer %s: want %d predictions", body, len(rows))
	}
	for i, r := range rows {
		var v struct {
			Data  json.RawMessage `json:"data"`
			Shape []int64         `json:"shape"`
		}
		if err := json.Unmarshal([]byte(values[i]), &v); err != nil {
			t.Fatalf("prediction %d %q: %v", i, values[i], err)
		}
		g, err := parseElems(want.DType, numbers(t, v.Data))
		if err != nil || !reflect.DeepEqual(v.Shape, []int64{4}) || !reflect.DeepEqual(g, rowOf(want, r)) {
			t.Errorf("prediction %d: got %s (%v), want %v shape [4]", i, values[i], err, rowOf(want, r))
		}
	}
}

func instancesBody(m dtypeModel, rows ...int) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = `{"x":` + rowJSON(m.x, r) + `}`
	}
	return `{"instances":[` + strings.Join(parts, ",") + `]}`
}

// TestNewDTypesMatchSession sends both rows of each model's input through
// OIP JSON and JSON instances, and compares the answers with ONNX Runtime
// run directly on the same tensor.
func TestNewDTypesMatchSession(t *testing.T) {
	requireORT(t)
	for _, m := range dtypeModels() {
		t.Run(m.model, func(t *testing.T) {
			want := direct(t, m)
			p := newPredictor(t, infer.Config{ModelPath: model(m.model)})
			ctx := context.Background()
			body, err := p.Predict(ctx, wire.MediaTypeOIP, []byte(oipBody(m, 0, 1)))
			if err != nil {
				t.Fatalf("OIP: %v", err)
			}
			checkOIPAnswer(t, body, want, 0, 1)
			body, err = p.Predict(ctx, "application/json", []byte(instancesBody(m, 0, 1)))
			if err != nil {
				t.Fatalf("instances: %v", err)
			}
			checkInstanceAnswer(t, body, want, 0, 1)
		})
	}
}

// TestNewDTypesBatched sends one-row requests of both doors' formats
// concurrently until the batcher has stacked rows of different requests
// into one run, and checks that each request got its own row back.
func TestNewDTypesBatched(t *testing.T) {
	requireORT(t)
	for _, m := range dtypeModels() {
		t.Run(m.model, func(t *testing.T) {
			want := direct(t, m)
			var mu sync.Mutex
			stacked := 0
			cfg := infer.Config{ModelPath: model(m.model), MaxWait: 20 * time.Millisecond,
				Hooks: infer.Hooks{Batch: func(items, rows int) {
					mu.Lock()
					stacked = max(stacked, items)
					mu.Unlock()
				}}}
			p := newPredictor(t, cfg)
			// An idle runner never waits, so rows stack only when requests
			// overlap a run: poll until they have.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !t.Failed(); {
				sendConcurrently(t, p, m, want)
				mu.Lock()
				done := stacked >= 2
				mu.Unlock()
				if done {
					return
				}
			}
			t.Errorf("no run stacked two requests' rows in 10 s")
		})
	}
}

// sendConcurrently sends 16 one-row requests at once, alternately OIP and
// JSON instances, alternately row 0 and row 1, and checks every answer.
func sendConcurrently(t *testing.T, p *wire.Predictor, m dtypeModel, want infer.Tensor) {
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := i % 2
			if i/2%2 == 0 {
				body, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(oipBody(m, r)))
				if err != nil {
					t.Errorf("OIP row %d: %v", r, err)
					return
				}
				checkOIPAnswer(t, body, want, r)
				return
			}
			body, err := p.Predict(context.Background(), "application/json", []byte(instancesBody(m, r)))
			if err != nil {
				t.Errorf("instances row %d: %v", r, err)
				return
			}
			checkInstanceAnswer(t, body, want, r)
		}()
	}
	wg.Wait()
}

// TestNewDTypesOutOfRange checks that a value beyond the input type's
// range is an *InputError naming the input on both formats: a 400, never
// a wrapped or infinite value.
func TestNewDTypesOutOfRange(t *testing.T) {
	requireORT(t)
	for _, m := range dtypeModels() {
		p := newPredictor(t, infer.Config{ModelPath: model(m.model)})
		for _, bad := range m.bad {
			t.Run(m.model+"/"+bad, func(t *testing.T) {
				row := "[" + bad + ",1,2,3]"
				bodies := map[string]string{
					wire.MediaTypeOIP:  fmt.Sprintf(`{"inputs":[{"name":"x","datatype":%q,"shape":[1,4],"data":%s}]}`, m.datatype, row),
					"application/json": `{"instances":[{"x":` + row + `}]}`,
				}
				for mt, body := range bodies {
					_, err := p.Predict(context.Background(), mt, []byte(body))
					var ie *infer.InputError
					if !errors.As(err, &ie) || ie.Input != "x" {
						t.Errorf("%s %s: got %v, want an *InputError naming x", mt, body, err)
					}
				}
			})
		}
	}
}

func TestOIPDatatypeNewTypes(t *testing.T) {
	tests := []struct {
		dt   infer.DType
		want string
	}{
		{infer.Int8, "INT8"}, {infer.Int16, "INT16"}, {infer.Uint16, "UINT16"}, {infer.Uint32, "UINT32"},
		{infer.Uint64, "UINT64"}, {infer.Float16, "FP16"}, {infer.BFloat16, "BF16"},
	}
	for _, tt := range tests {
		if got := wire.OIPDatatype(tt.dt); got != tt.want {
			t.Errorf("OIPDatatype(%s): got %q, want %q", tt.dt, got, tt.want)
		}
	}
}

// TestNewDTypesSparseInstance densifies a sparse instance of each new
// element type.
func TestNewDTypesSparseInstance(t *testing.T) {
	requireORT(t)
	tests := []struct{ model, value, want string }{
		{"identity_i8", "-7", `{"data":[0,0,-7,0],"shape":[4]}`},
		{"identity_u64", "18446744073709551615", `{"data":[0,0,18446744073709551615,0],"shape":[4]}`},
		{"identity_f16", "0.5", `{"data":[0,0,0.5,0],"shape":[4]}`},
		{"identity_bf16", "-2.5", `{"data":[0,0,-2.5,0],"shape":[4]}`},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			p := newPredictor(t, infer.Config{ModelPath: model(tt.model)})
			body := `{"instances":[{"x":{"shape":[4],"data":[` + tt.value + `],"indices":[[2]]}}]}`
			out, err := p.Predict(context.Background(), "application/json", []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if got := decodePredictions(t, out); len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %q, want [%s]", got, tt.want)
			}
		})
	}
}
