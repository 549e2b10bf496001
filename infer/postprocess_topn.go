package infer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// PostProcess is a parsed postProcessing setting. The zero value does
// nothing.
type PostProcess struct {
	Kind string // "", "topN" or "pickTopN"
	N    int
}

// ParsePostProcessing parses "", "topN(n)" or "pickTopN(n)" with n >= 1.
func ParsePostProcessing(s string) (PostProcess, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return PostProcess{}, nil
	}
	for _, kind := range []string{"topN", "pickTopN"} {
		rest, ok := strings.CutPrefix(s, kind+"(")
		if !ok {
			continue
		}
		arg, ok := strings.CutSuffix(rest, ")")
		if !ok {
			break
		}
		n, err := strconv.Atoi(strings.TrimSpace(arg))
		if err != nil || n < 1 {
			return PostProcess{}, fmt.Errorf("%q: n must be a positive integer", s)
		}
		return PostProcess{Kind: kind, N: n}, nil
	}
	return PostProcess{}, fmt.Errorf("%q: want topN(n) or pickTopN(n)", s)
}

// postProcessors formats a record's first output by Kind.
var postProcessors = map[string]func(Tensor, int) (string, error){"topN": TopN, "pickTopN": PickTopN}

// Apply formats one record's outputs as the post-processing string. With
// Kind "" it returns "", false.
func (p PostProcess) Apply(outputs []Tensor) (string, bool, error) {
	format, ok := postProcessors[p.Kind]
	if !ok {
		return "", false, nil
	}
	if len(outputs) == 0 {
		return "", true, fmt.Errorf("%s: model has no output", p.Kind)
	}
	s, err := format(outputs[0], p.N)
	return s, true, err
}

// Float64s returns t's data as float64s (any dtype; true is 1).
func Float64s(t Tensor) ([]float64, error) {
	switch d := t.Data.(type) {
	case []float32:
		return widen(d), nil
	case []float64:
		return d, nil
	case []int32:
		return widen(d), nil
	case []int64:
		return widen(d), nil
	case []uint8:
		return widen(d), nil
	case []int8:
		return widen(d), nil
	case []int16:
		return widen(d), nil
	case []uint16:
		return widen(d), nil
	case []uint32:
		return widen(d), nil
	case []uint64:
		return widen(d), nil
	case []F16:
		return widenHalf(d), nil
	case []BF16:
		return widenHalf(d), nil
	case []bool:
		out := make([]float64, len(d))
		for i, v := range d {
			if v {
				out[i] = 1
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %T", ErrUnsupportedDType, t.Data)
}

// widen converts numbers to float64s.
func widen[T float32 | int32 | int64 | uint8 | int8 | int16 | uint16 | uint32 | uint64](d []T) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v)
	}
	return out
}

// widenHalf converts 16-bit floats to float64s, exactly.
func widenHalf[T half](d []T) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v.Float32())
	}
	return out
}

// TopN flattens t and returns the n best scores, best first (ties keep index
// order), as "[[i,score][j,score]]": 0-based index, score printed as Java
// prints a float, and no comma between pairs. n larger than the tensor
// prints every element.
func TopN(t Tensor, n int) (string, error) {
	idx, v, err := Rank(t, n)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteByte('[')
	for k, i := range idx {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(',')
		b.WriteString(JavaFloat(v[k]))
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String(), nil
}

// Rank returns the indices of t's n highest scores, best first (ties by
// index, NaN last: TopN's order), and those scores as float32; fewer when
// t has fewer elements.
func Rank(t Tensor, n int) ([]int, []float32, error) {
	v, err := Float64s(t)
	if err != nil {
		return nil, nil, err
	}
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return greater(v[idx[a]], v[idx[b]]) })
	idx = idx[:min(n, len(idx))]
	scores := make([]float32, len(idx))
	for k, i := range idx {
		scores[k] = float32(v[i])
	}
	return idx, scores, nil
}

// greater orders scores descending with NaN last.
func greater(a, b float64) bool {
	if math.IsNaN(b) {
		return !math.IsNaN(a)
	}
	return a > b
}

// PickTopN prints the first n rows of a 2-D tensor (a 3-D tensor is squeezed
// along its first size-1 dim) as "[[a,b][c,d]]", values in Java float
// format. Other ranks are an error.
func PickTopN(t Tensor, n int) (string, error) {
	shape := t.Shape
	if len(shape) == 3 {
		switch {
		case shape[0] == 1:
			shape = shape[1:]
		case shape[1] == 1:
			shape = []int64{shape[0], shape[2]}
		case shape[2] == 1:
			shape = shape[:2]
		}
	}
	if len(shape) != 2 {
		return "", fmt.Errorf("pickTopN: output shape %s is not 2-D", ShapeString(t.Shape))
	}
	v, err := Float64s(t)
	if err != nil {
		return "", err
	}
	rows, cols := int(shape[0]), int(shape[1])
	if n > rows {
		n = rows
	}
	var b strings.Builder
	b.WriteByte('[')
	for r := 0; r < n; r++ {
		b.WriteByte('[')
		for c := 0; c < cols; c++ {
			if c > 0 {
				b.WriteByte(',')
			}
			b.WriteString(JavaFloat(float32(v[r*cols+c])))
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String(), nil
}

// JavaFloat formats f as Java's Float.toString does: "NaN", "Infinity",
// "-Infinity", decimal notation with at least one digit after the point for
// 1e-3 <= |f| < 1e7 ("5.0", "0.1306194"), otherwise computerized scientific
// notation "d.dddE±n" ("1.0E-5", "1.2345678E7"), using the shortest digits
// that read back as the same float32.
func JavaFloat(f float32) string {
	switch {
	case f != f:
		return "NaN"
	case math.IsInf(float64(f), 1):
		return "Infinity"
	case math.IsInf(float64(f), -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(float64(f)) {
			return "-0.0"
		}
		return "0.0"
	}
	abs := math.Abs(float64(f))
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(float64(f), 'f', -1, 32)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	// 'e' gives d.ddde±XX; Java wants d.dddEn with at least one fraction digit.
	s := strconv.FormatFloat(float64(f), 'e', -1, 32)
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
