package wire

import (
	"bytes"

	"github.com/cluster-serving/cluster-serving/infer"
)

// decodeStringValue turns a string value for model input in into a tensor.
// As in the original, a value holding '|' is a list of strings joined with
// '|' (a string tensor); any other value is base64 of an image (see
// infer.ImageInput). infer has no string dtype yet (no model input is a string
// tensor), so a string tensor is an *InputError that says so.
func decodeStringValue(v []byte, in infer.IO, batched bool, p infer.ImagePre) (infer.Tensor, error) {
	if bytes.IndexByte(v, '|') >= 0 {
		n := bytes.Count(v, []byte{'|'}) + 1
		return infer.Tensor{}, infer.NewInputError(-1, "", "got a string tensor of %d '|'-joined strings, but model input is %s %s: string tensors are not supported; send numbers or a base64 image", n, in.DType, infer.ShapeString(in.Shape))
	}
	return infer.ImageInput(v, in, batched, p)
}
