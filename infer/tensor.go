package infer

import (
	"fmt"
	"strconv"
	"strings"
)

// DType is a tensor element type.
type DType uint8

// The element types infer handles. The zero value is Invalid.
const (
	Invalid DType = iota
	Float32
	Float64
	Int32
	Int64
	Uint8
	Bool
	Int8
	Int16
	Uint16
	Uint32
	Uint64
	Float16  // data []F16
	BFloat16 // data []BF16
	String   // data []string: ONNX STRING, OIP BYTES
)

// String returns the lower-case name, e.g. "float32".
func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Uint8:
		return "uint8"
	case Bool:
		return "bool"
	case Int8:
		return "int8"
	case Int16:
		return "int16"
	case Uint16:
		return "uint16"
	case Uint32:
		return "uint32"
	case Uint64:
		return "uint64"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	case String:
		return "string"
	default:
		return "invalid(" + strconv.Itoa(int(d)) + ")"
	}
}

// Tensor is a dense tensor in row-major order. Data is a []float32,
// []float64, []int32, []int64, []uint8, []bool, []int8, []int16, []uint16,
// []uint32, []uint64, []F16, []BF16 or []string matching DType, with as
// many elements as the product of Shape. A String element is any byte
// string (ONNX strings are bytes, not necessarily UTF-8), except that ONNX
// Runtime's C API takes each one NUL-terminated: Session.Run refuses one
// holding a NUL byte. A Tensor is a plain value: infer never
// mutates one it was given, and callers own the ones it returns.
type Tensor struct {
	DType DType
	Shape []int64
	Data  any
}

// NewTensor returns a zero-filled tensor of the given dtype and shape.
func NewTensor(dt DType, shape []int64) Tensor {
	return Tensor{DType: dt, Shape: append([]int64(nil), shape...), Data: makeData(dt, int(NumElems(shape)))}
}

// Len returns the number of elements in Data.
func (t Tensor) Len() int { return dataLen(t.Data) }

// Check reports whether Data matches DType and Shape: an error says what
// differs.
func (t Tensor) Check() error {
	if dtypeOf(t.Data) != t.DType {
		return fmt.Errorf("data is %T, want %s", t.Data, t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("shape %v has a negative dim", t.Shape)
		}
	}
	if n := NumElems(t.Shape); int64(t.Len()) != n {
		return fmt.Errorf("shape %v needs %d elements, data has %d", t.Shape, n, t.Len())
	}
	return nil
}

// IO describes one model input or output. Shape holds -1 for a dynamic dim.
type IO struct {
	Name  string
	DType DType
	Shape []int64
}

// ModelInfo describes a loaded model. DynamicBatch is true when records
// are stacked along dim 0 into one run (see DecideBatching: by default
// when dim 0 of every input and output is dynamic), and BatchReason says
// why it is or is not, for metadata and status.
type ModelInfo struct {
	Name         string
	Path         string
	Inputs       []IO
	Outputs      []IO
	DynamicBatch bool
	BatchReason  string
	// Image is how codecs pre-process image inputs; the Engine sets it
	// from its Config. The zero value means the original's defaults.
	Image ImagePre `json:"-"`
}

// InputNames returns the model's input names in model order.
func (m ModelInfo) InputNames() []string { return ioNames(m.Inputs) }

// OutputNames returns the model's output names in model order.
func (m ModelInfo) OutputNames() []string { return ioNames(m.Outputs) }

func ioNames(ios []IO) []string {
	names := make([]string, len(ios))
	for i, io := range ios {
		names[i] = io.Name
	}
	return names
}

// NumElems returns the number of elements of shape (1 for a scalar).
func NumElems(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// ShapeString formats a shape as error messages show it: [1 -1 4].
func ShapeString(s []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

func makeData(dt DType, n int) any {
	switch dt {
	case Float32:
		return make([]float32, n)
	case Float64:
		return make([]float64, n)
	case Int32:
		return make([]int32, n)
	case Int64:
		return make([]int64, n)
	case Uint8:
		return make([]uint8, n)
	case Bool:
		return make([]bool, n)
	case Int8:
		return make([]int8, n)
	case Int16:
		return make([]int16, n)
	case Uint16:
		return make([]uint16, n)
	case Uint32:
		return make([]uint32, n)
	case Uint64:
		return make([]uint64, n)
	case Float16:
		return make([]F16, n)
	case BFloat16:
		return make([]BF16, n)
	case String:
		return make([]string, n)
	}
	return nil
}

func dtypeOf(data any) DType {
	switch data.(type) {
	case []float32:
		return Float32
	case []float64:
		return Float64
	case []int32:
		return Int32
	case []int64:
		return Int64
	case []uint8:
		return Uint8
	case []bool:
		return Bool
	case []int8:
		return Int8
	case []int16:
		return Int16
	case []uint16:
		return Uint16
	case []uint32:
		return Uint32
	case []uint64:
		return Uint64
	case []F16:
		return Float16
	case []BF16:
		return BFloat16
	case []string:
		return String
	}
	return Invalid
}

func dataLen(data any) int {
	switch d := data.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	case []uint8:
		return len(d)
	case []bool:
		return len(d)
	case []int8:
		return len(d)
	case []int16:
		return len(d)
	case []uint16:
		return len(d)
	case []uint32:
		return len(d)
	case []uint64:
		return len(d)
	case []F16:
		return len(d)
	case []BF16:
		return len(d)
	case []string:
		return len(d)
	}
	return 0
}

// copyData copies src into dst starting at element off; both have the same
// element type.
func copyData(dst any, off int, src any) {
	switch d := dst.(type) {
	case []float32:
		copy(d[off:], src.([]float32))
	case []float64:
		copy(d[off:], src.([]float64))
	case []int32:
		copy(d[off:], src.([]int32))
	case []int64:
		copy(d[off:], src.([]int64))
	case []uint8:
		copy(d[off:], src.([]uint8))
	case []bool:
		copy(d[off:], src.([]bool))
	case []int8:
		copy(d[off:], src.([]int8))
	case []int16:
		copy(d[off:], src.([]int16))
	case []uint16:
		copy(d[off:], src.([]uint16))
	case []uint32:
		copy(d[off:], src.([]uint32))
	case []uint64:
		copy(d[off:], src.([]uint64))
	case []F16:
		copy(d[off:], src.([]F16))
	case []BF16:
		copy(d[off:], src.([]BF16))
	case []string:
		copy(d[off:], src.([]string))
	}
}

// sliceData returns a copy of elements [lo, hi) of data.
func sliceData(data any, lo, hi int) any {
	switch d := data.(type) {
	case []float32:
		return append([]float32(nil), d[lo:hi]...)
	case []float64:
		return append([]float64(nil), d[lo:hi]...)
	case []int32:
		return append([]int32(nil), d[lo:hi]...)
	case []int64:
		return append([]int64(nil), d[lo:hi]...)
	case []uint8:
		return append([]uint8(nil), d[lo:hi]...)
	case []bool:
		return append([]bool(nil), d[lo:hi]...)
	case []int8:
		return append([]int8(nil), d[lo:hi]...)
	case []int16:
		return append([]int16(nil), d[lo:hi]...)
	case []uint16:
		return append([]uint16(nil), d[lo:hi]...)
	case []uint32:
		return append([]uint32(nil), d[lo:hi]...)
	case []uint64:
		return append([]uint64(nil), d[lo:hi]...)
	case []F16:
		return append([]F16(nil), d[lo:hi]...)
	case []BF16:
		return append([]BF16(nil), d[lo:hi]...)
	case []string:
		return append([]string(nil), d[lo:hi]...)
	}
	return nil
}

// Stack concatenates tensors of one dtype along dim 0; their other dims
// must be equal (the caller checks). One tensor comes back as it is; more
// are copied into a new one. A rank-0 tensor has no dim 0 to stack along:
// Stack returns ErrNoBatchDim for it rather than guess.
func Stack(ts []Tensor) (Tensor, error) {
	if len(ts) == 1 {
		return ts[0], nil
	}
	total := int64(0)
	elems := 0
	for _, t := range ts {
		if len(t.Shape) == 0 {
			return Tensor{}, ErrNoBatchDim
		}
		total += t.Shape[0]
		elems += t.Len()
	}
	shape := append([]int64{total}, ts[0].Shape[1:]...)
	data := makeData(ts[0].DType, elems)
	off := 0
	for _, t := range ts {
		copyData(data, off, t.Data)
		off += t.Len()
	}
	return Tensor{DType: ts[0].DType, Shape: shape, Data: data}, nil
}

// Split cuts t along dim 0 into pieces of ns[i] rows each, copying their
// data; sum(ns) must be t.Shape[0], else it returns an error. One piece is
// t itself. A rank-0 tensor has no rows: ErrNoBatchDim.
func Split(t Tensor, ns []int64) ([]Tensor, error) {
	if len(ns) == 1 {
		return []Tensor{t}, nil
	}
	if len(t.Shape) == 0 {
		return nil, ErrNoBatchDim
	}
	sum := int64(0)
	for _, n := range ns {
		sum += n
	}
	if sum != t.Shape[0] || t.Check() != nil {
		return nil, fmt.Errorf("infer: split %s rows %s into %v", ShapeString(t.Shape), t.DType, ns)
	}
	row := int(NumElems(t.Shape[1:]))
	out := make([]Tensor, len(ns))
	off := 0
	for i, n := range ns {
		shape := append([]int64{n}, t.Shape[1:]...)
		hi := off + int(n)*row
		out[i] = Tensor{DType: t.DType, Shape: shape, Data: sliceData(t.Data, off, hi)}
		off = hi
	}
	return out, nil
}

// FitsShape reports whether a concrete shape fits a model shape (-1 = any).
func FitsShape(got, model []int64) bool {
	if len(got) != len(model) {
		return false
	}
	for i := range got {
		if model[i] >= 0 && got[i] != model[i] {
			return false
		}
	}
	return true
}
