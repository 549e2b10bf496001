package infer

import "math"

// F16 is the bit pattern of an IEEE 754 binary16 number (ONNX FLOAT16, OIP
// FP16). Go has no such type: a Float16 tensor holds []F16, which ONNX
// Runtime reads as the raw little-endian bits.
type F16 uint16

// BF16 is the bit pattern of a bfloat16 number (ONNX BFLOAT16, OIP BF16):
// the upper 16 bits of a float32. A BFloat16 tensor holds []BF16.
type BF16 uint16

// half is either 16-bit float type.
type half interface {
	F16 | BF16
	Float32() float32
}

// Float32 returns h widened to float32, exactly (every binary16 value is a
// float32 value); NaN keeps its sign and payload's top bits.
func (h F16) Float32() float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal: mant * 2^-24, exact in float32.
	f := float32(mant) * (1.0 / (1 << 24))
	return math.Float32frombits(sign | math.Float32bits(f))
}

// F16From rounds f to the nearest binary16 value, ties to even. Values
// beyond 65504 (after rounding) become infinities and NaN stays NaN: the
// codecs check ranges before they convert.
func F16From(f float32) F16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return F16(sign | 0x7e00 | uint16(mant>>13)) // quiet NaN
		}
		return F16(sign | 0x7c00)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return F16(sign | 0x7c00)
	}
	if e <= 0 {
		// Subnormal or zero in binary16: shift the full mantissa (with its
		// hidden bit) right, rounding to even on the bits shifted out.
		if e < -10 {
			return F16(sign)
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		return F16(sign | uint16(roundShift(m, shift)))
	}
	// Normal: round the 23-bit mantissa to 10 bits; a carry out of the
	// mantissa moves into the exponent, up to infinity, as it should.
	v := uint32(e)<<10 | mant>>13
	v = roundAdd(v, mant, 13)
	return F16(sign | uint16(v))
}

// Float32 returns h widened to float32, exactly.
func (h BF16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16From rounds f to the nearest bfloat16 value, ties to even; NaN stays
// a quiet NaN.
func BF16From(f float32) BF16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return BF16(b>>16 | 0x40)
	}
	return BF16(roundAdd(b>>16, b, 16))
}

// roundShift returns m >> shift rounded to nearest, ties to even.
func roundShift(m, shift uint32) uint32 {
	return roundAdd(m>>shift, m, shift)
}

// roundAdd rounds v, the value of full with its low dropped bits removed,
// to nearest, ties to even.
func roundAdd(v, full, dropped uint32) uint32 {
	half := uint32(1) << (dropped - 1)
	rest := full & (half<<1 - 1)
	if rest > half || rest == half && v&1 == 1 {
		v++
	}
	return v
}

// F16FromFloat64 rounds f to the nearest binary16 value, ties to even,
// with one rounding: f is first narrowed to float32 rounding to odd, which
// keeps the information a second rounding to 10 bits needs.
func F16FromFloat64(f float64) F16 { return F16From(narrowOdd(f)) }

// BF16FromFloat64 is F16FromFloat64 for bfloat16.
func BF16FromFloat64(f float64) BF16 { return BF16From(narrowOdd(f)) }

// narrowOdd converts f to float32, rounding an inexact result to the
// neighbour whose last mantissa bit is 1 (round to odd).
func narrowOdd(f float64) float32 {
	g := float32(f)
	if math.IsNaN(f) || float64(g) == f {
		return g
	}
	b := math.Float32bits(g)
	if b&1 == 1 {
		return g
	}
	if math.Abs(float64(g)) > math.Abs(f) {
		b-- // g was rounded away from zero: step back toward f
	} else {
		b++
	}
	return math.Float32frombits(b)
}
