package wire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

func TestOIPCodecMatchesSession(t *testing.T) {
	requireORT(t)
	tests := []struct {
		model, body string
		in          infer.Tensor
	}{
		{"add_f32", `{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[[1,2,3,4],[5,6,7,8.5]]}]}`,
			infer.Tensor{DType: infer.Float32, Shape: []int64{2, 4}, Data: []float32{1, 2, 3, 4, 5, 6, 7, 8.5}}},
		{"add_f64", `{"inputs":[{"name":"x","datatype":"FP64","shape":[1,4],"data":[1,2,3,0.25]}]}`,
			infer.Tensor{DType: infer.Float64, Shape: []int64{1, 4}, Data: []float64{1, 2, 3, 0.25}}},
		{"add_i32", `{"inputs":[{"name":"x","datatype":"INT32","shape":[1,4],"data":[1,-2,3,4]}]}`,
			infer.Tensor{DType: infer.Int32, Shape: []int64{1, 4}, Data: []int32{1, -2, 3, 4}}},
		{"add_i64", `{"inputs":[{"name":"x","datatype":"INT64","shape":[3,4],"data":[1,2,3,4,5,6,7,8,9,10,11,12]}]}`,
			infer.Tensor{DType: infer.Int64, Shape: []int64{3, 4}, Data: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}},
		{"identity_u8", `{"inputs":[{"name":"x","datatype":"UINT8","shape":[1,4],"data":[0,1,254,255]}]}`,
			infer.Tensor{DType: infer.Uint8, Shape: []int64{1, 4}, Data: []uint8{0, 1, 254, 255}}},
		{"not_bool", `{"inputs":[{"name":"x","datatype":"BOOL","shape":[2,4],"data":[true,false,true,false,false,false,true,true]}]}`,
			infer.Tensor{DType: infer.Bool, Shape: []int64{2, 4}, Data: []bool{true, false, true, false, false, false, true, true}}},
	}
	for _, tt := range tests {
		for _, batched := range []bool{false, true} {
			name := tt.model
			if batched {
				name += "/alreadyBatched"
			}
			t.Run(name, func(t *testing.T) {
				sess := infertest.NewSession(t, model(tt.model))
				want, err := sess.Run([]infer.Tensor{tt.in})
				if err != nil {
					t.Fatal(err)
				}
				p := newPredictor(t, infer.Config{ModelPath: model(tt.model), InputAlreadyBatched: batched})
				body, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(tt.body))
				if err != nil {
					t.Fatal(err)
				}
				var got infertest.OIPResponse
				if err := json.Unmarshal(body, &got); err != nil || len(got.Outputs) != 1 {
					t.Fatalf("answer %s: %v", body, err)
				}
				o := got.Outputs[0]
				wantData, _ := json.Marshal(want[0].Data)
				if tt.in.DType == infer.Uint8 { // json.Marshal writes []uint8 as base64
					wantData = []byte("[0,1,254,255]")
				}
				if o.Name != "y" || o.Datatype != wire.OIPDatatype(tt.in.DType) || !reflect.DeepEqual(o.Shape, want[0].Shape) || string(o.Data) != string(wantData) {
					t.Errorf("got %s, want y %v %s", body, want[0].Shape, wantData)
				}
			})
		}
	}
}

func TestOIPCodecTwoInputsTwoOutputs(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("two_io")})
	body := `{"inputs":[{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]},{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]}]}`
	out, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_name":"m","model_version":"1","outputs":[{"name":"sum","datatype":"FP32","shape":[2,3],"data":[2,3,4,6,7,8]},{"name":"prod","datatype":"FP32","shape":[2,3],"data":[1,2,3,8,10,12]}]}`
	if string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}

// TestOIPCodecEnvelope checks the parts of the answer the request asks
// for: its id comes back, and only the outputs it names, in model order.
func TestOIPCodecEnvelope(t *testing.T) {
	e := newEngine(t, infer.Config{ModelPath: model("two_io")})
	p := wire.NewPredictor(e, wire.Model{Name: "two", Version: "7"})
	inputs := `"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"data":[1,2,3]},{"name":"b","datatype":"FP32","shape":[1,3],"data":[2,2,2]}]`
	sum := `{"name":"sum","datatype":"FP32","shape":[1,3],"data":[3,4,5]}`
	prod := `{"name":"prod","datatype":"FP32","shape":[1,3],"data":[2,4,6]}`
	tests := []struct{ name, body, want string }{
		{"id and one output", `{"id":"r-1",` + inputs + `,"outputs":[{"name":"prod"}]}`,
			`{"model_name":"two","model_version":"7","id":"r-1","outputs":[` + prod + `]}`},
		{"outputs in model order", `{` + inputs + `,"outputs":[{"name":"prod"},{"name":"sum"}]}`,
			`{"model_name":"two","model_version":"7","outputs":[` + sum + `,` + prod + `]}`},
		{"no outputs named: all", `{"id":"","outputs":[],` + inputs + `}`,
			`{"model_name":"two","model_version":"7","outputs":[` + sum + `,` + prod + `]}`},
		{"id escaped", `{"id":"a\"b",` + inputs + `,"outputs":[{"name":"sum"}]}`,
			`{"model_name":"two","model_version":"7","id":"a\"b","outputs":[` + sum + `]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got  %s\nwant %s", out, tt.want)
			}
		})
	}
}

func TestOIPCodecErrors(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("add_f32")})
	tests := []struct{ name, body, want string }{
		{"malformed", `{"inputs":`, "malformed OIP request"},
		{"no inputs", `{"inputs":[]}`, `no "inputs"`},
		{"dtype", `{"inputs":[{"name":"x","datatype":"FP64","shape":[1,4],"data":[1,2,3,4]}]}`, `datatype "FP64" does not match the model's FP32`},
		{"shape", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`, "shape [1 3] does not match model [-1 4]"},
		{"count", `{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[1,2,3,4]}]}`, "data has 4 elements, shape [2 4] needs 8"},
		{"misspelt", `{"inputs":[{"name":"z","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`, `input "z": unknown input: the model's inputs are [x]`},
		{"unknown", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},{"name":"z","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`, `input "z": unknown input`},
		{"string", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":["a",2,3,4]}]}`, `input "x": data: wrong dtype: a string where a float32 is expected`},
		{"zero rows", `{"inputs":[{"name":"x","datatype":"FP32","shape":[0,4],"data":[]}]}`, "batch dim is 0"},
		{"no shape", `{"inputs":[{"name":"x","datatype":"FP32","data":[1,2,3,4]}]}`, `input "x": "shape" is required`},
		{"no name", `{"inputs":[{"datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`, `inputs[0]: "name" is required`},
		{"no datatype", `{"inputs":[{"name":"x","shape":[1,4],"data":[1,2,3,4]}]}`, `input "x": "datatype" is required`},
		{"no data", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4]}]}`, `input "x": "data" is required`},
		{"unknown output", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"z"}]}`, `unknown output "z": the model's outputs are [y]`},
		{"id not a string", `{"id":7,"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`, "malformed OIP request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantPredictInputError(t, p, wire.MediaTypeOIP, []byte(tt.body), tt.want)
		})
	}
}

// TestOIPMissingInput: of a model's two inputs, the one a request leaves
// out is named as missing; a name the model does not have is unknown,
// even when a model input is missing too.
func TestOIPMissingInput(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("divmod_i32")})
	for _, tc := range []struct{ body, want string }{
		{`{"inputs":[{"name":"a","datatype":"INT32","shape":[1,4],"data":[1,2,3,4]}]}`, `input "b": missing: the model's inputs are [a b]`},
		{`{"inputs":[{"name":"a","datatype":"INT32","shape":[1,4],"data":[1,2,3,4]},{"name":"bb","datatype":"INT32","shape":[1,4],"data":[1,2,3,4]}]}`,
			`input "bb": unknown input: the model's inputs are [a b]`},
	} {
		wantPredictInputError(t, p, wire.MediaTypeOIP, []byte(tc.body), tc.want)
	}
}

// oipOutput is output j of an OIP answer with its data decoded into a
// value of want's type.
func oipOutput(tb testing.TB, answer []byte, j int, data any) infertest.OIPOutput {
	tb.Helper()
	var resp infertest.OIPResponse
	if err := json.Unmarshal(answer, &resp); err != nil || j >= len(resp.Outputs) {
		tb.Fatalf("answer %s: %v", answer, err)
	}
	o := resp.Outputs[j]
	if err := json.Unmarshal(o.Data, data); err != nil {
		tb.Fatalf("output %q data %s: %v", o.Name, o.Data, err)
	}
	return o
}

// TestOIPStrings sends BYTES tensors through the OIP codec and the real
// ONNX Runtime: JSON strings in, JSON strings out, batched by rows or
// whole, and Casts between BYTES and FP32.
func TestOIPStrings(t *testing.T) {
	requireORT(t)
	tests := []struct {
		name, model, body string
		batched           bool
		datatype          string
		shape             []int64
		want              any
	}{
		{"identity rows", "identity_str",
			`{"id":"s","inputs":[{"name":"x","datatype":"BYTES","shape":[3,2],"data":[["a","é"],["","q\"uote\\\n"],["\u00e9","|"]]}]}`,
			false, "BYTES", []int64{3, 2}, []string{"a", "é", "", "q\"uote\\\n", "é", "|"}},
		{"identity alreadyBatched", "identity_str",
			`{"inputs":[{"name":"x","datatype":"BYTES","shape":[2,2],"data":["a","b","c","d"]}]}`,
			true, "BYTES", []int64{2, 2}, []string{"a", "b", "c", "d"}},
		{"string to float", "cast_str_f32",
			`{"inputs":[{"name":"x","datatype":"BYTES","shape":[2,3],"data":["1.5","-2","1e3","0","NaN","7"]}]}`,
			false, "FP32", []int64{2, 3}, []any{1.5, -2.0, 1000.0, 0.0, nil, 7.0}},
		{"float to string", "cast_f32_str",
			`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1.5,-2,0]}]}`,
			false, "BYTES", []int64{1, 3}, []string{"1.5", "-2", "0"}},
		{"rank-0 output", "pick_str",
			`{"inputs":[{"name":"x","datatype":"BYTES","shape":[3],"data":["zero","one","two"]},{"name":"i","datatype":"INT64","shape":[],"data":2}]}`,
			false, "BYTES", []int64{}, []string{"two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPredictor(t, infer.Config{ModelPath: model(tt.model), InputAlreadyBatched: tt.batched})
			answer, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(reflect.TypeOf(tt.want))
			o := oipOutput(t, answer, 0, got.Interface())
			if o.Datatype != tt.datatype || !reflect.DeepEqual(o.Shape, tt.shape) || !reflect.DeepEqual(got.Elem().Interface(), tt.want) {
				t.Errorf("got %s %v %v, want %s %v %v (answer %s)", o.Datatype, o.Shape, got.Elem().Interface(), tt.datatype, tt.shape, tt.want, answer)
			}
		})
	}
}

func TestOIPStringErrors(t *testing.T) {
	requireORT(t)
	p := newPredictor(t, infer.Config{ModelPath: model("identity_str")})
	f := newPredictor(t, infer.Config{ModelPath: model("add_f32")})
	tests := []struct {
		name string
		p    *wire.Predictor
		body string
		want string
	}{
		{"number for BYTES", p, `{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"data":["a",2]}]}`,
			`input "x": data: wrong dtype: 2 is not a string (BYTES elements are JSON strings)`},
		{"null for BYTES", p, `{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"data":[null,"a"]}]}`,
			`input "x": data: wrong dtype: null is not a string`},
		{"bool for BYTES", p, `{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"data":[["a",true]]}]}`,
			`input "x": data: wrong dtype: true is not a string`},
		{"FP32 for BYTES", p, `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}]}`,
			`datatype "FP32" does not match the model's BYTES`},
		{"BYTES for FP32", f, `{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,4],"data":["1","2","3","4"]}]}`,
			`datatype "BYTES" does not match the model's FP32`},
		{"string for FP32", f, `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,"4"]}]}`,
			`input "x": data: wrong dtype: a string where a float32 is expected`},
		{"string count", p, `{"inputs":[{"name":"x","datatype":"BYTES","shape":[2,2],"data":["a","b","c"]}]}`,
			`data has 3 elements, shape [2 2] needs 4`},
		{"NUL byte", p, `{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"data":["a","b\u0000c"]}]}`,
			`NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantPredictInputError(t, tt.p, wire.MediaTypeOIP, []byte(tt.body), tt.want)
		})
	}
}

// TestInstancesStrings: the JSON instances format carries a string input
// as JSON strings (nested arrays for a tensor, one string for a scalar),
// never split on '|' nor read as an image, and answers strings as JSON
// strings.
func TestInstancesStrings(t *testing.T) {
	requireORT(t)
	p := newPredictor(t, infer.Config{ModelPath: model("identity_str")})
	answer, err := p.Predict(context.Background(), wire.MediaTypeJSON, []byte(`{"instances":[{"x":["a|b","é"]},{"x":["", "aGVsbG8="]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var preds struct{ Predictions []string }
	if err := json.Unmarshal(answer, &preds); err != nil || len(preds.Predictions) != 2 {
		t.Fatalf("answer %s: %v", answer, err)
	}
	for i, want := range []string{`{"data":["a|b","é"],"shape":[2]}`, `{"data":["","aGVsbG8="],"shape":[2]}`} {
		var v struct{ Value string }
		if err := json.Unmarshal([]byte(preds.Predictions[i]), &v); err != nil || v.Value != want {
			t.Errorf("prediction %d: got %s (%v), want value %s", i, preds.Predictions[i], err, want)
		}
	}

	inputs := []infer.IO{{Name: "x", DType: infer.String, Shape: []int64{-1, 2}}, {Name: "s", DType: infer.String, Shape: []int64{-1}}}
	recs, err := wire.DecodeInstances([]byte(`{"instances":[{"x":["a","b"],"s":"one|two"}]}`), inputs, false)
	if err != nil {
		t.Fatal(err)
	}
	if x := recs[0][0]; !reflect.DeepEqual(x, infer.Tensor{DType: infer.String, Shape: []int64{2}, Data: []string{"a", "b"}}) {
		t.Errorf("x: got %+v, want the [2] strings a, b", x)
	}
	want := infer.Tensor{DType: infer.String, Shape: []int64{}, Data: []string{"one|two"}}
	if s := recs[0][1]; !reflect.DeepEqual(s, want) {
		t.Errorf("s: got %+v, want %+v", s, want)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"instances":[{"x":["a",2],"s":"b"}]}`, `input "x": wrong dtype: 2 is not a string (BYTES elements are JSON strings)`},
		{`{"instances":[{"x":["a","b"],"s":null}]}`, `input "s": wrong dtype: null is not a string`},
		{`{"instances":[{"x":["a",["b"]],"s":"c"}]}`, `input "x": ragged array`},
		{`{"instances":[{"x":"a","s":"c"}]}`, `input "x": shape [] does not match model [-1 2]`},
		{`{"instances":[{"x":[["a","b"]],"s":"c"}]}`, `input "x": shape [1 2] does not match model [-1 2]`},
		{`{"instances":[{"x":{"shape":[2],"data":["a"],"indices":[1]},"s":"c"}]}`, ""},
	} {
		_, err := wire.DecodeInstances([]byte(tc.body), inputs, false)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: got %v, want nil", tc.body, err)
			}
			continue
		}
		if !isInputError(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an *InputError containing %q", tc.body, err, tc.want)
		}
	}
}

// TestRedisStrings: a Redis Arrow utf8 value for a string input is its
// '|'-separated strings (the original's list of strings), not an image.
func TestRedisStrings(t *testing.T) {
	row := infer.IO{Name: "x", DType: infer.String, Shape: []int64{-1, 2}}
	one := infer.IO{Name: "x", DType: infer.String, Shape: []int64{-1}}
	tests := []struct {
		name  string
		value string
		in    infer.IO
		want  infer.Tensor
		err   string
	}{
		{"list", "a|b", row, infer.Tensor{DType: infer.String, Shape: []int64{2}, Data: []string{"a", "b"}}, ""},
		{"empty parts", "|", row, infer.Tensor{DType: infer.String, Shape: []int64{2}, Data: []string{"", ""}}, ""},
		{"scalar", "hello", one, infer.Tensor{DType: infer.String, Shape: []int64{}, Data: []string{"hello"}}, ""},
		{"too many", "a|b|c", row, infer.Tensor{}, "3 '|'-joined strings make a string tensor of shape [3], which does not match model [-1 2]"},
		{"list for a scalar", "a|b", one, infer.Tensor{}, "does not match model [-1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := wire.DecodeRedisArrow(arrowB64(t, []string{"x"}, utf8Col(tt.value)), ioInfo(tt.in), false)
			if tt.err != "" {
				if !isInputError(err) || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), `input "x"`) {
					t.Fatalf("got %v, want an *InputError naming x containing %q", err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(rec[0], tt.want) {
				t.Fatalf("got %+v, %v; want %+v", rec, err, tt.want)
			}
		})
	}
}

// binBody frames a JSON header and the raw tensors after it.
func binBody(header string, tensors ...[]byte) []byte {
	body := []byte(header)
	for _, t := range tensors {
		body = append(body, t...)
	}
	return wire.FrameOIPBinary(len(header), body)
}

// TestOIPBinaryMatchesJSON: binary inputs with JSON outputs answer
// exactly what the JSON codec answers for the same tensors.
func TestOIPBinaryMatchesJSON(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("two_io")})
	jsonBody := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}]}`
	want, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(jsonBody))
	if err != nil {
		t.Fatal(err)
	}
	a := wire.AppendRaw(nil, f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6))
	header := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"parameters":{"binary_data_size":24}},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}]}`
	got, err := p.Predict(context.Background(), wire.MediaTypeOIPBinary, binBody(header, a))
	if err != nil {
		t.Fatal(err)
	}
	h, tensors, err := wire.SplitOIPBinary(got)
	if err != nil || tensors != nil || string(h) != string(want) {
		t.Errorf("got %s + %d raw bytes (%v), want %s", h, len(tensors), err, want)
	}
}

// TestOIPBinaryOutputs: binary outputs, one asked by name and all by
// binary_data_output, for FP16 (which JSON can only round) and FP32.
func TestOIPBinaryOutputs(t *testing.T) {
	requireORT(t)
	in := infer.Tensor{DType: infer.Float16, Shape: []int64{2, 4}, Data: []infer.F16{0x3c00, 0xc000, 0x7bff, 0, 1, 2, 3, 0x8000}}
	tests := []struct {
		name, model, header string
		wantJSON            bool // the output stays in the header
	}{
		{"by name", "identity_f16", `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, false},
		{"all", "identity_f16", `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":true}}`, false},
		{"output says no", "identity_f16", `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"outputs":[{"name":"y","parameters":{"binary_data":false}}],"parameters":{"binary_data_output":true}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := infertest.NewSession(t, model(tt.model)).Run([]infer.Tensor{in})
			if err != nil {
				t.Fatal(err)
			}
			h, o, tensors := predictBinary(t, tt.model, tt.header, wire.AppendRaw(nil, in))
			if tt.wantJSON {
				if tensors != nil || o.Data == nil {
					t.Fatalf("got %s + %d raw bytes, want y in JSON", h, len(tensors))
				}
				return
			}
			if o.Data != nil || o.Parameters.BinaryDataSize != 16 || len(tensors) != 16 {
				t.Fatalf("got %s + %d raw bytes, want y with binary_data_size 16 and no data", h, len(tensors))
			}
			got, err := wire.DecodeRaw(tensors, infer.Float16, o.Shape, o.Name)
			if err != nil || !reflect.DeepEqual(got.Data, want[0].Data) || o.Datatype != "FP16" {
				t.Errorf("got %s %v (%v), want FP16 %v", o.Datatype, got.Data, err, want[0].Data)
			}
		})
	}
}

func TestOIPBinaryErrors(t *testing.T) {
	requireORT(t)
	raw16 := make([]byte, 16)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"no frame", []byte{1, 2}, "has no header length"},
		{"header past body", wire.FrameOIPBinary(100, []byte(`{}`)), "Inference-Header-Content-Length is 100 but the body has only 2 bytes"},
		{"malformed header", binBody(`{"inputs":`, raw16), "malformed OIP request header"},
		{"size past body", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":20}}]}`, raw16), "binary_data_size 20 runs past the body: only 16 bytes"},
		{"bytes left over", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}`, raw16, []byte{1}), "17 bytes of binary data after the JSON header, the inputs' binary_data_size add up to 16"},
		{"size not shape", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":12}}]}`, raw16[:12]), "raw data has 12 bytes, FP32 of shape [1 4] needs 16"},
		{"negative size", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":-1}}]}`), "binary_data_size -1 is negative"},
		{"size not int", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":"16"}}]}`, raw16), "malformed OIP request header"},
		{"data and size", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4],"parameters":{"binary_data_size":16}}]}`, raw16), "has both"},
		{"neither", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4]}]}`), `"data" or parameters.binary_data_size is required`},
		{"bytes", binBody(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,4],"parameters":{"binary_data_size":16}}]}`, raw16), `datatype "BYTES" does not match the model's FP32`},
		{"unknown output", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}],"outputs":[{"name":"z","parameters":{"binary_data":true}}]}`, raw16), `unknown output "z"`},
	}
	p := newPredictor(t, infer.Config{ModelPath: model("add_f32")})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantPredictInputError(t, p, wire.MediaTypeOIPBinary, tt.body, tt.want)
		})
	}
}

// binOutput is one output in the header of a binary answer, with its
// raw size.
type binOutput struct {
	Name       string
	Datatype   string
	Shape      []int64
	Data       json.RawMessage
	Parameters struct {
		BinaryDataSize int `json:"binary_data_size"`
	}
}

// predictBinary sends header and raw as an OIP binary request to a
// predictor of the committed model modelName and returns the answer's
// JSON header, its one output and the raw bytes after the header.
func predictBinary(t *testing.T, modelName, header string, raw []byte) ([]byte, binOutput, []byte) {
	t.Helper()
	p := newPredictor(t, infer.Config{ModelPath: model(modelName)})
	out, err := p.Predict(context.Background(), wire.MediaTypeOIPBinary, binBody(header, raw))
	if err != nil {
		t.Fatal(err)
	}
	h, tensors, err := wire.SplitOIPBinary(out)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct{ Outputs []binOutput }
	if err := json.Unmarshal(h, &resp); err != nil || len(resp.Outputs) != 1 {
		t.Fatalf("header %s: %v", h, err)
	}
	return h, resp.Outputs[0], tensors
}

// TestOIPBinaryBytes: a BYTES input's binary_data_size is its framed
// size (every element's 4-byte length and bytes), and a BYTES output
// asked for in binary comes back framed the same way.
func TestOIPBinaryBytes(t *testing.T) {
	requireORT(t)
	tests := []struct {
		name, model string
		in          infer.Tensor
		outDType    string
	}{
		{"identity", "identity_str", str([]int64{2, 2}, "a", "", "é\xff", strings.Repeat("z", 300)), "BYTES"},
		{"string to float", "cast_str_f32", str([]int64{1, 3}, "1.5", "-2", "1e3"), "FP32"},
		{"float to string", "cast_f32_str", f32([]int64{2, 3}, 1.5, -2, 0, 4, 5, 6), "BYTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := infertest.NewSession(t, model(tt.model)).Run([]infer.Tensor{tt.in})
			if err != nil {
				t.Fatal(err)
			}
			raw := wire.AppendRaw(nil, tt.in)
			header := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":%q,"shape":%s,"parameters":{"binary_data_size":%d}}],"parameters":{"binary_data_output":true}}`,
				wire.OIPDatatype(tt.in.DType), jsonOf(t, tt.in.Shape), len(raw))
			h, o, tensors := predictBinary(t, tt.model, header, raw)
			if o.Data != nil || o.Datatype != tt.outDType || o.Parameters.BinaryDataSize != len(tensors) {
				t.Fatalf("got %s + %d raw bytes, want %s with binary_data_size %d and no data", h, len(tensors), tt.outDType, len(tensors))
			}
			dt, _ := wire.OIPDType(o.Datatype)
			got, err := wire.DecodeRaw(tensors, dt, o.Shape, o.Name)
			if err != nil || !reflect.DeepEqual(got.Shape, want[0].Shape) || !reflect.DeepEqual(got.Data, want[0].Data) {
				t.Errorf("got %v %q (%v), want %v %q", got.Shape, got.Data, err, want[0].Shape, want[0].Data)
			}
		})
	}
}

func jsonOf(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestOIPBinaryBytesErrors(t *testing.T) {
	requireORT(t)
	two := wire.AppendRaw(nil, str([]int64{1, 2}, "ab", "c"))
	nul := wire.AppendRaw(nil, str([]int64{1, 2}, "a\x00", "b"))
	header := func(size int) string {
		return fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":%d}}]}`, size)
	}
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"size cuts an element", binBody(header(len(two)-1), two[:len(two)-1]), `input "x": raw BYTES element 1 of 2 has length 1, past the end of the data: only 0 bytes are left`},
		{"element past the size", binBody(header(8), two[:8]), `input "x": raw BYTES element 1 of 2: its 4-byte length is cut short at byte 6 of 8`},
		{"extra element", binBody(header(len(two)+4), two, []byte{0, 0, 0, 0}), `input "x": raw data has 4 bytes after the 2 BYTES elements of shape [1 2]`},
		{"too few elements", binBody(header(6), two[:6]), `input "x": raw data has 6 bytes, too few for the 2 BYTES elements`},
		{"NUL", binBody(header(len(nul)), nul), "NUL byte"},
	}
	p := newPredictor(t, infer.Config{ModelPath: model("identity_str")})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantPredictInputError(t, p, wire.MediaTypeOIPBinary, tt.body, tt.want)
		})
	}
}
