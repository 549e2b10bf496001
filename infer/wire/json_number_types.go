package wire

import (
	"math"
	"strconv"

	"github.com/cluster-serving/cluster-serving/infer"
)

// The JSON instances decoder's element parsers for the narrower integer
// types and the 16-bit floats: a fast path from the scanned decimal, and a
// slow path from the text that names the dtype when the value does not
// fit. A value out of the type's range is refused, never wrapped.

func fastInt[T int8 | int16](lo, hi int64) func(decimal) (T, bool) {
	return func(d decimal) (T, bool) {
		n, ok := d.int64()
		if !ok || n < lo || n > hi {
			return 0, false
		}
		return T(n), true
	}
}

func slowInt[T int8 | int16](lo, hi int64, name string) func([]byte) (T, string) {
	return func(b []byte) (T, string) {
		n, ok := parseInt(b, lo, hi)
		if !ok {
			return 0, name
		}
		return T(n), ""
	}
}

func fastUint[T uint16 | uint32 | uint64](hi uint64) func(decimal) (T, bool) {
	return func(d decimal) (T, bool) {
		if !d.integral || d.trunc || d.exp != 0 || d.neg && d.mant != 0 || d.mant > hi {
			return 0, false
		}
		return T(d.mant), true
	}
}

// slowUint parses an integral JSON number ("3", "3.0", "3e2") in [0, hi].
func slowUint[T uint16 | uint32 | uint64](hi uint64, name string) func([]byte) (T, string) {
	return func(b []byte) (T, string) {
		if !jsonNumber(b) {
			return 0, name
		}
		if n, err := strconv.ParseUint(str(b), 10, 64); err == nil {
			if n > hi {
				return 0, name
			}
			return T(n), ""
		}
		f, err := strconv.ParseFloat(str(b), 64)
		// 2^64 is the first float64 past MaxUint64.
		if err != nil || f != math.Trunc(f) || f < 0 || f >= 0x1p64 || uint64(f) > hi {
			return 0, name
		}
		return T(f), ""
	}
}

// fastHalf converts a decimal the float64 fast path reads exactly; a value
// that overflows the type goes to the slow path, which refuses it.
func fastHalf[T infer.F16 | infer.BF16](conv func(float64) T) func(decimal) (T, bool) {
	return func(d decimal) (T, bool) {
		f, ok := d.float64()
		if !ok {
			return 0, false
		}
		h := conv(f)
		return h, !halfIsInf(h)
	}
}

func slowHalf[T infer.F16 | infer.BF16](conv func(float64) T, name string) func([]byte) (T, string) {
	return func(b []byte) (T, string) {
		f, err := strconv.ParseFloat(str(b), 64)
		if err != nil || !jsonNumber(b) {
			return 0, name
		}
		h := conv(f)
		if halfIsInf(h) {
			return 0, name
		}
		return h, ""
	}
}

// halfIsInf reports whether h is an infinity.
func halfIsInf[T infer.F16 | infer.BF16](h T) bool {
	switch v := any(h).(type) {
	case infer.F16:
		return v&0x7fff == 0x7c00
	case infer.BF16:
		return v&0x7fff == 0x7f80
	}
	return false
}
