package wire

import (
	"context"

	"bytes"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
)

// decodeStringValue turns a string value (a utf8 cell of a Redis Arrow
// record) for model input in into a tensor. As in the original, a value
// holding '|' is a list of strings joined with '|' (a string tensor); any
// other value is base64 of an image (see infer.ImageInput). For a string
// input (infer.String) every value is a string tensor: its '|'-separated
// parts, see stringList. A '|'-joined value for any other input is an
// *InputError that says so.
func decodeStringValue(ctx context.Context, v []byte, in infer.IO, batched bool, p infer.ImagePre) (infer.Tensor, error) {
	if in.DType == infer.String {
		return stringList(string(v), in, batched)
	}
	if bytes.IndexByte(v, '|') >= 0 {
		n := bytes.Count(v, []byte{'|'}) + 1
		return infer.Tensor{}, infer.NewInputError(-1, "", "got a string tensor of %d '|'-joined strings, but model input is %s %s: string tensors need a string (BYTES) input; send numbers or a base64 image", n, in.DType, infer.ShapeString(in.Shape))
	}
	return infer.ImageInput(ctx, v, in, batched, p)
}

// stringList splits v on '|' into a 1-D string tensor, or a scalar when
// the input (without its batch dim unless batched) is rank 0 and v holds
// one string; a shape that does not fit the model's is an *InputError.
func stringList(v string, in infer.IO, batched bool) (infer.Tensor, error) {
	parts := strings.Split(v, "|")
	want := in.Shape
	if !batched && len(want) > 0 {
		want = want[1:]
	}
	t := infer.Tensor{DType: infer.String, Shape: []int64{int64(len(parts))}, Data: parts}
	if len(want) == 0 && len(parts) == 1 {
		t.Shape = []int64{}
	}
	if !infer.FitsShape(t.Shape, want) {
		return infer.Tensor{}, infer.NewInputError(-1, "", "%d '|'-joined strings make a string tensor of shape %s, which does not match model %s", len(parts), infer.ShapeString(t.Shape), infer.ShapeString(in.Shape))
	}
	return t, nil
}
