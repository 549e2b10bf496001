package wire_test

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

var (
	imgInputs = []infer.IO{{Name: "x", DType: infer.Float32, Shape: []int64{-1, 3, 224, 224}}}
	twoInputs = []infer.IO{
		{Name: "a", DType: infer.Float32, Shape: []int64{-1, 3}},
		{Name: "b", DType: infer.Int64, Shape: []int64{-1, 2}},
	}
	mixedInputs = []infer.IO{
		{Name: "f", DType: infer.Float64, Shape: []int64{-1, -1}},
		{Name: "i", DType: infer.Int32, Shape: []int64{-1, 2}},
		{Name: "u", DType: infer.Uint8, Shape: []int64{-1, 2}},
		{Name: "t", DType: infer.Bool, Shape: []int64{-1, 2}},
	}
)

func TestDecodeInstances(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		inputs  []infer.IO
		batched bool
		want    [][]infer.Tensor
	}{
		{
			name:   "by name, model order",
			body:   `{"instances":[{"b":[1,2],"a":[0.5,1.5,-2e1]}]}`,
			inputs: twoInputs,
			want: [][]infer.Tensor{{
				{DType: infer.Float32, Shape: []int64{3}, Data: []float32{0.5, 1.5, -20}},
				{DType: infer.Int64, Shape: []int64{2}, Data: []int64{1, 2}},
			}},
		},
		{
			name:   "by key order when no name matches",
			body:   `{"instances":[ { "x" : [ 1 , 2 , 3 ] , "y" : [4,5] } ]}`,
			inputs: twoInputs,
		},
		{
			name:   "all dtypes, two instances, other keys ignored",
			body:   `{"meta":{"k":[1,"s",null,true]},"instances":[{"f":[1.25],"i":[3,-4.0],"u":[0,255],"t":[true,0]},{"f":[2],"i":[5,6],"u":[1,2],"t":[false,2]}]}`,
			inputs: mixedInputs,
			want: [][]infer.Tensor{
				{
					{DType: infer.Float64, Shape: []int64{1}, Data: []float64{1.25}},
					{DType: infer.Int32, Shape: []int64{2}, Data: []int32{3, -4}},
					{DType: infer.Uint8, Shape: []int64{2}, Data: []uint8{0, 255}},
					{DType: infer.Bool, Shape: []int64{2}, Data: []bool{true, false}},
				},
				{
					{DType: infer.Float64, Shape: []int64{1}, Data: []float64{2}},
					{DType: infer.Int32, Shape: []int64{2}, Data: []int32{5, 6}},
					{DType: infer.Uint8, Shape: []int64{2}, Data: []uint8{1, 2}},
					{DType: infer.Bool, Shape: []int64{2}, Data: []bool{false, true}},
				},
			},
		},
		{
			name:   "sparse, indices per dim",
			body:   `{"instances":[{"a":{"shape":[3],"data":[7,8],"indices":[[0,2]]},"b":{"shape":[2],"data":[9],"indices":[[1]]}}]}`,
			inputs: twoInputs,
			want: [][]infer.Tensor{{
				{DType: infer.Float32, Shape: []int64{3}, Data: []float32{7, 0, 8}},
				{DType: infer.Int64, Shape: []int64{2}, Data: []int64{0, 9}},
			}},
		},
		{
			name:    "already batched",
			body:    `{"instances":[{"a":[[1,2,3],[4,5,6]],"b":[[1,2],[3,4]]}]}`,
			inputs:  twoInputs,
			batched: true,
			want: [][]infer.Tensor{{
				{DType: infer.Float32, Shape: []int64{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}},
				{DType: infer.Int64, Shape: []int64{2, 2}, Data: []int64{1, 2, 3, 4}},
			}},
		},
	}
	tests[1].want = [][]infer.Tensor{{
		{DType: infer.Float32, Shape: []int64{3}, Data: []float32{1, 2, 3}},
		{DType: infer.Int64, Shape: []int64{2}, Data: []int64{4, 5}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wire.DecodeInstances([]byte(tt.body), tt.inputs, tt.batched)
			if err != nil {
				t.Fatalf("DecodeInstances: got error %v, want nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeInstances:\ngot  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeInstancesErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		inputs []infer.IO
		want   []string // substrings of the message
	}{
		{"not JSON", `{"instances":[{"a":[1,2,3]`, twoInputs, []string{"invalid JSON", `{"instances"`}},
		{"garbage", `hello`, twoInputs, []string{"invalid JSON"}},
		{"trailing data", `{"instances":[]} x`, twoInputs, []string{"invalid JSON"}},
		{"no instances", `{"inputs":[]}`, twoInputs, []string{`no "instances"`}},
		{"empty instances", `{"instances":[]}`, twoInputs, []string{`no "instances"`, "empty"}},
		{"instance not object", `{"instances":[[1,2]]}`, twoInputs, []string{"instance 0", "not an object"}},
		{"wrong shape", `{"instances":[{"x":[[1,2,3,4],[5,6,7,8],[9,10,11,12]]}]}`, imgInputs, []string{`input "x": shape [3 4] does not match model [-1 3 224 224]`}},
		{"float for int", `{"instances":[{"a":[1,2,3],"b":[1.5,2]}]}`, twoInputs, []string{"instance 0", `input "b"`, "wrong dtype", "1.5 is not an int64"}},
		{"out of range uint8", `{"instances":[{"f":[1],"i":[1,2],"u":[1,256],"t":[true,false]}]}`, mixedInputs, []string{`input "u"`, "wrong dtype", "256"}},
		{"null element", `{"instances":[{"a":[1,null,3],"b":[1,2]}]}`, twoInputs, []string{`input "a"`, "wrong dtype"}},
		{"ragged", `{"instances":[{"a":[[1,2],[3]],"b":[1,2]}]}`, twoInputs, []string{`input "a"`, "ragged"}},
		{"ragged depth", `{"instances":[{"a":[[1,2],3],"b":[1,2]}]}`, twoInputs, []string{"ragged"}},
		{"unknown input", `{"instances":[{"a":[1,2,3],"c":[1,2]}]}`, twoInputs, []string{`input "c"`, "unknown input", "model inputs: a, b"}},
		{"missing input", `{"instances":[{"a":[1,2,3]}]}`, twoInputs, []string{`input "b"`, "missing"}},
		{"extra unnamed", `{"instances":[{"p":[1],"q":[1],"r":[1]}]}`, twoInputs, []string{"got 3 inputs, model has 2"}},
		{"duplicate key", `{"instances":[{"a":[1,2,3],"a":[1,2,3]}]}`, twoInputs, []string{"given twice"}},
		{"image string", `{"instances":[{"x":"aGVsbG8="}]}`, imgInputs, []string{`input "x"`, "undecodable image"}},
		{"second instance", `{"instances":[{"a":[1,2,3],"b":[1,2]},{"a":[1,2],"b":[1,2]}]}`, twoInputs, []string{"instance 1", `input "a"`, "shape [2]"}},
		{"too deep", `{"instances":[{"a":` + strings.Repeat("[", 100) + `]}]}`, twoInputs, []string{"deeper"}},
		{"sparse bad index", `{"instances":[{"a":{"shape":[3],"data":[1],"indices":[[3]]},"b":[1,2]}]}`, twoInputs, []string{"out of range"}},
		{"sparse missing key", `{"instances":[{"a":{"shape":[3],"data":[1]},"b":[1,2]}]}`, twoInputs, []string{"indices"}},
		{"hex number", `{"instances":[{"a":[0x1,2,3],"b":[1,2]}]}`, twoInputs, []string{"invalid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeInstances([]byte(tt.body), tt.inputs, false)
			if !isInputError(err) {
				t.Fatalf("DecodeInstances: got error %v (%T), want *InputError", err, err)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("DecodeInstances: got error %q, want it to contain %q", err, s)
				}
			}
		})
	}
}

func FuzzDecodeInstances(f *testing.F) {
	for _, s := range []string{
		`{"instances":[{"f":[1.5,2],"i":[1,2],"u":[3,4],"t":[true,false]}]}`,
		`{"instances":[{"a":[1,2,3],"b":[1,2]}]}`,
		`{"instances":[{"a":{"shape":[3],"data":[7,8],"indices":[[0,2]]},"b":[1,2]}]}`,
		`{"instances":[{"x":"aGVsbG8="}]}`,
		`{"instances":[{"a":[[1,2],[3]],"b":[1,2]}]}`,
		`{"k":"\u00e9\"","instances":[]}`,
		`[`, `{`, `{"instances":[{"a":[1e400,-0,2]}]}`,
		// scalars, zero-size dims, lengths that do not match
		`{"instances":[{"a":1,"b":[1,2]}]}`, `{"instances":[{"f":2.5,"i":3,"u":4,"t":true}]}`,
		`{"instances":[{"a":[],"b":[]}]}`, `{"instances":[{"f":[[]],"i":[[],[]],"u":[],"t":[]}]}`,
		`{"instances":[{"a":[1,2,3,4,5],"b":[1]}]}`, `{"instances":[{"a":{"shape":[0],"data":[],"indices":[[]]},"b":[1,2]}]}`,
		`{"instances":[{"a":{"shape":[],"data":[1],"indices":[[0]]},"b":[1,2]}]}`,
		// strings: nested, escaped, '|', a number among them, sparse
		`{"instances":[{"s":[["a","\u00e9"],["","q\"|"]],"k":"one"}]}`,
		`{"instances":[{"s":["a",1],"k":null},{"s":{"shape":[2],"data":["x"],"indices":[1]},"k":"b"}]}`,
	} {
		f.Add([]byte(s), false)
	}
	stringInputs := []infer.IO{{Name: "s", DType: infer.String, Shape: []int64{-1, -1, 2}}, {Name: "k", DType: infer.String, Shape: []int64{-1}}}
	f.Fuzz(func(t *testing.T, body []byte, batched bool) {
		for _, inputs := range [][]infer.IO{twoInputs, mixedInputs, stringInputs} {
			recs, err := wire.DecodeInstances(body, inputs, batched)
			if err != nil {
				if !isInputError(err) {
					t.Fatalf("got error %v (%T), want *InputError", err, err)
				}
				continue
			}
			for _, rec := range recs {
				if len(rec) != len(inputs) {
					t.Fatalf("got %d tensors, want %d", len(rec), len(inputs))
				}
				for j, tensor := range rec {
					n := int64(1)
					for _, d := range tensor.Shape {
						n *= d
					}
					if tensor.DType != inputs[j].DType || int64(tensor.Len()) != n {
						t.Fatalf("input %d: got dtype %s len %d shape %v, want dtype %s", j, tensor.DType, tensor.Len(), tensor.Shape, inputs[j].DType)
					}
				}
			}
		}
	})
}

// resnetBody is one ResNet-50 instance: 3*224*224 = 150,528 numbers.
func resnetBody() []byte {
	return imageBody(func(v int) string { return strconv.FormatFloat(float64(v%100000)/997.0, 'g', 7, 32) })
}

// imageBody is one ResNet-50 instance {"x": [3][224][224]} whose numbers
// num writes from a pseudo-random v.
func imageBody(num func(v int) string) []byte {
	var b strings.Builder
	b.WriteString(`{"instances":[{"x":[`)
	v := 0
	for c := range 3 {
		if c > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for h := range 224 {
			if h > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			for w := range 224 {
				if w > 0 {
					b.WriteByte(',')
				}
				v = (v*1103515245 + 12345) & 0x7fffffff
				b.WriteString(num(v))
			}
			b.WriteByte(']')
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}]}`)
	return []byte(b.String())
}

func TestDecodeResNetInstance(t *testing.T) {
	recs, err := wire.DecodeInstances(resnetBody(), imgInputs, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := recs[0][0].Shape, []int64{3, 224, 224}; !reflect.DeepEqual(got, want) {
		t.Errorf("shape: got %v, want %v", got, want)
	}
	if got := recs[0][0].Len(); got != 150528 {
		t.Errorf("len: got %d, want 150528", got)
	}
}

func BenchmarkDecodeInstances(b *testing.B) { benchDecodeInstances(b, resnetBody()) }

// TestDecodeFloat32Row pins the float32 rows' values, on the short plain
// numbers the row loop converts itself and on every other kind, to
// strconv's at 32 bits, and the refusals to a clear *InputError.
func TestDecodeFloat32Row(t *testing.T) {
	inputs := []infer.IO{{Name: "x", DType: infer.Float32, Shape: []int64{-1, -1}}}
	good := []string{"0", "-0", "255", "0.5", "-12.25", "0.05", "0.1", "16777216", "16777217", "123456789",
		"1e3", "1E3", "-1.25e-2", "1.401298464324817e-45", "1e-46", "3.4028235e38", "0.000000001", "1.0",
		"12345678901234567890", "0.1234567890123", " 7", "8 "}
	var body strings.Builder
	body.WriteString(`{"instances":[{"x":[`)
	for i, s := range good {
		if i > 0 {
			body.WriteString(",\n ")
		}
		body.WriteString(s)
	}
	body.WriteString(`]}]}`)
	recs, err := wire.DecodeInstances([]byte(body.String()), inputs, false)
	if err != nil {
		t.Fatalf("DecodeInstances: %v", err)
	}
	got := recs[0][0].Data.([]float32)
	if len(got) != len(good) {
		t.Fatalf("got %d values, want %d", len(got), len(good))
	}
	for i, s := range good {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
		if err != nil {
			t.Fatal(err)
		}
		if math.Float32bits(got[i]) != math.Float32bits(float32(f)) {
			t.Errorf("%s: got %v (%#x), want %v (%#x)", s, got[i], math.Float32bits(got[i]), float32(f), math.Float32bits(float32(f)))
		}
	}
	bad := []struct{ row, want string }{
		{"1e39", "1e39 is not a float32"},
		{"-1e39", "is not a float32"},
		{"01", "invalid JSON"},
		{"1.", "1. is not a float32"},
		{".5", ".5 is not a float32"},
		{"-", "- is not a float32"},
		{"1,", "invalid JSON"},
		{"1,,2", "invalid JSON"},
		{"1 2", "invalid JSON"},
		{"NaN", "invalid JSON"},
		{"Infinity", "invalid JSON"},
		{"0x10", "invalid JSON"},
		{"1e", "1e is not a float32"},
		{"1e+", "1e+ is not a float32"},
		{"99999999999999999999999999999999999999999", "is not a float32"},
	}
	for _, tt := range bad {
		_, err := wire.DecodeInstances([]byte(`{"instances":[{"x":[1,`+tt.row+`]}]}`), inputs, false)
		if !isInputError(err) {
			t.Errorf("[1,%s]: got error %v (%T), want *InputError", tt.row, err, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("[1,%s]: got error %q, want it to contain %q", tt.row, err, tt.want)
		}
	}
}

// pixelBody is one ResNet-50 instance of integer pixel values 0 to 255,
// as the bench's JSON paths send it.
func pixelBody() []byte {
	return imageBody(func(v int) string { return strconv.Itoa(v % 256) })
}

func BenchmarkDecodeInstancesPixels(b *testing.B) { benchDecodeInstances(b, pixelBody()) }

// benchDecodeInstances measures DecodeInstances of body, a ResNet-50
// instance.
func benchDecodeInstances(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeInstances(body, imgInputs, false); err != nil {
			b.Fatal(err)
		}
	}
}
