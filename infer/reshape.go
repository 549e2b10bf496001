package infer

import (
	"fmt"
	"slices"
)

// Reshape is a model configuration's reshape of one input or output
// (Triton's `reshape` in config.pbtxt): clients send and receive Dims,
// the graph takes and gives Shape, the two holding as many elements. When
// Shape has one dim fewer than the graph, the model batches and both
// leave out the batch dim, which stays as it is; otherwise they are the
// whole shape. A -1 in either is resolved from the tensor's size.
type Reshape struct {
	Dims  []int64
	Shape []int64
}

// reshapes are an engine's reshapes, one per input and output index of its
// graph (nil where there is none); the zero value reshapes nothing.
type reshapes struct {
	in, out []*reshapeAt
}

type reshapeAt struct {
	name        string
	lead        int // dims kept in front: 1 (the batch dim) or 0
	dims, shape []int64
}

// applyReshapes returns graph with each reshaped input and output at the
// shape clients see, and the plan to run it. A name the graph lacks, or a
// Shape that does not fit the graph's shape, wraps ErrConfigValidation.
func applyReshapes(graph ModelInfo, cfg map[string]Reshape) (ModelInfo, reshapes, error) {
	if len(cfg) == 0 {
		return graph, reshapes{}, nil
	}
	var r reshapes
	graph.Inputs, graph.Outputs = slices.Clone(graph.Inputs), slices.Clone(graph.Outputs)
	r.in, r.out = make([]*reshapeAt, len(graph.Inputs)), make([]*reshapeAt, len(graph.Outputs))
	for name, rs := range cfg {
		ios, plan := graph.Inputs, r.in
		i := slices.IndexFunc(ios, func(io IO) bool { return io.Name == name })
		if i < 0 {
			ios, plan = graph.Outputs, r.out
			i = slices.IndexFunc(ios, func(io IO) bool { return io.Name == name })
		}
		if i < 0 {
			return graph, r, fmt.Errorf("%w: reshape: %q is no input or output of the model", ErrConfigValidation, name)
		}
		g := ios[i].Shape
		lead := len(g) - len(rs.Shape)
		if (lead != 0 && lead != 1) || !FitsShape(rs.Shape, g[lead:]) {
			return graph, r, fmt.Errorf("%w: reshape %q: shape %s does not fit the model's %s", ErrConfigValidation, name, ShapeString(rs.Shape), ShapeString(g))
		}
		if !slices.Contains(rs.Dims, -1) && !slices.Contains(rs.Shape, -1) && NumElems(rs.Dims) != NumElems(rs.Shape) {
			return graph, r, fmt.Errorf("%w: reshape %q: dims %s and shape %s hold different numbers of elements", ErrConfigValidation, name, ShapeString(rs.Dims), ShapeString(rs.Shape))
		}
		plan[i] = &reshapeAt{name: name, lead: lead, dims: slices.Clone(rs.Dims), shape: slices.Clone(rs.Shape)}
		ios[i].Shape = append(slices.Clone(g[:lead]), rs.Dims...)
	}
	return graph, r, nil
}

// run runs s on inputs at the graph's shapes and returns its outputs at
// the declared ones. An input whose size fits no shape returns an
// *InputError.
func (r reshapes) run(s *Session, inputs []Tensor) ([]Tensor, error) {
	if r.in == nil {
		return s.Run(inputs)
	}
	in := slices.Clone(inputs)
	for i, p := range r.in {
		if p != nil && i < len(in) {
			t, err := p.to(in[i], p.shape)
			if err != nil {
				return nil, NewInputError(-1, p.name, "%v", err)
			}
			in[i] = t
		}
	}
	outs, err := s.Run(in)
	if err != nil {
		return nil, err
	}
	for i, p := range r.out {
		if p != nil && i < len(outs) {
			if outs[i], err = p.to(outs[i], p.dims); err != nil {
				return nil, fmt.Errorf("run model %q: output %q: %w", s.info.Name, p.name, err)
			}
		}
	}
	return outs, nil
}

// to returns t with its shape after the kept dims made target (its -1
// resolved from t's size); the data is shared.
func (p *reshapeAt) to(t Tensor, target []int64) (Tensor, error) {
	if len(t.Shape) < p.lead {
		return t, fmt.Errorf("reshape %s to %s: no batch dim", ShapeString(t.Shape), ShapeString(target))
	}
	n := NumElems(t.Shape[p.lead:])
	known, free := int64(1), -1
	for i, d := range target {
		if d < 0 {
			free = i
		} else {
			known *= d
		}
	}
	shape := append(slices.Clone(t.Shape[:p.lead]), target...)
	if free >= 0 && known > 0 && n%known == 0 {
		shape[p.lead+free] = n / known
	}
	if NumElems(shape[p.lead:]) != n || slices.Contains(shape, -1) {
		return t, fmt.Errorf("reshape %s to %s: element counts differ", ShapeString(t.Shape), ShapeString(append(slices.Clone(t.Shape[:p.lead]), target...)))
	}
	t.Shape = shape
	return t, nil
}
