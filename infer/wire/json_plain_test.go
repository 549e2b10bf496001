package wire

import (
	"math"
	"strconv"
	"testing"
)

// plainFloat32 must agree with the general way (scanNumber, then
// strconv.ParseFloat at 32 bits) wherever it says ok, bit for bit.
func checkPlainFloat32(t *testing.T, b []byte) bool {
	t.Helper()
	v, next, ok := plainFloat32(b, 0)
	if !ok {
		return false
	}
	_, n, sok := scanNumber(b)
	if !sok || n != next {
		t.Fatalf("%q: plainFloat32 ends at %d, scanNumber at %d (ok %v)", b, next, n, sok)
	}
	if b[next] != ',' && b[next] != ']' {
		t.Fatalf("%q: plainFloat32 ends before %q, want , or ]", b, b[next])
	}
	f, err := strconv.ParseFloat(string(b[:next]), 32)
	if err != nil {
		t.Fatalf("%q: plainFloat32 took %q, which strconv refuses: %v", b, b[:next], err)
	}
	if math.Float32bits(v) != math.Float32bits(float32(f)) {
		t.Fatalf("%q: got %v (%#x), want %v (%#x)", b, v, math.Float32bits(v), float32(f), math.Float32bits(float32(f)))
	}
	return true
}

func TestPlainFloat32(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"0,", true}, {"-0,", true}, {"255]", true}, {"0.5,", true}, {"-12.25]", true},
		{"0.05,", true}, {"0.1,", true}, {"16777216,", true}, {"1677721.6,", true},
		{"0.00000001,", true}, {"123456789,", false}, // 9 digits, past 2^24
		{"16777217,", false}, {"1234567890,", false}, {"0.123456789,", false},
		{"01,", false}, {"-01,", false}, {"00.5,", false}, {"1.,", false}, {".5,", false},
		{"1e5,", false}, {"1.5E-3,", false}, {"1 ,", false}, {"-,", false}, {"-", false},
		{"1", false}, {"", false}, {"+1,", false}, {"1x", false}, {"--1,", false}, {"1.2.3,", false},
	}
	for _, tt := range tests {
		if got := checkPlainFloat32(t, []byte(tt.in)); got != tt.ok {
			t.Errorf("plainFloat32(%q): got ok %v, want %v", tt.in, got, tt.ok)
		}
	}
	if v, _, _ := plainFloat32([]byte("-0,"), 0); !math.Signbit(float64(v)) {
		t.Errorf("plainFloat32(-0): got %v, want -0", v)
	}
}

func FuzzPlainFloat32(f *testing.F) {
	for _, s := range []string{"0,", "-0]", "255,", "0.5]", "16777216,", "16777217,", "01,", "1.,", "1e5,", "0.00000001]", "9999999.9,"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPlainFloat32(t, b) })
}
