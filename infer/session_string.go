package infer

import (
	"fmt"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// String tensors travel as the binding's StringTensors, which copy every
// element through C: an input's strings go in NUL-terminated (so a string
// holding a NUL byte would be cut short: Run refuses it), and an output's
// come back as Go strings ONNX Runtime's buffer no longer backs. The
// binding cannot make a rank-0 StringTensor (NewStringTensor rejects an
// empty shape), so a model with a rank-0 string input is refused at load;
// a rank-0 string output ONNX Runtime allocates is read element by element
// (GetContents assumes a non-empty shape).

// checkStrings returns an *InputError naming input when an element of d
// holds a NUL byte, which ONNX Runtime's C API cannot take.
func checkStrings(input string, d []string) *InputError {
	for i, s := range d {
		if j := strings.IndexByte(s, 0); j >= 0 {
			return NewInputError(-1, input, "string element %d holds a NUL byte at %d, which ONNX Runtime cannot take", i, j)
		}
	}
	return nil
}

// newStringValue copies d into a new string tensor of the given shape.
func newStringValue(shape []int64, d []string) (ort.Value, error) {
	if len(shape) == 0 {
		return nil, fmt.Errorf("%w: a rank-0 string tensor", ErrUnsupportedDType)
	}
	v, err := ort.NewStringTensor(ort.NewShape(shape...))
	if err != nil {
		return nil, err
	}
	if err := v.SetContents(d); err != nil {
		_ = v.Destroy()
		return nil, err
	}
	return v, nil
}

// fromStringValue copies the strings of an output ONNX Runtime allocated.
func fromStringValue(v *ort.StringTensor) (Tensor, error) {
	shape := []int64(v.GetShape())
	if shape == nil {
		shape = []int64{}
	}
	n := NumElems(shape)
	var data []string
	if len(shape) == 0 {
		s, err := v.GetElement(0)
		if err != nil {
			return Tensor{}, fmt.Errorf("read string scalar: %w", err)
		}
		data = []string{s}
	} else {
		var err error
		if data, err = v.GetContents(); err != nil {
			return Tensor{}, fmt.Errorf("read %s strings: %w", ShapeString(shape), err)
		}
	}
	if int64(len(data)) != n {
		return Tensor{}, fmt.Errorf("%s string output holds %d elements, want %d", ShapeString(shape), len(data), n)
	}
	return Tensor{DType: String, Shape: shape, Data: data}, nil
}
