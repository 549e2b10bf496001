package wire

import (
	"encoding/binary"
	"reflect"
	"slices"
	"unsafe"

	"github.com/cluster-serving/cluster-serving/infer"
)

// maxRawElems bounds the elements of one tensor a request may claim, as
// the OIP JSON codec does: a shape is checked before any memory is taken.
const maxRawElems = 1 << 31

// RawSize returns the bytes one element of d takes in OIP raw tensor
// data (gRPC raw_input_contents, the binary tensor data extension): 1
// for BOOL, INT8 and UINT8, 2 for INT16, UINT16, FP16 and BF16, 4 for
// INT32, UINT32 and FP32, 8 for INT64, UINT64 and FP64; 0 for a dtype
// that has no fixed size (BYTES: see DecodeRaw).
func RawSize(d infer.DType) int {
	switch d {
	case infer.Bool, infer.Int8, infer.Uint8:
		return 1
	case infer.Int16, infer.Uint16, infer.Float16, infer.BFloat16:
		return 2
	case infer.Int32, infer.Uint32, infer.Float32:
		return 4
	case infer.Int64, infer.Uint64, infer.Float64:
		return 8
	}
	return 0
}

// OIPDType returns the dtype of the OIP datatype name (see OIPDatatype),
// false for a name infer has no dtype for.
func OIPDType(name string) (infer.DType, bool) {
	for d := infer.Float32; d <= infer.String; d++ {
		if OIPDatatype(d) == name {
			return d, true
		}
	}
	return infer.Invalid, false
}

// hasRaw reports whether d has an OIP raw form: a fixed size, or BYTES.
func hasRaw(d infer.DType) bool { return RawSize(d) > 0 || d == infer.String }

// bytesLenSize is the length prefix of one BYTES element in raw form.
const bytesLenSize = 4

// rawElems checks shape (no negative dim, at most maxRawElems elements,
// counted without overflow) and returns its element count; input names
// the tensor in the error.
func rawElems(shape []int64, input string) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, infer.NewInputError(-1, input, "shape %s has a negative dim", infer.ShapeString(shape))
		}
		if d > 0 && n > maxRawElems/d {
			return 0, infer.NewInputError(-1, input, "shape %s is too large", infer.ShapeString(shape))
		}
		n *= d
	}
	if n > maxRawElems {
		return 0, infer.NewInputError(-1, input, "shape %s is too large", infer.ShapeString(shape))
	}
	return n, nil
}

// DecodeRaw reads b, OIP raw tensor data (little-endian elements in
// row-major order, no padding; a BOOL is one byte, 0 or 1; a BYTES
// element, as KServe and Triton frame it, is its length as 4
// little-endian bytes followed by that many bytes), as a tensor of dtype
// d and shape. A size that does not match the shape (for BYTES: an
// element running past b, bytes left after the last element), a BOOL
// byte other than 0 or 1 or a dtype without raw form is an
// *infer.InputError naming input. The tensor owns its data: b may be
// reused.
func DecodeRaw(b []byte, d infer.DType, shape []int64, input string) (infer.Tensor, error) {
	size := RawSize(d)
	if !hasRaw(d) {
		return infer.Tensor{}, infer.NewInputError(-1, input, "datatype %s has no raw form", d)
	}
	n, err := rawElems(shape, input)
	if err != nil {
		return infer.Tensor{}, err
	}
	if d == infer.String {
		return decodeRawBytes(b, shape, n, input)
	}
	if int64(len(b)) != n*int64(size) {
		return infer.Tensor{}, infer.NewInputError(-1, input, "raw data has %d bytes, %s of shape %s needs %d (%d elements of %d bytes)",
			len(b), OIPDatatype(d), infer.ShapeString(shape), n*int64(size), n, size)
	}
	t := infer.NewTensor(d, shape)
	if v, ok := t.Data.([]bool); ok {
		for i, c := range b {
			if c > 1 {
				return infer.Tensor{}, infer.NewInputError(-1, input, "raw BOOL element %d is %d: want 0 or 1", i, c)
			}
			v[i] = c == 1
		}
		return t, nil
	}
	mem, elem := numBytes(t.Data)
	copy(mem, b)
	swapToLE(mem, elem)
	return t, nil
}

// decodeRawBytes reads b as the n framed BYTES elements of shape (see
// DecodeRaw).
func decodeRawBytes(b []byte, shape []int64, n int64, input string) (infer.Tensor, error) {
	// Every element takes at least its length prefix: a shape claiming
	// more elements than b can hold is refused before any allocation.
	if n > int64(len(b))/bytesLenSize {
		return infer.Tensor{}, infer.NewInputError(-1, input, "raw data has %d bytes, too few for the %d BYTES elements of shape %s (each takes a %d-byte length, then its bytes)",
			len(b), n, infer.ShapeString(shape), bytesLenSize)
	}
	v := make([]string, n)
	off := 0
	for i := range v {
		if off == len(b) {
			return infer.Tensor{}, infer.NewInputError(-1, input, "raw data holds %d BYTES elements, shape %s needs %d", i, infer.ShapeString(shape), n)
		}
		if len(b)-off < bytesLenSize {
			return infer.Tensor{}, infer.NewInputError(-1, input, "raw BYTES element %d of %d: its 4-byte length is cut short at byte %d of %d", i, n, off, len(b))
		}
		size := binary.LittleEndian.Uint32(b[off:])
		off += bytesLenSize
		if uint64(size) > uint64(len(b)-off) {
			return infer.Tensor{}, infer.NewInputError(-1, input, "raw BYTES element %d of %d has length %d, past the end of the data: only %d bytes are left", i, n, size, len(b)-off)
		}
		v[i] = string(b[off : off+int(size)])
		off += int(size)
	}
	if off != len(b) {
		return infer.Tensor{}, infer.NewInputError(-1, input, "raw data has %d bytes after the %d BYTES elements of shape %s", len(b)-off, n, infer.ShapeString(shape))
	}
	return infer.Tensor{DType: infer.String, Shape: append([]int64(nil), shape...), Data: v}, nil
}

// rawLen returns the bytes t takes in OIP raw tensor data (see
// DecodeRaw): for BYTES, every element with its length prefix.
func rawLen(t infer.Tensor) int {
	v, ok := t.Data.([]string)
	if !ok {
		return t.Len() * RawSize(t.DType)
	}
	n := len(v) * bytesLenSize
	for _, s := range v {
		n += len(s)
	}
	return n
}

// AppendRaw appends t's data to b as OIP raw tensor data (see DecodeRaw)
// and returns the extended slice; a dtype without raw form appends
// nothing. A BYTES element must be shorter than 4 GiB, which a message
// of the doors' size limits always is.
func AppendRaw(b []byte, t infer.Tensor) []byte {
	le := binary.LittleEndian
	b = slices.Grow(b, rawLen(t))
	switch v := t.Data.(type) {
	case []string:
		for _, x := range v {
			b = le.AppendUint32(b, uint32(len(x)))
			b = append(b, x...)
		}
	case []bool:
		for _, x := range v {
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	default:
		mem, elem := numBytes(t.Data)
		start := len(b)
		b = append(b, mem...)
		swapToLE(b[start:], elem)
	}
	return b
}

// numBytes returns the memory of data, a slice of fixed-size numbers
// (every dtype with a raw form but BOOL and BYTES), as bytes, and the
// size of one element; nil and 0 for anything else.
func numBytes(data any) (mem []byte, elem int) {
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Slice {
		return nil, 0
	}
	switch v.Type().Elem().Kind() {
	case reflect.Int8, reflect.Uint8, reflect.Int16, reflect.Uint16, reflect.Int32, reflect.Uint32,
		reflect.Int64, reflect.Uint64, reflect.Float32, reflect.Float64:
	default:
		return nil, 0
	}
	elem = int(v.Type().Elem().Size())
	return unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()*elem), elem
}

// hostLE reports whether this machine keeps numbers in memory
// little-endian, as OIP raw tensor data has them.
var hostLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// swapToLE turns mem, elements of elem bytes in this machine's order,
// into little-endian ones, or back: nothing to do on a little-endian
// machine.
func swapToLE(mem []byte, elem int) {
	if hostLE || elem < 2 {
		return
	}
	for i := 0; i+elem <= len(mem); i += elem {
		slices.Reverse(mem[i : i+elem])
	}
}
