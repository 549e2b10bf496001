package infer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file reads the few parts of ONNX's protobuf messages (onnx.proto)
// that infer needs beyond what ONNX Runtime reports: the graph's nodes,
// so that the division guard can find integer Div and Mod nodes (see
// divguard.go), and TensorProto, the encoding of initializers and of ONNX's
// test data. It decodes with protowire field by field, skipping everything
// else, so that no generated code for the whole schema is needed.

// Field numbers of onnx.proto (IR version 8) that are read here.
const (
	fModelGraph = 7 // ModelProto.graph

	fGraphNode        = 1  // GraphProto.node
	fGraphInitializer = 5  // GraphProto.initializer
	fGraphInput       = 11 // GraphProto.input
	fGraphOutput      = 12 // GraphProto.output
	fGraphValueInfo   = 13 // GraphProto.value_info

	fNodeInput     = 1 // NodeProto.input
	fNodeOutput    = 2 // NodeProto.output
	fNodeName      = 3 // NodeProto.name
	fNodeOpType    = 4 // NodeProto.op_type
	fNodeAttribute = 5 // NodeProto.attribute
	fNodeDomain    = 7 // NodeProto.domain

	fAttrName   = 1  // AttributeProto.name
	fAttrI      = 3  // AttributeProto.i
	fAttrT      = 5  // AttributeProto.t
	fAttrG      = 6  // AttributeProto.g
	fAttrGraphs = 11 // AttributeProto.graphs

	fValueInfoName = 1 // ValueInfoProto.name
	fValueInfoType = 2 // ValueInfoProto.type
	fTypeTensor    = 1 // TypeProto.tensor_type
	fTensorElem    = 1 // TypeProto.Tensor.elem_type

	fTensorDims    = 1  // TensorProto.dims
	fTensorType    = 2  // TensorProto.data_type
	fTensorFloats  = 4  // TensorProto.float_data
	fTensorInt32s  = 5  // TensorProto.int32_data
	fTensorStrings = 6  // TensorProto.string_data
	fTensorInt64s  = 7  // TensorProto.int64_data
	fTensorName    = 8  // TensorProto.name
	fTensorRaw     = 9  // TensorProto.raw_data
	fTensorDoubles = 10 // TensorProto.double_data
	fTensorUint64s = 11 // TensorProto.uint64_data
)

// ONNX element types (TensorProto.DataType) that infer names.
const (
	onnxFloat    = 1
	onnxUint8    = 2
	onnxInt8     = 3
	onnxUint16   = 4
	onnxInt16    = 5
	onnxInt32    = 6
	onnxInt64    = 7
	onnxString   = 8
	onnxBool     = 9
	onnxFloat16  = 10
	onnxDouble   = 11
	onnxUint32   = 12
	onnxUint64   = 13
	onnxBFloat16 = 16
)

// onnxIntType reports whether an ONNX element type is an integer type, the
// types whose division by zero traps.
func onnxIntType(t int32) bool {
	switch t {
	case onnxUint8, onnxInt8, onnxUint16, onnxInt16, onnxInt32, onnxInt64, onnxUint32, onnxUint64:
		return true
	}
	return false
}

// errProto is wrapped by every decoding error of this file.
var errProto = errors.New("malformed ONNX protobuf")

// walkProto calls fn for each field of the message b: v holds a
// length-delimited field's bytes, x a varint or fixed field's value.
func walkProto(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errProto, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// repeated appends a repeated scalar field to dst whether it came packed
// (one bytes field) or not (one field per value); elem decodes one packed
// value and returns its length, or a negative one on error.
func repeated[T any](dst []T, typ protowire.Type, v []byte, x uint64, conv func(uint64) T, elem func([]byte) (uint64, int)) ([]T, error) {
	if typ != protowire.BytesType {
		return append(dst, conv(x)), nil
	}
	for len(v) > 0 {
		u, n := elem(v)
		if n < 0 {
			return dst, fmt.Errorf("%w: packed field: %v", errProto, protowire.ParseError(n))
		}
		dst = append(dst, conv(u))
		v = v[n:]
	}
	return dst, nil
}

func varint(b []byte) (uint64, int)  { return protowire.ConsumeVarint(b) }
func fixed64(b []byte) (uint64, int) { return protowire.ConsumeFixed64(b) }
func fixed32(b []byte) (uint64, int) {
	u, n := protowire.ConsumeFixed32(b)
	return uint64(u), n
}

// tensorProto is a decoded TensorProto: its data stays in whichever field
// the writer used (raw_data, or the typed repeated field).
type tensorProto struct {
	name     string
	elemType int32
	dims     []int64
	raw      []byte
	floats   []float32
	int32s   []int32 // also bool, uint8, int8, int16, uint16, float16
	int64s   []int64
	doubles  []float64
	uint64s  []uint64 // also uint32
	strings  []string
}

func parseTensorProto(b []byte) (*tensorProto, error) {
	t := &tensorProto{}
	err := walkProto(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) (err error) {
		switch num {
		case fTensorDims:
			t.dims, err = repeated(t.dims, typ, v, x, func(u uint64) int64 { return int64(u) }, varint)
		case fTensorType:
			t.elemType = int32(x)
		case fTensorFloats:
			t.floats, err = repeated(t.floats, typ, v, x, func(u uint64) float32 { return math.Float32frombits(uint32(u)) }, fixed32)
		case fTensorInt32s:
			t.int32s, err = repeated(t.int32s, typ, v, x, func(u uint64) int32 { return int32(u) }, varint)
		case fTensorInt64s:
			t.int64s, err = repeated(t.int64s, typ, v, x, func(u uint64) int64 { return int64(u) }, varint)
		case fTensorDoubles:
			t.doubles, err = repeated(t.doubles, typ, v, x, math.Float64frombits, fixed64)
		case fTensorUint64s:
			t.uint64s, err = repeated(t.uint64s, typ, v, x, func(u uint64) uint64 { return u }, varint)
		case fTensorStrings:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: string_data of wire type %d", errProto, typ)
			}
			t.strings = append(t.strings, string(v))
		case fTensorName:
			t.name = string(v)
		case fTensorRaw:
			t.raw = v
		}
		return err
	})
	return t, err
}

// DecodeTensorProto reads an ONNX TensorProto (onnx.proto), as ONNX's test
// data (input_N.pb, output_N.pb) and a model's initializers hold them, into
// a Tensor, and returns the name it carries. Data may come as raw_data
// (little-endian) or in the typed repeated fields. A tensor of an element
// type infer does not handle returns an error wrapping
// ErrUnsupportedDType; a malformed message, or data that does not fit the
// dims, another error. Safe for concurrent use.
func DecodeTensorProto(b []byte) (name string, t Tensor, err error) {
	p, err := parseTensorProto(b)
	if err != nil {
		return "", Tensor{}, err
	}
	t, err = p.tensor()
	return p.name, t, err
}

// tensor converts p into a Tensor of one of infer's dtypes.
func (p *tensorProto) tensor() (Tensor, error) {
	shape := append([]int64{}, p.dims...)
	for _, d := range shape {
		if d < 0 || d > math.MaxInt32 {
			return Tensor{}, fmt.Errorf("%w: tensor %q has dims %v", errProto, p.name, p.dims)
		}
	}
	n := NumElems(shape)
	if n > math.MaxInt32 {
		return Tensor{}, fmt.Errorf("%w: tensor %q has dims %v", errProto, p.name, p.dims)
	}
	data, err := p.data()
	if err != nil {
		return Tensor{}, err
	}
	t := Tensor{DType: dtypeOf(data), Shape: shape, Data: data}
	if err := t.Check(); err != nil {
		return Tensor{}, fmt.Errorf("%w: tensor %q: %v", errProto, p.name, err)
	}
	return t, nil
}

// data returns p's elements as the data slice of their dtype: from
// raw_data (little-endian) when the writer used it, else from the typed
// field ONNX keeps them in (int32_data holds every type narrower than 32
// bits, float16 and bfloat16 as their bits; uint64_data holds uint32 and
// uint64).
func (p *tensorProto) data() (any, error) {
	le := binary.LittleEndian
	switch p.elemType {
	case onnxFloat:
		return fromRaw(p.raw, p.floats, 4, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) }), nil
	case onnxDouble:
		return fromRaw(p.raw, p.doubles, 8, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }), nil
	case onnxInt32:
		return fromRaw(p.raw, p.int32s, 4, func(b []byte) int32 { return int32(le.Uint32(b)) }), nil
	case onnxInt64:
		return fromRaw(p.raw, p.int64s, 8, func(b []byte) int64 { return int64(le.Uint64(b)) }), nil
	case onnxUint8:
		return fromRaw(p.raw, narrow[uint8](p.int32s), 1, func(b []byte) uint8 { return b[0] }), nil
	case onnxBool:
		return fromRaw(p.raw, narrowBool(p.int32s), 1, func(b []byte) bool { return b[0] != 0 }), nil
	case onnxInt8:
		return fromRaw(p.raw, narrow[int8](p.int32s), 1, func(b []byte) int8 { return int8(b[0]) }), nil
	case onnxInt16:
		return fromRaw(p.raw, narrow[int16](p.int32s), 2, func(b []byte) int16 { return int16(le.Uint16(b)) }), nil
	case onnxUint16:
		return fromRaw(p.raw, narrow[uint16](p.int32s), 2, le.Uint16), nil
	case onnxFloat16:
		return fromRaw(p.raw, narrow[F16](p.int32s), 2, func(b []byte) F16 { return F16(le.Uint16(b)) }), nil
	case onnxBFloat16:
		return fromRaw(p.raw, narrow[BF16](p.int32s), 2, func(b []byte) BF16 { return BF16(le.Uint16(b)) }), nil
	case onnxUint32:
		return fromRaw(p.raw, narrow[uint32](p.uint64s), 4, le.Uint32), nil
	case onnxUint64:
		return fromRaw(p.raw, p.uint64s, 8, le.Uint64), nil
	case onnxString: // never raw_data
		if p.strings == nil {
			return []string{}, nil
		}
		return p.strings, nil
	}
	return nil, fmt.Errorf("%w: tensor %q has ONNX element type %d", ErrUnsupportedDType, p.name, p.elemType)
}

// fromRaw returns the values of raw_data (size bytes each, little-endian)
// when the writer used it, else typed.
func fromRaw[T any](raw []byte, typed []T, size int, get func([]byte) T) []T {
	if raw == nil {
		if typed == nil {
			return []T{}
		}
		return typed
	}
	out := make([]T, len(raw)/size)
	for i := range out {
		out[i] = get(raw[i*size:])
	}
	return out
}

// narrow converts the wider integers ONNX's TensorProto stores small
// types in (int32_data, uint64_data) to the element type T.
func narrow[T uint8 | int8 | int16 | uint16 | uint32 | F16 | BF16, S int32 | uint64](s []S) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = T(v)
	}
	return out
}

func narrowBool(s []int32) []bool {
	if s == nil {
		return nil
	}
	out := make([]bool, len(s))
	for i, v := range s {
		out[i] = v != 0
	}
	return out
}

// hasZero reports whether an integer tensor holds a zero element; ok is
// false when p is not an integer tensor or its data cannot be read.
func (p *tensorProto) hasZero() (zero, ok bool) {
	if !onnxIntType(p.elemType) {
		return false, false
	}
	switch {
	case p.raw != nil:
		size := map[int32]int{onnxUint8: 1, onnxInt8: 1, onnxUint16: 2, onnxInt16: 2, onnxInt32: 4, onnxUint32: 4, onnxInt64: 8, onnxUint64: 8}[p.elemType]
		for i := 0; i+size <= len(p.raw); i += size {
			if allZero(p.raw[i : i+size]) {
				return true, true
			}
		}
		return false, true
	case p.int32s != nil:
		return slices.Contains(p.int32s, 0), true
	case p.int64s != nil:
		return slices.Contains(p.int64s, 0), true
	case p.uint64s != nil:
		return slices.Contains(p.uint64s, 0), true
	}
	return false, false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
