package lazyfs

import (
	"slices"
	"testing"
)

// TestSpansAdd: ranges merge when they overlap or touch and stay apart
// otherwise; total counts each byte once.
func TestSpansAdd(t *testing.T) {
	cases := []struct {
		name  string
		adds  []span
		want  spans
		total int64
	}{
		{"empty range", []span{{5, 5}}, nil, 0},
		{"appends merge", []span{{0, 10}, {10, 20}, {20, 25}}, spans{{0, 25}}, 25},
		{"overlap", []span{{0, 10}, {5, 15}}, spans{{0, 15}}, 15},
		{"apart, out of order", []span{{20, 30}, {0, 10}}, spans{{0, 10}, {20, 30}}, 20},
		{"bridge", []span{{0, 10}, {20, 30}, {40, 50}, {5, 45}}, spans{{0, 50}}, 50},
		{"inside", []span{{0, 100}, {10, 20}}, spans{{0, 100}}, 100},
		{"between", []span{{0, 10}, {40, 50}, {20, 30}}, spans{{0, 10}, {20, 30}, {40, 50}}, 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s spans
			for _, a := range tc.adds {
				s = s.add(a.lo, a.hi)
			}
			if !slices.Equal(s, tc.want) || s.total() != tc.total {
				t.Errorf("got %v (total %d), want %v (total %d)", s, s.total(), tc.want, tc.total)
			}
		})
	}
}
