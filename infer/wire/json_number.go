package wire

import "math"

// The hand-written number scanner: one pass over the bytes both checks JSON
// number syntax and accumulates the decimal mantissa and exponent. Numbers
// with at most 19 significant digits and a small exponent convert exactly
// with one float multiply or divide (Clinger's fast path); the rest fall
// back to strconv.

var (
	pow10f32 = [...]float32{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}
	pow10f64 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
		1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
)

// decimal is a scanned JSON number: value = (-1 if neg) * mant * 10^exp.
// trunc means digits past the 19th were dropped; integral means the text had
// no fraction or exponent part.
type decimal struct {
	mant     uint64
	exp      int
	neg      bool
	trunc    bool
	integral bool
}

// scanNumber reads a JSON number at the start of b and returns it and its
// length, or ok=false when b does not start with a valid number.
func scanNumber(b []byte) (d decimal, n int, ok bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		d.neg = true
		i++
	}
	digits := 0
	addDigit := func(c byte, frac bool) {
		switch {
		case d.mant == 0 && c == '0': // a leading zero only moves the point
		case digits < 19:
			d.mant = d.mant*10 + uint64(c-'0')
			digits++
		default: // past 19 digits: dropped, the point moves for integer ones
			d.trunc = true
			if !frac {
				d.exp++
			}
			return
		}
		if frac {
			d.exp--
		}
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			addDigit(b[i], false)
			i++
		}
	default:
		return d, 0, false
	}
	d.integral = true
	if i < len(b) && b[i] == '.' {
		d.integral = false
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			addDigit(b[i], true)
			i++
		}
		if i == start {
			return d, 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		d.integral = false
		e, end, ok := scanExponent(b, i+1)
		if !ok {
			return d, 0, false
		}
		d.exp += e
		i = end
	}
	return d, i, true
}

// scanExponent reads the exponent of a number, its sign and digits from
// b[i:] (after the 'e'), and returns it and the index after it; ok is
// false when it has no digits. Its size saturates at 100,000.
func scanExponent(b []byte, i int) (e, end int, ok bool) {
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if e < 100000 {
			e = e*10 + int(b[i]-'0')
		}
		i++
	}
	if i == start {
		return 0, 0, false
	}
	if neg {
		e = -e
	}
	return e, i, true
}

// float32 converts exactly when the fast path applies.
func (d decimal) float32() (float32, bool) { return fastFloat(d, 1<<24, pow10f32[:]) }

func (d decimal) float64() (float64, bool) { return fastFloat(d, 1<<53, pow10f64[:]) }

// fastFloat converts d exactly, in F's own arithmetic, when its mantissa
// is at most maxMant (exact in F) and its exponent's power of ten is
// exact in F (within pow): one rounded multiplication or division then
// gives the correctly rounded F. ok=false sends the caller to the slow
// path; a zero mantissa keeps its sign.
func fastFloat[F float32 | float64](d decimal, maxMant uint64, pow []F) (F, bool) {
	if d.trunc || d.mant > maxMant || d.exp < -(len(pow)-1) || d.exp > len(pow)-1 {
		if d.mant == 0 && !d.trunc {
			return F(math.Copysign(0, sign(d.neg))), true
		}
		return 0, false
	}
	f := F(d.mant)
	if d.exp < 0 {
		f /= pow[-d.exp]
	} else {
		f *= pow[d.exp]
	}
	if d.neg {
		f = -f
	}
	return f, true
}

// int64 converts an integral decimal without a fraction or exponent part;
// ok=false sends the caller to the slow path.
func (d decimal) int64() (int64, bool) {
	if !d.integral || d.trunc || d.exp != 0 || d.mant > math.MaxInt64 {
		return 0, false
	}
	if d.neg {
		return -int64(d.mant), true
	}
	return int64(d.mant), true
}

func sign(neg bool) float64 {
	if neg {
		return -1
	}
	return 1
}
