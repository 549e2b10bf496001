package wire_test

import (
	"context"
	"encoding/json"
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
			_, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(tt.body))
			if !isInputError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want an *InputError containing %q", err, tt.want)
			}
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
		_, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(tc.body))
		if !isInputError(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got error %v, want an *InputError containing %q", err, tc.want)
		}
	}
}
