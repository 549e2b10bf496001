package bench

import (
	"slices"
	"testing"
)

// TestCleanupsDeferred: `defer cs.run()` runs what is added after it,
// last added first.
func TestCleanupsDeferred(t *testing.T) {
	var got []int
	func() {
		var cs cleanups
		defer cs.run()
		for i := range 3 {
			cs.add(func() { got = append(got, i) })
		}
	}()
	if want := []int{2, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("cleanups run: got %v, want %v", got, want)
	}
}
