package wire

import (
	"context"

	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cluster-serving/cluster-serving/infer"
)

// maxDepth bounds array nesting so hostile input cannot exhaust the stack.
const maxDepth = 32

// maxSparseElems bounds a densified sparse tensor, whose size the body's
// length does not bound.
const maxSparseElems = 1 << 24

// jsonExample is shown in errors about the request's overall form.
const jsonExample = `want {"instances":[{"<input name>":[[1.0,2.0],[3.0,4.0]]}]}`

// DecodeInstances parses a JSON body {"instances":[{name: value, ...}, ...]}
// into records: one tensor per model input (in model order) per instance,
// typed as the input. Values are numbers or nested arrays (dense), or sparse
// objects {"shape":[..],"data":[..],"indices":[[..],..]} which are
// densified. Keys map to inputs by name; when no key names an input and
// there are as many keys as inputs, they map in order. Tensors keep the shape
// sent: without alreadyBatched it must match the model input without its
// batch dim, with it the full model shape (-1 matches any size).
//
// Every problem with the body is an *InputError naming the instance and
// input. DecodeInstances never panics and does not retain body. Safe for
// concurrent use.
//
// A string value feeds an image input (rank 3 without the batch dim): it is
// base64 of a JPEG or PNG, pre-processed with the defaults of ImagePre.
// For a string input (infer.String, OIP BYTES) values are JSON strings
// instead: one for a scalar, nested arrays of them for a tensor; a number,
// bool or null among them is an *InputError.
func DecodeInstances(body []byte, inputs []infer.IO, alreadyBatched bool) ([][]infer.Tensor, error) {
	return decodeInstances(context.Background(), body, inputs, alreadyBatched, infer.ImagePre{})
}

// decodeInstances is DecodeInstances with images pre-processed by pre.
func decodeInstances(ctx context.Context, body []byte, inputs []infer.IO, alreadyBatched bool, pre infer.ImagePre) ([][]infer.Tensor, error) {
	s := &scanner{b: body}
	var records [][]infer.Tensor
	found := false
	err := s.object(func(key []byte) error {
		if string(key) != "instances" {
			return s.skip(0)
		}
		found = true
		records = records[:0]
		return s.array(func(i int) error {
			rec, err := decodeInstance(ctx, s, i, inputs, alreadyBatched, pre)
			if err != nil {
				return err
			}
			records = append(records, rec)
			return nil
		})
	})
	if err == nil {
		s.ws()
		if s.i < len(s.b) {
			err = s.errorf("unexpected data after the request object")
		}
	}
	if err != nil {
		if ie, ok := err.(*infer.InputError); ok {
			return nil, ie
		}
		return nil, infer.NewInputError(-1, "", "invalid JSON: %v; %s", err, jsonExample)
	}
	if !found {
		return nil, infer.NewInputError(-1, "", `no "instances" in the request; %s`, jsonExample)
	}
	if len(records) == 0 {
		return nil, infer.NewInputError(-1, "", `no "instances": the list is empty; %s`, jsonExample)
	}
	return records, nil
}

type rawValue struct {
	key string
	t   infer.Tensor // decoded as the input the key maps to (by name, else by position)
	err error        // decode error, reported only if the value is used
}

func decodeInstance(ctx context.Context, s *scanner, inst int, inputs []infer.IO, batched bool, pre infer.ImagePre) ([]infer.Tensor, error) {
	var vals []rawValue
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, infer.NewInputError(inst, "", "instance is not an object of named inputs; %s", jsonExample)
	}
	// Decode each value as it comes, typed as the input its key names, or
	// as the input at its position when no key names one: that saves a
	// second pass over a large tensor.
	err := s.object(func(key []byte) error {
		v, err := decodeInstanceValue(ctx, s, string(key), len(vals), inst, inputs, batched, pre)
		if err != nil {
			return err
		}
		vals = append(vals, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	order, ierr := mapInputs(inst, vals, inputs)
	if ierr != nil {
		return nil, ierr
	}
	return instanceRecord(inst, vals, order, inputs, batched)
}

// decodeInstanceValue decodes the value of key, the pos-th of its
// instance, as the input key names (else the input at pos). A value that
// does not decode keeps its error in rawValue, unless key names its input
// (the error is returned) or the JSON is malformed.
func decodeInstanceValue(ctx context.Context, s *scanner, key string, pos, inst int, inputs []infer.IO, batched bool, pre infer.ImagePre) (rawValue, error) {
	j := pos
	byName := false
	for k := range inputs {
		if inputs[k].Name == key {
			j, byName = k, true
			break
		}
	}
	v := rawValue{key: key}
	if j >= len(inputs) {
		v.err = s.skipFast()
		if v.err == nil {
			v.err = infer.NewInputError(-1, "", "not decoded")
		}
		return v, nil
	}
	s.ws()
	from := s.i
	v.t, v.err = decodeValueAt(ctx, s, inputs[j], batched, pre)
	if v.err != nil {
		if _, ok := v.err.(*syntaxError); ok {
			return v, v.err
		}
		if ie, ok := v.err.(*infer.InputError); ok && byName {
			ie.Instance, ie.Input = inst, inputs[j].Name
			return v, ie
		}
		// The key may be unknown: skip the value and report the mapping
		// problem first.
		s.i = from
		if err := s.skipFast(); err != nil {
			return v, err
		}
	}
	return v, nil
}

// instanceRecord takes the decoded values in model input order (order,
// from mapInputs) and checks each against its input.
func instanceRecord(inst int, vals []rawValue, order []int, inputs []infer.IO, batched bool) ([]infer.Tensor, error) {
	rec := make([]infer.Tensor, len(inputs))
	for j, in := range inputs {
		v := vals[order[j]]
		if err := v.err; err != nil {
			if ie, ok := err.(*infer.InputError); ok {
				ie.Instance, ie.Input = inst, in.Name
				return nil, ie
			}
			return nil, infer.NewInputError(inst, in.Name, "%v", err)
		}
		want := in.Shape
		if !batched && len(want) > 0 {
			want = want[1:]
		}
		if !infer.FitsShape(v.t.Shape, want) {
			return nil, infer.NewInputError(inst, in.Name, "shape %s does not match model %s", infer.ShapeString(v.t.Shape), infer.ShapeString(in.Shape))
		}
		rec[j] = v.t
	}
	return rec, nil
}

// mapInputs returns, per model input, the index of the value feeding it.
func mapInputs(inst int, vals []rawValue, inputs []infer.IO) ([]int, error) {
	names := make([]string, len(inputs))
	byName := make(map[string]int, len(inputs))
	for j, in := range inputs {
		names[j] = in.Name
		byName[in.Name] = j
	}
	list := strings.Join(names, ", ")
	seen := make(map[string]bool, len(vals))
	matched := 0
	var unknown string
	for _, v := range vals {
		if seen[v.key] {
			return nil, infer.NewInputError(inst, v.key, "given twice")
		}
		seen[v.key] = true
		if _, ok := byName[v.key]; ok {
			matched++
		} else if unknown == "" {
			unknown = v.key
		}
	}
	order := make([]int, len(inputs))
	switch {
	case matched == len(vals):
		for j := range order {
			order[j] = -1
		}
		for i, v := range vals {
			order[byName[v.key]] = i
		}
		for j, o := range order {
			if o < 0 {
				return nil, infer.NewInputError(inst, names[j], "missing; model inputs: %s", list)
			}
		}
	case matched == 0 && len(vals) == len(inputs):
		for j := range order {
			order[j] = j
		}
	case matched == 0:
		return nil, infer.NewInputError(inst, "", "got %d inputs, model has %d (%s)", len(vals), len(inputs), list)
	default:
		return nil, infer.NewInputError(inst, unknown, "unknown input; model inputs: %s", list)
	}
	return order, nil
}

// decodeValueAt decodes the value at s for input in: a dense number/array,
// a sparse object, or a string (see decodeStringValue). For a string input
// (infer.String) a JSON string is one element and arrays of them a
// tensor: no '|' splitting, no image.
func decodeValueAt(ctx context.Context, s *scanner, in infer.IO, batched bool, pre infer.ImagePre) (infer.Tensor, error) {
	s.ws()
	if s.i >= len(s.b) {
		return infer.Tensor{}, s.errorf("unexpected end of input")
	}
	switch s.b[s.i] {
	case '"':
		if in.DType == infer.String {
			break // one string element: a scalar (parseDenseAs)
		}
		v, err := s.str()
		if err != nil {
			return infer.Tensor{}, err
		}
		return decodeStringValue(ctx, v, in, batched, pre)
	case '{':
		from := s.i
		if err := s.skipFast(); err != nil {
			return infer.Tensor{}, err
		}
		return decodeSparse(&scanner{b: s.b[from:s.i]}, in.DType)
	}
	hint := 1
	if len(in.Shape) > 1 {
		hint = int(infer.NumElems(in.Shape[1:]))
		if hint <= 0 || hint > 1<<24 {
			hint = 1
		}
	}
	return parseDenseAs(s, in.DType, hint)
}

// decodeDense decodes a whole buffer holding one dense value.
func decodeDense(s *scanner, dt infer.DType) (infer.Tensor, error) {
	t, err := parseDenseAs(s, dt, 1)
	if err != nil {
		return infer.Tensor{}, err
	}
	s.ws()
	if s.i != len(s.b) {
		return infer.Tensor{}, s.errorf("unexpected data after the tensor")
	}
	return t, nil
}

// parseDenseAs parses a number or nested arrays at s into a tensor of dtype
// dt; hint is the expected element count. A JSON null is an error, as
// the original's instances have it; parseDenseNulls reads it as NaN.
func parseDenseAs(s *scanner, dt infer.DType, hint int) (infer.Tensor, error) {
	return parseDense3(s, dt, hint, false)
}

// parseDenseNulls is parseDenseAs with a JSON null read as NaN where dt is
// a float (the Open Inference Protocol's data may hold nulls); elsewhere a
// null is an error still.
func parseDenseNulls(s *scanner, dt infer.DType, hint int) (infer.Tensor, error) {
	return parseDense3(s, dt, hint, true)
}

func parseDense3(s *scanner, dt infer.DType, hint int, nulls bool) (infer.Tensor, error) {
	var (
		shape []int64
		data  any
		err   error
	)
	switch dt {
	case infer.Float32:
		shape, data, err = parseDense(s, make([]float32, 0, hint), decimal.float32, orNull(nulls, parseF32, float32(math.NaN())))
	case infer.Float64:
		shape, data, err = parseDense(s, make([]float64, 0, hint), decimal.float64, orNull(nulls, parseF64, math.NaN()))
	case infer.Int32:
		shape, data, err = parseDense(s, make([]int32, 0, hint), fastI32, parseI32)
	case infer.Int64:
		shape, data, err = parseDense(s, make([]int64, 0, hint), decimal.int64, parseI64)
	case infer.Uint8:
		shape, data, err = parseDense(s, make([]uint8, 0, hint), fastU8, parseU8)
	case infer.Bool:
		shape, data, err = parseDense(s, make([]bool, 0, hint), fastBool, parseBool)
	case infer.Int8:
		shape, data, err = parseDense(s, make([]int8, 0, hint), fastInt[int8](math.MinInt8, math.MaxInt8), slowInt[int8](math.MinInt8, math.MaxInt8, "an int8"))
	case infer.Int16:
		shape, data, err = parseDense(s, make([]int16, 0, hint), fastInt[int16](math.MinInt16, math.MaxInt16), slowInt[int16](math.MinInt16, math.MaxInt16, "an int16"))
	case infer.Uint16:
		shape, data, err = parseDense(s, make([]uint16, 0, hint), fastUint[uint16](math.MaxUint16), slowUint[uint16](math.MaxUint16, "a uint16"))
	case infer.Uint32:
		shape, data, err = parseDense(s, make([]uint32, 0, hint), fastUint[uint32](math.MaxUint32), slowUint[uint32](math.MaxUint32, "a uint32"))
	case infer.Uint64:
		shape, data, err = parseDense(s, make([]uint64, 0, hint), fastUint[uint64](math.MaxUint64), slowUint[uint64](math.MaxUint64, "a uint64"))
	case infer.Float16:
		shape, data, err = parseDense(s, make([]infer.F16, 0, hint), fastHalf(infer.F16FromFloat64), orNull(nulls, slowHalf(infer.F16FromFloat64, "a float16"), infer.F16FromFloat64(math.NaN())))
	case infer.BFloat16:
		shape, data, err = parseDense(s, make([]infer.BF16, 0, hint), fastHalf(infer.BF16FromFloat64), orNull(nulls, slowHalf(infer.BF16FromFloat64, "a bfloat16"), infer.BF16FromFloat64(math.NaN())))
	case infer.String:
		shape, data, err = parseStrings(s, hint)
	default:
		return infer.Tensor{}, fmt.Errorf("%w: %s", infer.ErrUnsupportedDType, dt)
	}
	if err != nil {
		return infer.Tensor{}, err
	}
	return infer.Tensor{DType: dt, Shape: shape, Data: data}, nil
}

// orNull makes conv, when nulls is set, read a JSON null as nan.
func orNull[T any](nulls bool, conv func([]byte) (T, string), nan T) func([]byte) (T, string) {
	if !nulls {
		return conv
	}
	return func(b []byte) (T, string) {
		if string(b) == "null" {
			return nan, ""
		}
		return conv(b)
	}
}

// denseParser walks nested arrays, learning the shape from the first array
// at each depth and writing leaves straight into data.
type denseParser[T any] struct {
	s         *scanner
	shape     []int64
	rankFixed bool
	data      []T
	fast      func(decimal) (T, bool)  // exact fast path, or false
	conv      func([]byte) (T, string) // slow path; names the dtype on failure
	text      func([]byte) T           // a JSON string's element; nil: strings are refused
}

func parseDense[T any](s *scanner, buf []T, fast func(decimal) (T, bool), conv func([]byte) (T, string)) ([]int64, []T, error) {
	p := &denseParser[T]{s: s, data: buf, fast: fast, conv: conv}
	if err := p.parse(0); err != nil {
		return nil, nil, err
	}
	if p.shape == nil {
		p.shape = []int64{}
	}
	return p.shape, p.data, nil
}

// parseStrings parses a JSON string or nested arrays of them into the
// shape and elements of a string tensor; a number, bool or null among
// them is an *InputError.
func parseStrings(s *scanner, hint int) ([]int64, []string, error) {
	// Each element takes at least three bytes (`"",`): a hint past what
	// the body can hold would only allocate.
	hint = max(1, min(hint, (len(s.b)-s.i)/3))
	p := &denseParser[string]{
		s:    s,
		data: make([]string, 0, hint),
		fast: func(decimal) (string, bool) { return "", false },
		conv: func([]byte) (string, string) { return "", "a string (BYTES elements are JSON strings)" },
		text: func(b []byte) string { return string(b) },
	}
	if err := p.parse(0); err != nil {
		return nil, nil, err
	}
	if p.shape == nil {
		p.shape = []int64{}
	}
	return p.shape, p.data, nil
}

var errRagged = &infer.InputError{Instance: -1, Msg: "ragged array: sub-arrays differ in length or depth"}

// parse reads the value at depth: a number or a nested array.
func (p *denseParser[T]) parse(depth int) error {
	s := p.s
	s.ws()
	if s.i >= len(s.b) {
		return s.errorf("unexpected end of input")
	}
	if s.b[s.i] != '[' {
		return p.leaf(depth)
	}
	return p.array(depth)
}

// leaf reads one number (or bool) at depth, which fixes the rank.
func (p *denseParser[T]) leaf(depth int) error {
	s := p.s
	p.rankFixed = true
	if depth != len(p.shape) {
		return ragged()
	}
	start := s.i
	if d, n, ok := scanNumber(s.b[s.i:]); ok {
		s.i += n
		if v, ok := p.fast(d); ok {
			p.data = append(p.data, v)
			return nil
		}
	} else {
		if s.b[s.i] == '"' && p.text != nil {
			v, err := s.str()
			if err != nil {
				return err
			}
			p.data = append(p.data, p.text(v))
			return nil
		}
		if s.b[s.i] == '"' {
			_, bad := p.conv(nil)
			return infer.NewInputError(-1, "", "wrong dtype: a string where %s is expected", bad)
		}
		for s.i < len(s.b) && isValueByte(s.b[s.i]) {
			s.i++
		}
		if s.i == start {
			return s.errorf("unexpected %q", s.b[s.i])
		}
	}
	v, bad := p.conv(s.b[start:s.i])
	if bad != "" {
		return infer.NewInputError(-1, "", "wrong dtype: %s is not %s", truncate(s.b[start:s.i]), bad)
	}
	p.data = append(p.data, v)
	return nil
}

// array reads the array at depth and records (or checks) its length as
// dim depth of the shape.
func (p *denseParser[T]) array(depth int) error {
	s := p.s
	if depth >= maxDepth {
		return infer.NewInputError(-1, "", "arrays nested deeper than %d", maxDepth)
	}
	switch {
	case p.rankFixed && depth >= len(p.shape):
		return ragged()
	case !p.rankFixed && depth == len(p.shape):
		p.shape = append(p.shape, -1)
	}
	s.i++ // '['
	n := int64(0)
	s.ws()
	var err error
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
	} else if p.rankFixed && depth == len(p.shape)-1 {
		// The innermost rows hold most of the numbers: a flat loop.
		n, err = p.row()
	} else {
		n, err = p.elems(depth)
	}
	if err != nil {
		return err
	}
	if depth >= len(p.shape) {
		return ragged()
	}
	switch p.shape[depth] {
	case -1:
		p.shape[depth] = n
	case n:
	default:
		return ragged()
	}
	return nil
}

// elems parses the elements of an array at depth after its '[' through
// its ']' and returns how many there were.
func (p *denseParser[T]) elems(depth int) (int64, error) {
	s := p.s
	for n := int64(1); ; n++ {
		if err := p.parse(depth + 1); err != nil {
			return 0, err
		}
		if end, err := s.arrayNext(); err != nil {
			return 0, err
		} else if end {
			return n, nil
		}
	}
}

// row parses the numbers of an innermost array after its '[' through its
// ']' and returns how many there were.
func (p *denseParser[T]) row() (int64, error) {
	if f, ok := any(p).(*denseParser[float32]); ok {
		return rowFloat32(f)
	}
	s := p.s
	n := int64(0)
	for {
		if err := p.rowElem(); err != nil {
			return 0, err
		}
		n++
		if end, err := s.rowNext(); err != nil || end {
			return n, err
		}
	}
}

// rowElem reads one element of an innermost array.
func (p *denseParser[T]) rowElem() error {
	s := p.s
	if s.i < len(s.b) && s.b[s.i] == '[' {
		return ragged()
	}
	d, w, ok := scanNumber(s.b[s.i:])
	var v T
	if ok {
		v, ok = p.fast(d)
	}
	if ok {
		s.i += w
		p.data = append(p.data, v)
		return nil
	}
	return p.parse(len(p.shape))
}

// rowNext reads what follows an element of an innermost array: a comma
// (and the blanks after it) or the closing ']'.
func (s *scanner) rowNext() (end bool, err error) {
	if s.i < len(s.b) && s.b[s.i] == ',' { // the common case, first
		s.i++
		s.ws() // pretty-printed rows: a comma, then a newline or space
		return false, nil
	}
	end, err = s.arrayNext()
	if err == nil && !end {
		s.ws()
	}
	return end, err
}

// rowFloat32 is row for float32 tensors, the images' type. A short plain
// number, an optional '-', digits and an optional fraction, with at most 9
// digits, at most 10 of them after the point and a value of at most 2^24
// without its point, followed by ',' or ']' (pixel values such as 0 to 255
// or 0.4567, most of an image body), converts in this loop: the same
// Clinger fast path as decimal.float32 (one exact division), without
// scanNumber's general bookkeeping or the call through p.fast. Any other
// element (an exponent, a leading zero, blanks, more digits, a bad byte)
// goes the general way, rowElem, from its start. Both ways give the same
// value and the same errors.
func rowFloat32(p *denseParser[float32]) (int64, error) {
	s := p.s
	b := s.b
	n := int64(0)
	for {
		if v, next, ok := plainFloat32(b, s.i); ok {
			p.data = append(p.data, v)
			n++
			s.i = next + 1
			if b[next] == ']' {
				return n, nil
			}
			if s.i < len(b) && b[s.i] <= ' ' {
				s.ws()
			}
			continue
		}
		if err := p.rowElem(); err != nil {
			return 0, err
		}
		n++
		if end, err := s.rowNext(); err != nil || end {
			return n, err
		}
	}
}

// plainFloat32 reads the short plain number at b[i:] that rowFloat32
// converts itself, and returns its value and the index of the ',' or ']'
// after it; ok is false for any other element.
func plainFloat32(b []byte, i int) (v float32, next int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	j, mant, digits := i, uint32(0), 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' && digits < 10 {
		mant = mant*10 + uint32(b[j]-'0')
		j++
		digits++
	}
	if digits == 0 || digits > 1 && b[i] == '0' {
		return 0, 0, false
	}
	frac := 0
	if j < len(b) && b[j] == '.' {
		j++
		for j < len(b) && b[j] >= '0' && b[j] <= '9' && digits < 10 {
			mant = mant*10 + uint32(b[j]-'0')
			j++
			digits++
			frac++
		}
		if frac == 0 {
			return 0, 0, false
		}
	}
	if digits > 9 || mant > 1<<24 || j >= len(b) || b[j] != ',' && b[j] != ']' {
		return 0, 0, false
	}
	v = float32(mant)
	if frac > 0 {
		v /= pow10f32[frac]
	}
	if neg {
		v = -v
	}
	return v, j, true
}

func ragged() error {
	e := *errRagged
	return &e
}

func isValueByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' ||
		c >= 'a' && c <= 'z' // true, false, null: checked by conv
}

// str views b as a string without copying. The string must not outlive the
// call it is passed to (strconv copies what it keeps in errors).
func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func fastI32(d decimal) (int32, bool) {
	n, ok := d.int64()
	if !ok || n < math.MinInt32 || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

func fastU8(d decimal) (uint8, bool) {
	n, ok := d.int64()
	if !ok || n < 0 || n > math.MaxUint8 {
		return 0, false
	}
	return uint8(n), true
}

func fastBool(d decimal) (bool, bool) {
	n, ok := d.int64()
	if !ok {
		return false, false
	}
	return n != 0, true
}

func parseF64(b []byte) (float64, string) {
	f, err := strconv.ParseFloat(str(b), 64)
	if err != nil || !jsonNumber(b) {
		return 0, "a float64"
	}
	return f, ""
}

func parseF32(b []byte) (float32, string) {
	f, err := strconv.ParseFloat(str(b), 32)
	if err != nil || !jsonNumber(b) {
		return 0, "a float32"
	}
	return float32(f), ""
}

// parseInt parses an integral JSON number ("3", "3.0", "3e2") in [lo, hi].
func parseInt(b []byte, lo, hi int64) (int64, bool) {
	if n, err := strconv.ParseInt(str(b), 10, 64); err == nil {
		return n, n >= lo && n <= hi && jsonNumber(b)
	}
	f, err := strconv.ParseFloat(str(b), 64)
	if err != nil || !jsonNumber(b) || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, false
	}
	return int64(f), true
}

func parseI64(b []byte) (int64, string) {
	n, ok := parseInt(b, math.MinInt64, math.MaxInt64)
	if !ok {
		return 0, "an int64"
	}
	return n, ""
}

func parseI32(b []byte) (int32, string) {
	n, ok := parseInt(b, math.MinInt32, math.MaxInt32)
	if !ok {
		return 0, "an int32"
	}
	return int32(n), ""
}

func parseU8(b []byte) (uint8, string) {
	n, ok := parseInt(b, 0, math.MaxUint8)
	if !ok {
		return 0, "a uint8"
	}
	return uint8(n), ""
}

func parseBool(b []byte) (bool, string) {
	switch string(b) {
	case "true":
		return true, ""
	case "false":
		return false, ""
	}
	f, err := strconv.ParseFloat(str(b), 64)
	if err != nil || !jsonNumber(b) {
		return false, "a bool"
	}
	return f != 0, ""
}

// jsonNumber rejects what strconv accepts but JSON does not (inf, nan,
// hex, underscores, a leading '+', a point without digits after it as in
// "1.", a leading zero as in "01"): b must be one JSON number, whole.
func jsonNumber(b []byte) bool {
	_, n, ok := scanNumber(b)
	return ok && n == len(b)
}
