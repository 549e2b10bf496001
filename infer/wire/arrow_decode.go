package wire

import (
	"context"

	"bytes"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cluster-serving/cluster-serving/infer"
)

// DecodeRedisArrow decodes the data field of a Redis request entry: base64
// of an Arrow IPC stream (either framing: pyarrow before 0.15 wrote no
// continuation marker, and arrow-go reads both) holding one record batch
// with one column per model input. It returns one record: a tensor per
// model input, in model order, typed as the input, without the batch dim
// unless alreadyBatched. Columns map to inputs by name when every name
// matches, else by position when the counts match.
//
// A column is a tensor struct {indiceData, indiceShape, data, shape} (dense
// when indiceData is empty, else sparse and densified), or a utf8 value:
// '|'-joined strings (a string tensor, for a string input: see
// decodeStringValue) or a base64 image, pre-processed as info.Image says. Every problem is an *InputError; it never
// panics. Safe for concurrent use; it does not retain data. An image
// waits for the image budget without a deadline (see infer.DecodeImage);
// the Redis codec decodes under the request's ctx.
func DecodeRedisArrow(data []byte, info infer.ModelInfo, alreadyBatched bool) ([]infer.Tensor, error) {
	return decodeRedisArrow(context.Background(), data, info, alreadyBatched)
}

func decodeRedisArrow(ctx context.Context, data []byte, info infer.ModelInfo, alreadyBatched bool) (rec []infer.Tensor, err error) {
	raw, err := infer.DecodeBase64(data)
	if err != nil {
		return nil, infer.NewInputError(-1, "", "data is not base64: %v", err)
	}
	defer func() {
		// arrow-go checks most, not all, of a hostile stream's offsets.
		if r := recover(); r != nil {
			rec, err = nil, infer.NewInputError(-1, "", "corrupt Arrow stream: %v", r)
		}
	}()
	if err := checkIPCVectors(raw); err != nil {
		return nil, infer.NewInputError(-1, "", "corrupt Arrow stream: %v", err)
	}
	mem := &limitAllocator{left: 16<<20 + 4*int64(len(raw))}
	rd, err := ipc.NewReader(bytes.NewReader(raw), ipc.WithAllocator(mem))
	if err != nil {
		return nil, infer.NewInputError(-1, "", "data is not an Arrow IPC stream: %v", err)
	}
	defer rd.Release()
	if !rd.Next() {
		if err := rd.Err(); err != nil {
			return nil, infer.NewInputError(-1, "", "corrupt Arrow stream: %v", err)
		}
		return nil, infer.NewInputError(-1, "", "Arrow stream holds no record batch")
	}
	batch := rd.RecordBatch()
	batch.Retain()
	defer batch.Release()
	if rd.Next() {
		return nil, infer.NewInputError(-1, "", "Arrow stream holds more than one record batch; a Redis entry is one record")
	}
	if err := rd.Err(); err != nil {
		return nil, infer.NewInputError(-1, "", "corrupt Arrow stream: %v", err)
	}
	order, err := mapColumns(batch.Schema(), info.Inputs)
	if err != nil {
		return nil, err
	}
	rec = make([]infer.Tensor, len(info.Inputs))
	for j, in := range info.Inputs {
		t, err := decodeColumn(ctx, batch.Column(order[j]), in, alreadyBatched, info.Image)
		if err != nil {
			if ie, ok := err.(*infer.InputError); ok {
				ie.Instance, ie.Input = 0, in.Name
				return nil, ie
			}
			return nil, infer.NewInputError(0, in.Name, "%v", err)
		}
		rec[j] = t
	}
	return rec, nil
}

// mapColumns returns, per model input, the index of the column feeding it.
func mapColumns(schema *arrow.Schema, inputs []infer.IO) ([]int, error) {
	fields := schema.Fields()
	order := make([]int, len(inputs))
	byName := true
	for j, in := range inputs {
		idx := schema.FieldIndices(in.Name)
		if len(idx) != 1 || len(fields) != len(inputs) {
			byName = false
			break
		}
		order[j] = idx[0]
	}
	if byName {
		return order, nil
	}
	if len(fields) != len(inputs) {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Name
		}
		in := make([]string, len(inputs))
		for i, x := range inputs {
			in[i] = x.Name
		}
		return nil, infer.NewInputError(0, "", "got %d columns (%s), model has %d inputs (%s)", len(fields), strings.Join(names, ", "), len(inputs), strings.Join(in, ", "))
	}
	for j := range order {
		order[j] = j
	}
	return order, nil
}

// decodeColumn turns one column into the tensor for input in.
func decodeColumn(ctx context.Context, col arrow.Array, in infer.IO, batched bool, p infer.ImagePre) (infer.Tensor, error) {
	var t infer.Tensor
	switch c := col.(type) {
	case *array.Struct:
		var err error
		if t, err = decodeTensorStruct(c); err != nil {
			return infer.Tensor{}, err
		}
		if t, err = infer.CastFloat32(t, in.DType); err != nil {
			return infer.Tensor{}, err
		}
	case *array.String:
		if c.Len() != 1 || c.IsNull(0) {
			return infer.Tensor{}, infer.NewInputError(-1, "", "utf8 column has %d values, want one non-null value", c.Len())
		}
		return decodeStringValue(ctx, []byte(c.Value(0)), in, batched, p)
	case *array.LargeString:
		if c.Len() != 1 || c.IsNull(0) {
			return infer.Tensor{}, infer.NewInputError(-1, "", "utf8 column has %d values, want one non-null value", c.Len())
		}
		return decodeStringValue(ctx, []byte(c.Value(0)), in, batched, p)
	default:
		return infer.Tensor{}, infer.NewInputError(-1, "", "unsupported column type %s; want a tensor struct or utf8", col.DataType())
	}
	want := in.Shape
	if !batched && len(want) > 0 {
		want = want[1:]
	}
	if !infer.FitsShape(t.Shape, want) {
		return infer.Tensor{}, infer.NewInputError(-1, "", "shape %s does not match model %s", infer.ShapeString(t.Shape), infer.ShapeString(in.Shape))
	}
	return t, nil
}

// decodeTensorStruct reads the 4-row tensor struct of the original's
// Python client: row i fills only field i of indiceData, indiceShape, data,
// shape. Fields are found by name and each takes its one non-null row, so
// the row order does not matter.
func decodeTensorStruct(c *array.Struct) (infer.Tensor, error) {
	st := c.DataType().(*arrow.StructType)
	var vals [4][]float64 // indiceData, indiceShape, -, shape
	var data []float32    // data: float32 from the start, the big one
	var found [4]bool
	for i, name := range []string{"indiceData", "indiceShape", "data", "shape"} {
		k, ok := st.FieldIdx(name)
		if !ok {
			return infer.Tensor{}, infer.NewInputError(-1, "", "tensor struct has no field %q; want indiceData, indiceShape, data, shape", name)
		}
		var err error
		if i == 2 {
			data, ok, err = structListValues[float32](c.Field(k))
		} else {
			vals[i], ok, err = structListValues[float64](c.Field(k))
		}
		if err != nil {
			return infer.Tensor{}, infer.NewInputError(-1, "", "tensor struct field %q: %v", name, err)
		}
		found[i] = ok
	}
	if !found[2] || !found[3] {
		return infer.Tensor{}, infer.NewInputError(-1, "", "tensor struct needs data and shape")
	}
	shape, err := toDims(vals[3], "shape")
	if err != nil {
		return infer.Tensor{}, err
	}
	n := int64(1)
	for _, d := range shape {
		if n *= d; n > maxSparseElems {
			return infer.Tensor{}, infer.NewInputError(-1, "", "shape %s has more than %d elements", infer.ShapeString(shape), maxSparseElems)
		}
	}
	if len(vals[0]) == 0 {
		if int64(len(data)) != n {
			return infer.Tensor{}, infer.NewInputError(-1, "", "shape %s needs %d values, data has %d", infer.ShapeString(shape), n, len(data))
		}
		if data == nil {
			data = []float32{} // an empty tensor's data is not nil
		}
		return infer.Tensor{DType: infer.Float32, Shape: shape, Data: data}, nil
	}
	return densify(vals[0], vals[1], data, shape, make([]float32, n))
}

// densify writes sparse values into data. indiceShape is [nnz, rank] (the
// layout of the original's pyarrow payloads) or [rank, nnz] (BigDL's
// Tensor.sparse); the one that fits the values and shape is taken, the
// latter when both do.
func densify(idx, idxShape []float64, vals []float32, shape []int64, data []float32) (infer.Tensor, error) {
	rank, nnz := len(shape), len(vals)
	dims, err := toDims(idxShape, "indiceShape")
	if err != nil {
		return infer.Tensor{}, err
	}
	if len(dims) != 2 || dims[0]*dims[1] != int64(len(idx)) {
		return infer.Tensor{}, infer.NewInputError(-1, "", "indiceShape %s does not fit %d indices", infer.ShapeString(dims), len(idx))
	}
	var at func(k, d int) float64
	switch {
	case dims[0] == int64(rank) && dims[1] == int64(nnz):
		at = func(k, d int) float64 { return idx[d*nnz+k] }
	case dims[0] == int64(nnz) && dims[1] == int64(rank):
		at = func(k, d int) float64 { return idx[k*rank+d] }
	default:
		return infer.Tensor{}, infer.NewInputError(-1, "", "indiceShape %s does not fit %d values of rank %d", infer.ShapeString(dims), nnz, rank)
	}
	for k, v := range vals {
		off := int64(0)
		for d := range rank {
			i := at(k, d)
			if i != float64(int64(i)) || i < 0 || int64(i) >= shape[d] {
				return infer.Tensor{}, infer.NewInputError(-1, "", "sparse index %v of value %d is outside shape %s", i, k, infer.ShapeString(shape))
			}
			off = off*shape[d] + int64(i)
		}
		data[off] = v
	}
	return infer.Tensor{DType: infer.Float32, Shape: shape, Data: data}, nil
}

func toDims(v []float64, what string) ([]int64, error) {
	dims := make([]int64, len(v))
	for i, d := range v {
		if d < 0 || d != float64(int64(d)) || d > maxSparseElems {
			return nil, infer.NewInputError(-1, "", "%s has a bad dim %v", what, d)
		}
		dims[i] = int64(d)
	}
	return dims, nil
}

// listRow finds the one non-empty row of a list field: its values are
// child[lo:hi]. ok is false when every row is null; an empty non-null row
// gives ok and lo == hi.
func listRow(f arrow.Array) (child arrow.Array, lo, hi int, ok bool, err error) {
	var offsets func(i int) (int64, int64)
	switch l := f.(type) {
	case *array.List:
		offsets, child = l.ValueOffsets, l.ListValues()
	case *array.LargeList:
		offsets, child = l.ValueOffsets, l.ListValues()
	default:
		return nil, 0, 0, false, fmt.Errorf("type %s, want a list", f.DataType())
	}
	nonEmpty := false
	for i := range f.Len() {
		if f.IsNull(i) {
			continue
		}
		ok = true
		l, h := offsets(i)
		if l < 0 || h < l || h > int64(child.Len()) {
			return nil, 0, 0, false, fmt.Errorf("corrupt list offsets")
		}
		if h == l {
			continue
		}
		if nonEmpty {
			return nil, 0, 0, false, fmt.Errorf("more than one non-empty row")
		}
		nonEmpty, lo, hi = true, int(l), int(h)
	}
	if child.NullN() > 0 {
		for j := lo; j < hi; j++ {
			if child.IsNull(j) {
				return nil, 0, 0, false, fmt.Errorf("null value at %d", j-lo)
			}
		}
	}
	return child, lo, hi, ok, nil
}

// listNumbers converts child[lo:hi], numbers of one of the types the
// original's clients write, into a new slice of E, a whole slice at a
// time (a 150,528-value image was a type switch and an append per value).
func listNumbers[E float32 | float64](child arrow.Array, lo, hi int) ([]E, error) {
	out := make([]E, hi-lo)
	switch c := child.(type) {
	case *array.Float32:
		if o, same := any(out).([]float32); same {
			copy(o, c.Float32Values()[lo:hi])
			break
		}
		convertInto(out, c.Float32Values()[lo:hi])
	case *array.Float64:
		convertInto(out, c.Float64Values()[lo:hi])
	case *array.Int32:
		convertInto(out, c.Int32Values()[lo:hi])
	case *array.Int64:
		convertInto(out, c.Int64Values()[lo:hi])
	default:
		return nil, fmt.Errorf("list of %s, want numbers", child.DataType())
	}
	return out, nil
}

func convertInto[E float32 | float64, S float32 | float64 | int32 | int64](dst []E, src []S) {
	for i, v := range src {
		dst[i] = E(v)
	}
}

// structListValues returns the values of the one non-null row of a list
// field as E; ok is false when every row is null.
func structListValues[E float32 | float64](f arrow.Array) (vals []E, ok bool, err error) {
	child, lo, hi, ok, err := listRow(f)
	if err != nil || lo == hi {
		return nil, ok, err
	}
	vals, err = listNumbers[E](child, lo, hi)
	return vals, ok, err
}

// limitAllocator caps what arrow-go allocates for one payload: a message
// prefix claims its own length, so a few hostile bytes could otherwise ask
// for gigabytes. Past the cap it panics, which DecodeRedisArrow recovers
// into an *InputError.
type limitAllocator struct {
	left int64 // bytes still allowed; atomic
}

func (a *limitAllocator) take(n int) {
	if atomic.AddInt64(&a.left, -int64(n)) < 0 {
		panic(fmt.Sprintf("payload needs more than its share of memory (asked %d bytes)", n))
	}
}

func (a *limitAllocator) Allocate(size int) []byte {
	a.take(size)
	return memory.DefaultAllocator.Allocate(size)
}

func (a *limitAllocator) Reallocate(size int, b []byte) []byte {
	a.take(size - len(b))
	return memory.DefaultAllocator.Reallocate(size, b)
}

func (a *limitAllocator) Free(b []byte) {
	atomic.AddInt64(&a.left, int64(len(b)))
	memory.DefaultAllocator.Free(b)
}
