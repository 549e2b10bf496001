package wire

import (
	"reflect"

	"github.com/cluster-serving/cluster-serving/infer"
)

// decodeSparse densifies {"shape":[..],"data":[..],"indices":[[..],..]}.
// indices is one array per dim (indices[d][k] is value k's coordinate in
// dim d), or one array per value.
func decodeSparse(s *scanner, dt infer.DType) (infer.Tensor, error) {
	sp, err := readSparse(s, dt)
	if err != nil {
		return infer.Tensor{}, err
	}
	return sp.dense(dt)
}

// sparseJSON is the parsed {"shape","data","indices"} of a sparse tensor.
type sparseJSON struct {
	shape, idx, idxShape []int64
	vals                 infer.Tensor
}

// readSparse reads the sparse object's three keys; each is required.
func readSparse(s *scanner, dt infer.DType) (*sparseJSON, error) {
	var shape, idx []int64
	var idxShape []int64
	var vals infer.Tensor
	var haveShape, haveData, haveIdx bool
	err := s.object(func(key []byte) error {
		s.ws()
		from := s.i
		if err := s.skip(0); err != nil {
			return err
		}
		raw := s.b[from:s.i]
		var err error
		switch string(key) {
		case "shape":
			var t infer.Tensor
			t, err = decodeDense(&scanner{b: raw}, infer.Int64)
			if err == nil && len(t.Shape) != 1 {
				err = infer.NewInputError(-1, "", "sparse \"shape\" must be a flat array")
			}
			if err == nil {
				shape, haveShape = t.Data.([]int64), true
			}
		case "data":
			vals, err = decodeDense(&scanner{b: raw}, dt)
			if err == nil && len(vals.Shape) != 1 {
				err = infer.NewInputError(-1, "", "sparse \"data\" must be a flat array")
			}
			haveData = err == nil
		case "indices":
			var t infer.Tensor
			t, err = decodeDense(&scanner{b: raw}, infer.Int64)
			if err == nil {
				idx, idxShape, haveIdx = t.Data.([]int64), t.Shape, true
			}
		default:
			err = infer.NewInputError(-1, "", "sparse tensor has unknown key %q; want shape, data, indices", string(key))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !haveShape || !haveData || !haveIdx {
		return nil, infer.NewInputError(-1, "", "sparse tensor needs \"shape\", \"data\" and \"indices\"")
	}
	return &sparseJSON{shape: shape, idx: idx, idxShape: idxShape, vals: vals}, nil
}

// dense writes the sparse values into a dense tensor of dtype dt, after
// checking its shape's size and every index.
func (sp *sparseJSON) dense(dt infer.DType) (infer.Tensor, error) {
	shape, idx, idxShape, vals := sp.shape, sp.idx, sp.idxShape, sp.vals
	rank, nnz := len(shape), vals.Len()
	total := int64(1)
	for _, d := range shape {
		if d < 0 || d > maxSparseElems || (d > 0 && total > maxSparseElems/d) {
			return infer.Tensor{}, infer.NewInputError(-1, "", "sparse shape %s is invalid or too large", infer.ShapeString(shape))
		}
		total *= d
	}
	// coord(k, d) reads value k's coordinate in dim d.
	var coord func(k, d int) int64
	switch {
	case len(idxShape) == 2 && idxShape[0] == int64(rank) && idxShape[1] == int64(nnz):
		coord = func(k, d int) int64 { return idx[d*nnz+k] }
	case len(idxShape) == 2 && idxShape[0] == int64(nnz) && idxShape[1] == int64(rank):
		coord = func(k, d int) int64 { return idx[k*rank+d] }
	case rank == 1 && len(idxShape) == 1 && idxShape[0] == int64(nnz):
		coord = func(k, _ int) int64 { return idx[k] }
	default:
		return infer.Tensor{}, infer.NewInputError(-1, "", "sparse indices shape %s does not fit %d values of rank %d", infer.ShapeString(idxShape), nnz, rank)
	}
	out := infer.NewTensor(dt, shape)
	// vals holds dt's elements too; a string tensor's other elements are "".
	dst, src := reflect.ValueOf(out.Data), reflect.ValueOf(vals.Data)
	for k := 0; k < nnz; k++ {
		off := int64(0)
		for d := 0; d < rank; d++ {
			c := coord(k, d)
			if c < 0 || c >= shape[d] {
				return infer.Tensor{}, infer.NewInputError(-1, "", "sparse index %d out of range for dim %d of size %d", c, d, shape[d])
			}
			off = off*shape[d] + c
		}
		dst.Index(int(off)).Set(src.Index(k))
	}
	return out, nil
}
