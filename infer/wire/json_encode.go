package wire

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/cluster-serving/cluster-serving/infer"
)

// EncodePredictions writes {"predictions":[p0,...]} where each pi is a JSON
// string holding {"value":"<v>"}, v being values[i] (see RecordValue).
func EncodePredictions(values []string) []byte {
	n := 20
	for _, v := range values {
		n += len(v)*2 + 16
	}
	out := make([]byte, 0, n)
	out = append(out, `{"predictions":[`...)
	var mid []byte
	for i, v := range values {
		if i > 0 {
			out = append(out, ',')
		}
		mid = append(mid[:0], `{"value":`...)
		mid = appendQuoted(mid, v)
		mid = append(mid, '}')
		out = appendQuoted(out, string(mid))
	}
	return append(out, "]}"...)
}

// RecordValue is the value string of one record's outputs: the JSON text
// {"data":[...],"shape":[...]} for a single-output model, a JSON array of
// such objects in output order otherwise.
func RecordValue(outputs []infer.Tensor) string {
	var b []byte
	if len(outputs) == 1 {
		return string(AppendTensorJSON(b, outputs[0]))
	}
	b = append(b, '[')
	b = appendList(b, outputs, AppendTensorJSON)
	return string(append(b, ']'))
}

// AppendTensorJSON appends {"data":[...],"shape":[...]} for t. Floats print
// in the shortest form that reads back exactly (float32 at 32 bits); NaN and
// infinities print as null; strings print as JSON strings.
func AppendTensorJSON(b []byte, t infer.Tensor) []byte {
	b = append(b, `{"data":[`...)
	b = appendData(b, t.Data)
	b = append(b, `],"shape":[`...)
	b = appendList(b, t.Shape, appendInt[int64])
	return append(b, "]}"...)
}

// appendData appends the elements of a tensor's data, comma-separated,
// without brackets: floats in the shortest form that reads back exactly,
// NaN and infinities as null, strings as JSON strings (bytes that are not
// UTF-8 as U+FFFD: JSON text cannot carry them).
func appendData(b []byte, data any) []byte {
	switch d := data.(type) {
	case []float32:
		b = appendList(b, d, appendFloat32)
	case []float64:
		b = appendList(b, d, appendFloat64)
	case []int32:
		b = appendList(b, d, appendInt[int32])
	case []int64:
		b = appendList(b, d, appendInt[int64])
	case []uint8:
		b = appendList(b, d, appendUint8)
	case []bool:
		b = appendList(b, d, strconv.AppendBool)
	case []int8:
		b = appendList(b, d, appendInt[int8])
	case []int16:
		b = appendList(b, d, appendInt[int16])
	case []uint16:
		b = appendList(b, d, appendUint[uint16])
	case []uint32:
		b = appendList(b, d, appendUint[uint32])
	case []uint64:
		b = appendList(b, d, appendUint[uint64])
	case []infer.F16:
		b = appendList(b, d, appendHalf[infer.F16])
	case []infer.BF16:
		b = appendList(b, d, appendHalf[infer.BF16])
	case []string:
		b = appendList(b, d, appendQuoted)
	}
	return b
}

// appendList appends the elements of d, comma-separated, each written by
// appendElem.
func appendList[T any](b []byte, d []T, appendElem func([]byte, T) []byte) []byte {
	for i, v := range d {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendElem(b, v)
	}
	return b
}

func appendInt[T int8 | int16 | int32 | int64](b []byte, v T) []byte {
	return strconv.AppendInt(b, int64(v), 10)
}

func appendUint8(b []byte, v uint8) []byte { return strconv.AppendUint(b, uint64(v), 10) }

func appendUint[T uint16 | uint32 | uint64](b []byte, v T) []byte {
	return strconv.AppendUint(b, uint64(v), 10)
}

// appendHalf writes a 16-bit float as the shortest number that reads back
// as the same float32, which is exactly its value: it reads back as the
// same 16 bits.
func appendHalf[T interface {
	infer.F16 | infer.BF16
	Float32() float32
}](b []byte, v T) []byte {
	return appendFloat32(b, v.Float32())
}

func appendFloat32(b []byte, v float32) []byte { return appendFloat(b, float64(v), 32) }

func appendFloat64(b []byte, v float64) []byte { return appendFloat(b, v, 64) }

func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as a JSON string.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
