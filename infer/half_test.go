package infer_test

import (
	"math"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

func TestF16From(t *testing.T) {
	tests := []halfFromCase[infer.F16]{
		{"one", 1, 0x3c00},
		{"minus one", -1, 0xbc00},
		{"zero", 0, 0x0000},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"max", 65504, 0x7bff},
		{"below the max's rounding edge", 65519, 0x7bff},
		{"tie at the max rounds to inf", 65520, 0x7c00},
		{"overflow", 1e6, 0x7c00},
		{"inf", float32(math.Inf(1)), 0x7c00},
		{"minus inf", float32(math.Inf(-1)), 0xfc00},
		{"smallest normal", 0x1p-14, 0x0400},
		{"largest subnormal", 1023 * 0x1p-24, 0x03ff},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half the smallest subnormal ties to zero", 0x1p-25, 0x0000},
		{"just above half the smallest subnormal", 0x1.000002p-25, 0x0001},
		{"subnormal tie to even 2", 3 * 0x1p-25, 0x0002},
		{"subnormal rounds up into the normals", 0x1.ffcp-15, 0x0400},
		{"tiny", 1e-10, 0x0000},
		{"tie to even down", 1 + 0x1p-11, 0x3c00},
		{"tie to even up", 1 + 3*0x1p-11, 0x3c02},
		{"above the tie", 1 + 0x1p-11 + 0x1p-20, 0x3c01},
		{"third", 1.0 / 3, 0x3555},
		{"0.1", 0.1, 0x2e66},
	}
	checkHalfFrom(t, "F16", infer.F16From, f16IsNaN, tests)
}

func TestF16Float32(t *testing.T) {
	tests := []struct {
		in   infer.F16
		want float32
	}{
		{0x3c00, 1},
		{0x7bff, 65504},
		{0x0001, 0x1p-24},
		{0x03ff, 1023 * 0x1p-24},
		{0x0400, 0x1p-14},
		{0xc000, -2},
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	}
	for _, tt := range tests {
		if got := tt.in.Float32(); got != tt.want {
			t.Errorf("F16(%#04x).Float32(): got %g, want %g", uint16(tt.in), got, tt.want)
		}
	}
	if got := infer.F16(0x7e00).Float32(); !math.IsNaN(float64(got)) {
		t.Errorf("F16(0x7e00).Float32(): got %g, want NaN", got)
	}
}

// TestF16RoundTrip widens every binary16 bit pattern and rounds it back:
// widening is exact, so every non-NaN value must come back bit for bit.
func TestF16RoundTrip(t *testing.T) {
	roundTripAll(t, "F16", infer.F16From, f16IsNaN)
}

func TestBF16From(t *testing.T) {
	tests := []halfFromCase[infer.BF16]{
		{"one", 1, 0x3f80},
		{"minus two", -2, 0xc000},
		{"tie to even down", math.Float32frombits(0x3f808000), 0x3f80},
		{"tie to even up", math.Float32frombits(0x3f818000), 0x3f82},
		{"above the tie", math.Float32frombits(0x3f808001), 0x3f81},
		{"max float32 rounds to inf", math.MaxFloat32, 0x7f80},
		{"inf", float32(math.Inf(1)), 0x7f80},
		{"smallest subnormal", math.Float32frombits(0x00010000), 0x0001},
		{"third", 1.0 / 3, 0x3eab},
	}
	checkHalfFrom(t, "BF16", infer.BF16From, bf16IsNaN, tests)
}

// TestBF16RoundTrip does for bfloat16 what TestF16RoundTrip does.
func TestBF16RoundTrip(t *testing.T) {
	roundTripAll(t, "BF16", infer.BF16From, bf16IsNaN)
}

// f16IsNaN reports whether h's bits are a binary16 NaN: all-ones
// exponent, non-zero fraction.
func f16IsNaN(h infer.F16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// bf16IsNaN reports whether h widens to a NaN.
func bf16IsNaN(h infer.BF16) bool { return math.IsNaN(float64(h.Float32())) }

// halfFromCase is a float32 and the 16-bit float H it must round to.
type halfFromCase[H any] struct {
	name string
	in   float32
	want H
}

// checkHalfFrom checks from (named name) on each case, and that it
// rounds a NaN to a NaN (isNaN).
func checkHalfFrom[H ~uint16](t *testing.T, name string, from func(float32) H, isNaN func(H) bool, tests []halfFromCase[H]) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := from(tt.in); got != tt.want {
				t.Errorf("%sFrom(%g): got %#04x, want %#04x", name, tt.in, uint16(got), uint16(tt.want))
			}
		})
	}
	if got := from(float32(math.NaN())); !isNaN(got) {
		t.Errorf("%sFrom(NaN): got %#04x, want a NaN", name, uint16(got))
	}
}

// roundTripAll widens every bit pattern of H and rounds it back with
// from: every non-NaN value must come back bit for bit, a NaN as a NaN
// (isNaN).
func roundTripAll[H interface {
	~uint16
	Float32() float32
}](t *testing.T, name string, from func(float32) H, isNaN func(H) bool) {
	for i := range 1 << 16 {
		h := H(i)
		f := h.Float32()
		got := from(f)
		if math.IsNaN(float64(f)) {
			if !isNaN(got) {
				t.Errorf("%sFrom(%s(%#04x).Float32()): got %#04x, want a NaN", name, name, i, uint16(got))
			}
			continue
		}
		if got != h {
			t.Errorf("%sFrom(%s(%#04x).Float32() = %g): got %#04x", name, name, i, f, uint16(got))
		}
	}
}

// TestF16FromFloat64 checks the one rounding of float64 inputs where a
// float32 step would round twice.
func TestF16FromFloat64(t *testing.T) {
	tests := []struct {
		in   float64
		want infer.F16
	}{
		{1, 0x3c00},
		// Just above the tie between 1 and 1+2^-10: float32 alone would
		// round it onto the tie, and the tie to 1.
		{1 + 0x1p-11 + 0x1p-40, 0x3c01},
		{1 + 0x1p-11 - 0x1p-40, 0x3c00},
		{65504, 0x7bff},
		{65520, 0x7c00},
		{-0x1p-24, 0x8001},
		{1e-300, 0x0000},
		{1e300, 0x7c00},
	}
	for _, tt := range tests {
		if got := infer.F16FromFloat64(tt.in); got != tt.want {
			t.Errorf("F16FromFloat64(%g): got %#04x, want %#04x", tt.in, uint16(got), uint16(tt.want))
		}
	}
	if got := infer.BF16FromFloat64(1 + 0x1p-8 + 0x1p-40); got != 0x3f81 {
		t.Errorf("BF16FromFloat64(1+2^-8+2^-40): got %#04x, want 0x3f81", uint16(got))
	}
}
