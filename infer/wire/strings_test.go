package wire_test

import (
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

func TestDecodeInstancesStrings(t *testing.T) {
	vec := []infer.IO{{Name: "x", DType: infer.Float32, Shape: []int64{-1, 2, 2}}}
	img := []infer.IO{{Name: "x", DType: infer.Float32, Shape: []int64{-1, 3, -1, -1}}}
	tests := []struct {
		name   string
		body   string
		inputs []infer.IO
		want   string // error substring; "" means success
	}{
		{"pretty-printed rows", "{\"instances\":[{\"x\":[[1, 2],\n [3,\n  4]]}]}", vec, ""},
		{"string tensor", `{"instances":[{"x":"a|b|c"}]}`, img, "string tensors need a string (BYTES) input"},
		{"image for a matrix", `{"instances":[{"x":"aGVsbG8="}]}`, vec, "not an image"},
		{"bad base64 image", `{"instances":[{"x":"@@@"}]}`, img, "not base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeInstances([]byte(tt.body), tt.inputs, false)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !isInputError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an *InputError containing %q", err, tt.want)
			}
		})
	}
}
