package wire

import (
	"bytes"
	"testing"
)

// TestSwapToLEBigEndian runs the big-endian path on any machine: each
// element's bytes turn around in place, one-byte elements stay, and a
// second swap restores the first.
func TestSwapToLEBigEndian(t *testing.T) {
	defer func(le bool) { hostLE = le }(hostLE)
	hostLE = false
	mem := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, tt := range []struct {
		elem int
		want []byte
	}{
		{1, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{2, []byte{2, 1, 4, 3, 6, 5, 8, 7}},
		{4, []byte{3, 4, 1, 2, 7, 8, 5, 6}},
		{4, []byte{2, 1, 4, 3, 6, 5, 8, 7}},
		{8, []byte{7, 8, 5, 6, 3, 4, 1, 2}},
	} {
		swapToLE(mem, tt.elem)
		if !bytes.Equal(mem, tt.want) {
			t.Fatalf("swapToLE(elem %d): got %v, want %v", tt.elem, mem, tt.want)
		}
	}
}
