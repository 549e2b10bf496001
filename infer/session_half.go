package infer

import (
	"encoding/binary"
	"errors"
	"fmt"

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
var errHalfShape = errors.New("float16/bfloat16 output needs a shape known before the run: fixed dims, or a dynamic dim 0 equal to the inputs' dim 0")

// halfBytes returns the little-endian bytes of 16-bit values.
func halfBytes[T F16 | BF16](d []T) []byte {
	b := make([]byte, 2*len(d))
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
// binding cannot make a rank-0 or an empty custom tensor.
func newHalfValue(shape []int64, b []byte, et ort.TensorElementDataType) (ort.Value, error) {
	if len(shape) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("%w: a rank-0 or empty float16/bfloat16 tensor (shape %s)", ErrUnsupportedDType, ShapeString(shape))
	}
	return ort.NewCustomDataTensor(ort.NewShape(shape...), b, et)
}

// fromHalfValue copies the data of a float16 or bfloat16 output Run gave
// ONNX Runtime (see halfOutputs).
func fromHalfValue(v *ort.CustomDataTensor) (Tensor, error) {
	shape := []int64(v.GetShape())
	b := v.GetData()
	if int64(len(b)) != 2*NumElems(shape) {
		return Tensor{}, fmt.Errorf("%s output holds %d bytes, want %d", ShapeString(shape), len(b), 2*NumElems(shape))
	}
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
// its model shape, with a dynamic dim 0 taken from the inputs' common dim
// 0 (a batch, as the Batcher stacks it). Any other dynamic dim is unknown
// before the run: errHalfShape.
func halfOutputShape(o IO, inputs []Tensor) ([]int64, error) {
	shape := append([]int64(nil), o.Shape...)
	for i, d := range shape {
		if d >= 0 {
			continue
		}
		if i > 0 || len(inputs) == 0 {
			return nil, fmt.Errorf("output %q of shape %s: %w", o.Name, ShapeString(o.Shape), errHalfShape)
		}
		rows := int64(-1)
		for _, t := range inputs {
			if len(t.Shape) == 0 || rows >= 0 && t.Shape[0] != rows {
				return nil, fmt.Errorf("output %q of shape %s: %w", o.Name, ShapeString(o.Shape), errHalfShape)
			}
			rows = t.Shape[0]
		}
		shape[0] = rows
	}
	return shape, nil
}

// isHalf reports whether dt travels as a CustomDataTensor.
func isHalf(dt DType) bool { return dt == Float16 || dt == BFloat16 }
