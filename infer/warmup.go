package infer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
)

// WarmupFolder is the folder of a model directory that holds the files of
// WarmupFile inputs: Triton's, <model>/warmup/.
const WarmupFolder = "warmup"

// WarmupSource says where a warmup input's values come from (Triton's
// ModelWarmup.Input input_data_type).
type WarmupSource uint8

const (
	// WarmupZero is zero_data: zeros, false, empty strings.
	WarmupZero WarmupSource = iota
	// WarmupRandom is random_data: floats in [0, 1), integers in
	// [1, 127] (never 0 or -1, which a model dividing by the input
	// refuses, so that a load never fails by chance), random bools, and
	// empty strings (Triton's random strings are its zero data too).
	WarmupRandom
	// WarmupFile is input_data_file: the raw bytes of WarmupInput.File, as
	// Triton reads them: one row's elements, little-endian, row-major
	// (at least that many bytes; Triton ignores the rest), or for a
	// String input exactly one row's strings, each a 4-byte little-endian
	// length and its bytes. Every row of the sample gets the same values.
	WarmupFile
)

// WarmupInput is one input of a warmup sample.
type WarmupInput struct {
	// Name is the model input's name.
	Name string
	// DType is the input's element type; it must be the model's.
	DType DType
	// Dims is one row's shape (without the batch dim) when the sample has
	// Rows, else the whole shape. No dim may be -1.
	Dims []int64
	// Source is where the values come from.
	Source WarmupSource
	// File is the WarmupFile's name, relative to the model directory's
	// WarmupFolder; it may not leave that folder.
	File string
}

// WarmupSample is one sample of Triton's model_warmup, as Engine.Warmup
// runs it.
type WarmupSample struct {
	// Name names the sample in errors and logs.
	Name string
	// Rows is the batch size: the inputs get a batch dim of Rows before
	// their Dims. 0: the model has no batch dim (max_batch_size 0), and
	// Dims are the whole shapes.
	Rows int
	// Inputs give every model input once.
	Inputs []WarmupInput
	// Count is how many times the sample runs on each session; 0 means 1.
	Count int
}

// Warmup runs sample s on each of the engine's sessions (Triton warms up
// each model instance), s.Count times each, and returns the runs made.
// dir is the model directory: WarmupFile inputs are read from its
// WarmupFolder. The record is checked as a request's is (Infer): dtypes,
// shapes, max_batch_size, strings, zero integer divisors. Run it before
// the engine serves: a sample's runs do not go through the batcher, so
// that each session gets them (sessions are safe for concurrent use, so
// a Warmup while serving only competes for them).
//
// Every error names the sample, "model_warmup %q: ...", and the input at
// fault: an input the model lacks or one it misses, another dtype, a -1
// dim, a file that is missing or holds too few bytes, random data on a
// model whose integer division cannot be guarded (random values could
// divide by zero and end the process), a run that fails, ctx's end. A
// panic while running is returned as an error too.
func (e *Engine) Warmup(ctx context.Context, dir string, s WarmupSample) (runs int, err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("infer: warmup panicked", "model", e.info.Path, "sample", s.Name, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("model_warmup %q: panic: %v", s.Name, p)
		}
	}()
	rec, err := e.warmupRecord(dir, s)
	if err == nil {
		rec, _, err = e.prepare(0, rec)
	}
	if err != nil {
		return 0, fmt.Errorf("model_warmup %q: %w", s.Name, noInstance(err))
	}
	for _, sess := range e.sessions {
		for range max(s.Count, 1) {
			if err := ctx.Err(); err != nil {
				return runs, fmt.Errorf("model_warmup %q: %w", s.Name, err)
			}
			if _, err := e.reshape.run(sess, rec); err != nil {
				return runs, fmt.Errorf("model_warmup %q: run %d: %w", s.Name, runs+1, err)
			}
			runs++
		}
	}
	return runs, nil
}

// noInstance drops the instance of a request's *InputError: a warmup
// sample is one record, and "instance 0" would only puzzle.
func noInstance(err error) error {
	var ie *InputError
	if !errors.As(err, &ie) || ie.Instance < 0 {
		return err
	}
	c := *ie
	c.Instance = -1
	return &c
}

// warmupRecord builds s's record: one tensor per model input, in model
// order, with the batch dim of s.Rows when it has one.
func (e *Engine) warmupRecord(dir string, s WarmupSample) ([]Tensor, error) {
	if s.Rows < 0 {
		return nil, fmt.Errorf("batch size %d: want >= 0", s.Rows)
	}
	given := make(map[string]WarmupInput, len(s.Inputs))
	for _, in := range s.Inputs {
		if _, dup := given[in.Name]; dup {
			return nil, fmt.Errorf("input %q: given twice", in.Name)
		}
		given[in.Name] = in
	}
	for _, in := range s.Inputs {
		if !e.hasInput(in.Name) {
			return nil, fmt.Errorf("input %q: not an input of the model: its inputs are %v", in.Name, e.info.InputNames())
		}
	}
	unguarded := len(e.div.unchecked) > 0 || e.div.unread != nil
	rec := make([]Tensor, len(e.info.Inputs))
	for j, mi := range e.info.Inputs {
		in, ok := given[mi.Name]
		switch {
		case !ok:
			return nil, fmt.Errorf("input %q: missing: the sample must give every model input %v", mi.Name, e.info.InputNames())
		case in.DType != mi.DType:
			return nil, fmt.Errorf("input %q: data type %s differs from the model's %s", mi.Name, in.DType, mi.DType)
		case in.Source == WarmupRandom && unguarded:
			return nil, fmt.Errorf("input %q: random data on a model that divides integers by a value it computes (see the load's warning): a random value could divide by zero and end the process; use zero_data or input_data_file", mi.Name)
		}
		t, err := warmupTensor(dir, in, s.Rows)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", mi.Name, err)
		}
		rec[j] = t
	}
	return rec, nil
}

func (e *Engine) hasInput(name string) bool {
	for _, in := range e.info.Inputs {
		if in.Name == name {
			return true
		}
	}
	return false
}

// maxWarmupElems bounds a warmup tensor's elements, so that a typo in
// dims fails the load instead of taking the machine's memory.
const maxWarmupElems = 1 << 28

// warmupTensor is in's tensor, rows rows of its Dims (0: Dims whole).
func warmupTensor(dir string, in WarmupInput, rows int) (Tensor, error) {
	shape := in.Dims
	if rows > 0 {
		shape = append([]int64{int64(rows)}, in.Dims...)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return Tensor{}, fmt.Errorf("dims %s: every dim must be set (no -1) for warmup", ShapeString(in.Dims))
		}
		if d > 0 && n > maxWarmupElems/d {
			return Tensor{}, fmt.Errorf("dims %s: more than %d elements", ShapeString(shape), maxWarmupElems)
		}
		n *= d
	}
	switch in.Source {
	case WarmupZero:
		return NewTensor(in.DType, shape), nil
	case WarmupRandom:
		t := NewTensor(in.DType, shape)
		fillRandom(t)
		return t, nil
	case WarmupFile:
		return fileTensor(dir, in, shape, max(rows, 1))
	}
	return Tensor{}, fmt.Errorf("unknown warmup source %d", in.Source)
}

// fileTensor reads in.File (see WarmupFile) as one row of shape and
// repeats it copies times.
func fileTensor(dir string, in WarmupInput, shape []int64, copies int) (Tensor, error) {
	rel := filepath.Join(WarmupFolder, in.File)
	if in.File == "" || !filepath.IsLocal(in.File) {
		return Tensor{}, fmt.Errorf("input_data_file %q: want a file name inside the model's %s/ folder", in.File, WarmupFolder)
	}
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		return Tensor{}, fmt.Errorf("input_data_file: %w", err)
	}
	row := NumElems(in.Dims)
	t := NewTensor(in.DType, shape)
	if in.DType == String {
		vals, err := lengthPrefixed(b)
		if err != nil {
			return Tensor{}, fmt.Errorf("file %s: %w", rel, err)
		}
		if int64(len(vals)) != row {
			return Tensor{}, fmt.Errorf("file %s holds %d strings, %d wanted (each a 4-byte little-endian length, then its bytes)", rel, len(vals), row)
		}
		d := t.Data.([]string)
		for i := range copies {
			copy(d[i*len(vals):], vals)
		}
		return t, nil
	}
	size := int(row) * binary.Size(makeData(in.DType, 1))
	if size < 0 {
		return Tensor{}, fmt.Errorf("data type %s cannot be read from a file", in.DType)
	}
	if len(b) < size {
		return Tensor{}, fmt.Errorf("file %s holds %d bytes, %d wanted", rel, len(b), size)
	}
	if _, err := binary.Decode(bytes.Repeat(b[:size], copies), binary.LittleEndian, t.Data); err != nil {
		return Tensor{}, fmt.Errorf("file %s: %w", rel, err)
	}
	return t, nil
}

// lengthPrefixed splits b into its strings, each a 4-byte little-endian
// length and that many bytes: Triton's (and OIP raw) BYTES elements.
func lengthPrefixed(b []byte) ([]string, error) {
	var out []string
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("string %d: %d bytes left, too few for its 4-byte length", len(out), len(b))
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return nil, fmt.Errorf("string %d: length %d runs past the end of the file", len(out), n)
		}
		out = append(out, string(b[4:4+n]))
		b = b[4+n:]
	}
	return out, nil
}

// fillRandom fills t as WarmupRandom says.
func fillRandom(t Tensor) {
	switch d := t.Data.(type) {
	case []bool:
		fillWith(d, func() bool { return rand.IntN(2) == 1 })
	case []string: // empty: Triton's random strings are its zero data
	case []float32:
		fillWith(d, rand.Float32)
	case []float64:
		fillWith(d, rand.Float64)
	case []F16:
		fillWith(d, func() F16 { return F16From(rand.Float32()) })
	case []BF16:
		fillWith(d, func() BF16 { return BF16From(rand.Float32()) })
	default:
		fillSmallInts(t)
	}
}

func fillWith[T any](s []T, v func() T) {
	for i := range s {
		s[i] = v()
	}
}

// fillSmallInts fills t, of an integer data type, with random integers
// in [1, 127]. Such an integer fits every integer type as its low byte,
// the others zero, so t is decoded from those bytes as fileTensor decodes
// a file, whatever its type.
func fillSmallInts(t Tensor) {
	size := binary.Size(makeData(t.DType, 1))
	b := make([]byte, t.Len()*size)
	for i := 0; i < len(b); i += size {
		b[i] = byte(1 + rand.IntN(127))
	}
	_, _ = binary.Decode(b, binary.LittleEndian, t.Data)
}
