package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// rawCases holds one tensor of every dtype with its raw bytes, written
// out by hand (little-endian; BYTES elements each after their 4-byte
// length), not by AppendRaw.
var rawCases = []struct {
	t   infer.Tensor
	raw []byte
}{
	{infer.Tensor{DType: infer.Bool, Shape: []int64{3}, Data: []bool{true, false, true}}, []byte{1, 0, 1}},
	{infer.Tensor{DType: infer.Int8, Shape: []int64{2}, Data: []int8{-1, 127}}, []byte{0xff, 0x7f}},
	{infer.Tensor{DType: infer.Uint8, Shape: []int64{2}, Data: []uint8{0, 255}}, []byte{0, 0xff}},
	{infer.Tensor{DType: infer.Int16, Shape: []int64{2}, Data: []int16{-2, 258}}, []byte{0xfe, 0xff, 2, 1}},
	{infer.Tensor{DType: infer.Uint16, Shape: []int64{1}, Data: []uint16{0xabcd}}, []byte{0xcd, 0xab}},
	{infer.Tensor{DType: infer.Float16, Shape: []int64{2}, Data: []infer.F16{0x3c00, 0xc000}}, []byte{0, 0x3c, 0, 0xc0}}, // 1, -2
	{infer.Tensor{DType: infer.BFloat16, Shape: []int64{1}, Data: []infer.BF16{0x3f80}}, []byte{0x80, 0x3f}},             // 1
	{infer.Tensor{DType: infer.Int32, Shape: []int64{1, 1}, Data: []int32{-1}}, []byte{0xff, 0xff, 0xff, 0xff}},
	{infer.Tensor{DType: infer.Uint32, Shape: []int64{1}, Data: []uint32{0x01020304}}, []byte{4, 3, 2, 1}},
	{infer.Tensor{DType: infer.Float32, Shape: []int64{2}, Data: []float32{1, -0.5}}, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xbf}},
	{infer.Tensor{DType: infer.Int64, Shape: []int64{1}, Data: []int64{-2}}, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	{infer.Tensor{DType: infer.Uint64, Shape: []int64{1}, Data: []uint64{1 << 56}}, []byte{0, 0, 0, 0, 0, 0, 0, 1}},
	{infer.Tensor{DType: infer.Float64, Shape: []int64{1}, Data: []float64{2}}, []byte{0, 0, 0, 0, 0, 0, 0, 0x40}},
	{infer.Tensor{DType: infer.Float32, Shape: []int64{0, 4}, Data: []float32{}}, []byte{}},
	{infer.Tensor{DType: infer.Int64, Shape: []int64{}, Data: []int64{7}}, []byte{7, 0, 0, 0, 0, 0, 0, 0}},
	{infer.Tensor{DType: infer.String, Shape: []int64{1, 3}, Data: []string{"ab", "", "é"}},
		[]byte{2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 2, 0, 0, 0, 0xc3, 0xa9}},
	{infer.Tensor{DType: infer.String, Shape: []int64{}, Data: []string{"\xff\x00z"}}, []byte{3, 0, 0, 0, 0xff, 0, 'z'}},
	{infer.Tensor{DType: infer.String, Shape: []int64{0, 2}, Data: []string{}}, []byte{}},
}

func TestRawRoundTrip(t *testing.T) {
	for _, tt := range rawCases {
		name := wire.OIPDatatype(tt.t.DType) + infer.ShapeString(tt.t.Shape)
		t.Run(name, func(t *testing.T) {
			if got := wire.AppendRaw(nil, tt.t); !bytes.Equal(got, tt.raw) {
				t.Errorf("AppendRaw: got % x, want % x", got, tt.raw)
			}
			got, err := wire.DecodeRaw(tt.raw, tt.t.DType, tt.t.Shape, "x")
			if err != nil {
				t.Fatal(err)
			}
			if got.DType != tt.t.DType || !slices.Equal(got.Shape, tt.t.Shape) || !reflect.DeepEqual(got.Data, tt.t.Data) {
				t.Errorf("DecodeRaw: got %+v, want %+v", got, tt.t)
			}
		})
	}
}

func TestDecodeRawErrors(t *testing.T) {
	tests := []struct {
		name  string
		raw   []byte
		dt    infer.DType
		shape []int64
		want  string
	}{
		{"short", []byte{1, 2, 3}, infer.Float32, []int64{1}, "raw data has 3 bytes, FP32 of shape [1] needs 4 (1 elements of 4 bytes)"},
		{"long", make([]byte, 10), infer.Int16, []int64{2, 2}, "raw data has 10 bytes, INT16 of shape [2 2] needs 8"},
		{"bool byte", []byte{0, 2}, infer.Bool, []int64{2}, "raw BOOL element 1 is 2: want 0 or 1"},
		{"negative dim", nil, infer.Float32, []int64{-1, 4}, "shape [-1 4] has a negative dim"},
		{"huge shape", nil, infer.Float32, []int64{1 << 40, 1 << 40}, "is too large"},
		{"invalid dtype", nil, infer.Invalid, []int64{1}, "has no raw form"},
		{"bytes length past the end", []byte{1, 0, 0, 0, 'a', 9, 0, 0, 0, 'b'}, infer.String, []int64{2}, "raw BYTES element 1 of 2 has length 9, past the end of the data: only 1 bytes are left"},
		{"bytes length cut short", []byte{1, 0, 0, 0, 'a', 0, 0, 0}, infer.String, []int64{2}, "raw BYTES element 1 of 2: its 4-byte length is cut short at byte 5 of 8"},
		{"bytes trailing", []byte{1, 0, 0, 0, 'a', 0}, infer.String, []int64{1}, "raw data has 1 bytes after the 1 BYTES elements of shape [1]"},
		{"bytes fewer elements", []byte{0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 'a', 'b', 'c', 'd'}, infer.String, []int64{4}, "raw data holds 3 BYTES elements, shape [4] needs 4"},
		{"bytes more elements", []byte{0, 0, 0, 0, 0, 0, 0, 0}, infer.String, []int64{1}, "raw data has 4 bytes after the 1 BYTES elements of shape [1]"},
		{"bytes shape past the data", []byte{0, 0, 0, 0}, infer.String, []int64{1 << 30, 2}, "too few for the 2147483648 BYTES elements of shape [1073741824 2]"},
		{"bytes huge length", []byte{0xff, 0xff, 0xff, 0xff}, infer.String, []int64{1}, "has length 4294967295, past the end of the data: only 0 bytes are left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeRaw(tt.raw, tt.dt, tt.shape, "x")
			var ie *infer.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an InputError with %q", err, tt.want)
			}
		})
	}
}

func TestOIPDType(t *testing.T) {
	for _, tt := range rawCases {
		name := wire.OIPDatatype(tt.t.DType)
		if got, ok := wire.OIPDType(name); !ok || got != tt.t.DType {
			t.Errorf("OIPDType(%q): got %v %v, want %v", name, got, ok, tt.t.DType)
		}
	}
	if _, ok := wire.OIPDType("STRING"); ok {
		t.Error("OIPDType(STRING): got ok, want false")
	}
}

// FuzzDecodeRaw: any bytes, dtype and shape give a tensor that encodes
// back to the same bytes, or an *InputError; never a panic.
func FuzzDecodeRaw(f *testing.F) {
	for _, tt := range rawCases {
		d0, d1 := int64(-1), int64(-1)
		if len(tt.t.Shape) > 0 {
			d0 = tt.t.Shape[0]
		}
		if len(tt.t.Shape) > 1 {
			d1 = tt.t.Shape[1]
		}
		f.Add(tt.raw, uint8(tt.t.DType), d0, d1)
	}
	f.Add([]byte{1, 2}, uint8(200), int64(1<<62), int64(1<<62))
	f.Add([]byte{1, 0, 0, 0, 'a', 9, 0, 0, 0, 'b'}, uint8(infer.String), int64(2), int64(-1))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0}, uint8(infer.String), int64(1<<40), int64(1<<40))
	f.Fuzz(func(t *testing.T, raw []byte, dt uint8, d0, d1 int64) {
		var shape []int64
		for _, d := range []int64{d0, d1} {
			if d != -1 {
				shape = append(shape, d)
			}
		}
		got, err := wire.DecodeRaw(raw, infer.DType(dt), shape, "x")
		if err != nil {
			var ie *infer.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("got %T %v, want an *infer.InputError", err, err)
			}
			return
		}
		if err := got.Check(); err != nil {
			t.Fatalf("decoded tensor: %v", err)
		}
		if back := wire.AppendRaw(nil, got); !bytes.Equal(back, raw) {
			t.Fatalf("round trip: got % x, want % x", back, raw)
		}
	})
}
