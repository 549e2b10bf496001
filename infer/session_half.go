package infer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	ort "github.com/yalue/onnxruntime_go"
)

// Float16 and BFloat16 tensors have no Go element type in the binding: they
// travel as CustomDataTensors over the raw little-endian bits. The binding
// (v1.27.0) copies an output ONNX Runtime allocated of such a type with one
// byte per element instead of two, so Run cannot read those back: it hands
// ONNX Runtime its own output buffers instead, which needs the output's
// shape before the run (see halfOutputShape).

// errHalfShape is returned when a float16/bfloat16 output's shape cannot be
// known before the run.
var errHalfShape = errors.New("float16/bfloat16 output needs a shape known before the run: fixed dims, dims named (dim_param) as an input's are, or a dynamic dim 0 equal to the inputs' dim 0")

// halfBytes returns the little-endian bytes of 16-bit values, at least
// two: the binding refuses an empty buffer even for a zero-size tensor,
// and ONNX Runtime only checks that the buffer is large enough.
func halfBytes[T F16 | BF16](d []T) []byte {
	b := make([]byte, 2*max(len(d), 1))
	for i, v := range d {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}

// halfValues reads little-endian 16-bit values from b.
func halfValues[T F16 | BF16](b []byte) []T {
	d := make([]T, len(b)/2)
	for i := range d {
		d[i] = T(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return d
}

// newHalfValue wraps the bits in b as a tensor of element type et. The
// binding cannot make a rank-0 custom tensor (models with one are refused
// at load, see convertIO).
func newHalfValue(shape []int64, b []byte, et ort.TensorElementDataType) (ort.Value, error) {
	if len(shape) == 0 {
		return nil, fmt.Errorf("%w: a rank-0 float16/bfloat16 tensor", ErrUnsupportedDType)
	}
	return ort.NewCustomDataTensor(ort.NewShape(shape...), b, et)
}

// fromHalfValue copies the data of a float16 or bfloat16 output Run gave
// ONNX Runtime (see halfOutputs).
func fromHalfValue(v *ort.CustomDataTensor) (Tensor, error) {
	shape := []int64(v.GetShape())
	b := v.GetData()
	n := 2 * NumElems(shape)
	if int64(len(b)) < n {
		return Tensor{}, fmt.Errorf("%s output holds %d bytes, want %d", ShapeString(shape), len(b), n)
	}
	b = b[:n] // a zero-size tensor has a buffer of two bytes (halfBytes)
	switch et := ort.TensorElementDataType(v.DataType()); et {
	case ort.TensorElementDataTypeFloat16:
		return Tensor{DType: Float16, Shape: shape, Data: halfValues[F16](b)}, nil
	case ort.TensorElementDataTypeBFloat16:
		return Tensor{DType: BFloat16, Shape: shape, Data: halfValues[BF16](b)}, nil
	default:
		return Tensor{}, fmt.Errorf("%w: element type %v", ErrUnsupportedDType, et)
	}
}

// halfOutputShape returns the shape a float16/bfloat16 output will have:
// its model shape, with each dynamic dim taken from an input dim of the
// same symbolic name (dim_param), else, for dim 0, from the inputs'
// common dim 0 (a batch, as the Batcher stacks it). Any other dynamic dim
// is unknown before the run: errHalfShape.
func (s *Session) halfOutputShape(o IO, inputs []Tensor) ([]int64, error) {
	shape := append([]int64(nil), o.Shape...)
	for i, d := range shape {
		if d >= 0 {
			continue
		}
		if n, ok := s.symbolicDim(o.Name, i, inputs); ok {
			shape[i] = n
			continue
		}
		rows := int64(-1)
		for _, t := range inputs {
			if len(t.Shape) == 0 || rows >= 0 && t.Shape[0] != rows {
				rows = -1
				break
			}
			rows = t.Shape[0]
		}
		if i > 0 || rows < 0 {
			return nil, fmt.Errorf("output %q of shape %s: %w", o.Name, ShapeString(o.Shape), errHalfShape)
		}
		shape[0] = rows
	}
	return shape, nil
}

// symbolicDim returns the size of dim i of output name from the input dim
// that shares its dim_param.
func (s *Session) symbolicDim(name string, i int, inputs []Tensor) (int64, bool) {
	p := s.dims[name]
	if i >= len(p) || p[i] == "" {
		return 0, false
	}
	for j, in := range s.info.Inputs {
		for k, q := range s.dims[in.Name] {
			if q == p[i] && j < len(inputs) && k < len(inputs[j].Shape) {
				return inputs[j].Shape[k], true
			}
		}
	}
	return 0, false
}

// halfDims reads the model's dim_params (see dimParams) when it has a
// float16/bfloat16 output with a dynamic dim, from data or else from
// modelFile; nil otherwise. It is best effort: without them, only a
// dynamic dim 0 is known before the run.
func halfDims(modelFile string, data []byte, info ModelInfo) map[string][]string {
	need := false
	for _, o := range info.Outputs {
		need = need || isHalf(o.DType) && slices.Contains(o.Shape, -1)
	}
	if !need {
		return nil
	}
	if data == nil {
		var err error
		if data, err = os.ReadFile(modelFile); err != nil {
			return nil
		}
	}
	dims, err := dimParams(data)
	if err != nil {
		return nil
	}
	return dims
}

// isHalf reports whether dt travels as a CustomDataTensor.
func isHalf(dt DType) bool { return dt == Float16 || dt == BFloat16 }
