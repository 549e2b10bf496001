package prepost

import (
	"context"
	"fmt"
	"slices"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// The topN step's tensors.
const (
	// TopNInput is the scores to rank: TYPE_FP32 [-1] unless the config
	// declares another numeric type or dims.
	TopNInput = "scores"
	// TopNIndices is TYPE_INT64 [k]: the best scores' 0-based indices,
	// best first.
	TopNIndices = "indices"
	// TopNValues is TYPE_FP32 [k]: the best scores, best first.
	TopNValues = "values"
	// TopNText is TYPE_STRING [1]: the original's topN string, e.g.
	// "[[4,5.0][3,4.0]]" (SPEC §2).
	TopNText = "text"
)

// topNStep ranks each row's scores with the original's topN(n). A plain
// value, safe for concurrent use.
type topNStep struct {
	n       int
	batched bool
	outs    []string // the outputs Info lists, in its order
}

// newTopN returns the topN step of cfg, whose parameters p holds.
func newTopN(cfg *kservepb.ModelConfig, p *params) (*Step, error) {
	n, err := topN(p)
	if err != nil {
		return nil, err
	}
	in := infer.IO{Name: TopNInput, DType: infer.Float32, Shape: []int64{-1}}
	if d := declared(decls(cfg.Input), TopNInput); d != nil {
		if in.DType = dtypeOf(d.dtype); in.DType == infer.Invalid || in.DType == infer.String {
			return nil, fieldError(cfg.GetName(), fmt.Sprintf("input[%d]", d.index), "input %q: data_type: got %s, want a number type (TYPE_FP32, TYPE_INT64, ...)", d.name, d.dtype)
		}
		in.Shape = d.dims
	}
	k := int64(-1) // a row's size is known only when every dim is
	if !slices.Contains(in.Shape, -1) {
		k = min(int64(n), infer.NumElems(in.Shape))
	}
	st := &topNStep{n: n, batched: cfg.MaxBatchSize > 0}
	s := &Step{run: st.run}
	err = s.describe(cfg, in, []infer.IO{
		{Name: TopNIndices, DType: infer.Int64, Shape: []int64{k}},
		{Name: TopNValues, DType: infer.Float32, Shape: []int64{k}},
		{Name: TopNText, DType: infer.String, Shape: []int64{1}},
	})
	if err != nil {
		return nil, err
	}
	st.outs = s.info.OutputNames()
	return s, nil
}

// run ranks each row of t: t itself, or each row along dim 0 of a whole
// record, flattened as the original flattens a record's output.
func (st *topNStep) run(_ context.Context, _ int, t infer.Tensor, whole bool) ([]infer.Tensor, error) {
	rows, lead, row := []infer.Tensor{t}, []int64{}, t.Shape
	if st.batched && whole {
		ns := make([]int64, t.Shape[0])
		for r := range ns {
			ns[r] = 1
		}
		var err error
		if rows, err = infer.Split(t, ns); err != nil {
			return nil, err
		}
		lead, row = t.Shape[:1], t.Shape[1:]
	}
	k := min(int64(st.n), infer.NumElems(row))
	idx, vals, texts := make([]int64, 0, int64(len(rows))*k), make([]float32, 0, int64(len(rows))*k), make([]string, len(rows))
	for r, rt := range rows {
		ix, vs, err := infer.Rank(rt, st.n)
		if err != nil {
			return nil, err
		}
		text, err := infer.TopN(rt, st.n)
		if err != nil {
			return nil, err
		}
		for _, i := range ix {
			idx = append(idx, int64(i))
		}
		vals, texts[r] = append(vals, vs...), text
	}
	shape := func(last int64) []int64 { return append(slices.Clone(lead), last) }
	out := make([]infer.Tensor, len(st.outs))
	for j, name := range st.outs {
		switch name {
		case TopNIndices:
			out[j] = infer.Tensor{DType: infer.Int64, Shape: shape(k), Data: idx}
		case TopNValues:
			out[j] = infer.Tensor{DType: infer.Float32, Shape: shape(k), Data: vals}
		case TopNText:
			out[j] = infer.Tensor{DType: infer.String, Shape: shape(1), Data: texts}
		}
	}
	return out, nil
}
