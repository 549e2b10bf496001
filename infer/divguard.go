package infer

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
)

// Integer division by zero, and the signed minimum divided by -1, raise
// SIGFPE inside ONNX Runtime's C++ Div and Mod kernels. A signal in C code
// cannot be recovered in Go: it ends the process, and with it every other
// request the worker holds. So infer reads the graph at load (before ONNX
// Runtime sees it) and plans:
//   - a Div or Mod whose divisor is a request input gets a divGuard: every
//     record is checked before it runs, and a zero divisor (or -1 where the
//     dividend may hold the minimum) is a 400 naming the input;
//   - a divisor that is a constant (initializer or Constant node) holding
//     a zero fails the load with an error naming the node;
//   - a divisor computed inside the graph cannot be checked without
//     running the graph: the load logs a warning that such a model can end
//     the process, and skips the warm-up (its ones might be the very values
//     that divide by zero).

// divGuard checks one request input that an integer Div or Mod divides by.
type divGuard struct {
	op, node string
	divisor  string // the request input divided by
	dividend string // the dividend when it is a request input, else ""
	// minRisk means the dividend is not a request input and may hold the
	// type's minimum, whose division by -1 overflows: a -1 divisor is
	// refused too.
	minRisk bool

	divisorIdx, dividendIdx int // model input indices (bind); -1 for none
}

// divPlan is what planDivision found in a model's graph.
type divPlan struct {
	guards []divGuard
	// unchecked names the integer (or untyped) divisions whose divisor is
	// computed inside the graph; "" when the graph could not be read.
	unchecked []string
	// unread is set when the graph could not be read at all.
	unread error
}

// planDivision reads the graph of b, the bytes of modelFile, and plans its
// division guards. A constant divisor holding a zero is an error: the model
// cannot run.
func planDivision(modelFile string, b []byte) (divPlan, error) {
	g, err := parseModelGraph(b)
	if err != nil {
		return divPlan{unread: err}, nil
	}
	g.propagateTypes()
	consts := g.constants()
	var plan divPlan
	for _, n := range g.nodes {
		if !isIntDivision(n, g.types) {
			continue
		}
		if err := plan.add(g, consts, n); err != nil {
			return divPlan{}, fmt.Errorf("load model %q: %w", modelFile, err)
		}
	}
	return plan, nil
}

// isIntDivision reports whether n is a Div or Mod of the default domain
// whose operands are integers or of a type the graph does not declare.
func isIntDivision(n onnxNode, types map[string]int32) bool {
	if (n.opType != "Div" && n.opType != "Mod") || (n.domain != "" && n.domain != "ai.onnx") || len(n.inputs) < 2 {
		return false
	}
	t := types[n.inputs[1]]
	if t == 0 {
		t = types[n.inputs[0]]
	}
	return t == 0 || onnxIntType(t)
}

// add plans the integer division n.
func (p *divPlan) add(g *onnxGraph, consts map[string][]byte, n onnxNode) error {
	dividend, divisor := n.inputs[0], n.inputs[1]
	desc := fmt.Sprintf("%s node %q", n.opType, n.name)
	if c, ok := consts[divisor]; ok {
		t, err := parseTensorProto(c)
		if err != nil {
			return err
		}
		if zero, _ := t.hasZero(); zero {
			return fmt.Errorf("%s divides by the constant %q, which holds a zero: integer division by zero ends the process", desc, divisor)
		}
		return nil
	}
	if !slices.Contains(g.inputs, divisor) {
		p.unchecked = append(p.unchecked, fmt.Sprintf("%s (divisor %q)", desc, divisor))
		return nil
	}
	gd := divGuard{op: n.opType, node: n.name, divisor: divisor, minRisk: true}
	if slices.Contains(g.inputs, dividend) {
		gd.dividend, gd.minRisk = dividend, false
	} else if c, ok := consts[dividend]; ok {
		gd.minRisk = constHasMin(c)
	}
	p.guards = append(p.guards, gd)
	return nil
}

// constHasMin reports whether a constant dividend may hold its type's
// minimum (true when it cannot be read).
func constHasMin(b []byte) bool {
	p, err := parseTensorProto(b)
	if err != nil {
		return true
	}
	t, err := p.tensor()
	if err != nil {
		return p.elemType != onnxUint8 && p.elemType != onnxUint16 && p.elemType != onnxUint32 && p.elemType != onnxUint64
	}
	return hasMin(t)
}

// constants returns the TensorProto bytes of every initializer and
// Constant node output, by name.
func (g *onnxGraph) constants() map[string][]byte {
	c := make(map[string][]byte, len(g.initial))
	for name, b := range g.initial {
		c[name] = b
	}
	for _, n := range g.nodes {
		if n.opType == "Constant" && n.value != nil && len(n.outputs) == 1 {
			c[n.outputs[0]] = n.value
		}
	}
	return c
}

// propagateTypes gives the outputs of nodes their element type where the
// graph does not declare it: fixed for the ops that fix it, else the first
// typed input's (right for the elementwise ops that feed a Div). It is a
// best effort, only used to tell integer divisions from float ones.
func (g *onnxGraph) propagateTypes() {
	for _, n := range g.nodes {
		t := outputType(n, g.types)
		if t == 0 {
			continue
		}
		for _, o := range n.outputs {
			if _, ok := g.types[o]; !ok && o != "" {
				g.types[o] = t
			}
		}
	}
}

func outputType(n onnxNode, types map[string]int32) int32 {
	switch n.opType {
	case "Cast":
		return n.castTo
	case "Constant":
		if n.value == nil {
			return 0
		}
		p, err := parseTensorHead(n.value)
		if err != nil {
			return 0
		}
		return p.elemType
	case "Shape", "Size", "ArgMax", "ArgMin", "NonZero":
		return onnxInt64
	case "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf":
		return onnxBool
	}
	for _, in := range n.inputs {
		if t, ok := types[in]; ok && in != "" {
			return t
		}
	}
	return 0
}

// bind resolves the guards' input names to the model's input indices and
// logs the divisions it cannot guard. It returns whether warming the model
// up is safe.
func (p *divPlan) bind(info ModelInfo) (warmUpSafe bool) {
	idx := func(name string) int {
		if name == "" {
			return -1
		}
		return slices.IndexFunc(info.Inputs, func(in IO) bool { return in.Name == name })
	}
	kept := p.guards[:0]
	for _, g := range p.guards {
		g.divisorIdx, g.dividendIdx = idx(g.divisor), idx(g.dividend)
		if g.divisorIdx >= 0 {
			kept = append(kept, g)
		}
	}
	p.guards = kept
	switch {
	case p.unread != nil:
		slog.Warn("infer: cannot read the model's graph to guard integer division; a zero integer divisor would end the process",
			"model", info.Path, "err", p.unread)
		return false
	case len(p.unchecked) > 0:
		slog.Warn("infer: integer division by a value computed inside the graph: a request that makes it zero ends the process (SIGFPE in ONNX Runtime); warm-up skipped",
			"model", info.Path, "nodes", strings.Join(p.unchecked, ", "))
		return false
	}
	return true
}

// check refuses record i (one tensor per model input, in model order)
// when a guarded divisor holds a zero, or a -1 that could divide the
// minimum of its type.
func (p *divPlan) check(i int, rec []Tensor) error {
	for _, g := range p.guards {
		d := rec[g.divisorIdx]
		if hasValue(d, 0) {
			return NewInputError(i, g.divisor, "holds a zero, and %s node %q divides integers by it: integer division by zero is refused", g.op, g.node)
		}
		if !hasValue(d, -1) {
			continue
		}
		if g.minRisk || g.dividendIdx >= 0 && hasMin(rec[g.dividendIdx]) {
			return NewInputError(i, g.divisor, "holds -1 where %s node %q may divide the %s minimum by it, which overflows: refused", g.op, g.node, d.DType)
		}
	}
	return nil
}

// hasValue reports whether an integer tensor holds v.
func hasValue(t Tensor, v int64) bool {
	switch d := t.Data.(type) {
	case []int32:
		return slices.Contains(d, int32(v))
	case []int64:
		return slices.Contains(d, v)
	case []uint8:
		return v >= 0 && slices.Contains(d, uint8(v))
	case []int8:
		return v >= math.MinInt8 && slices.Contains(d, int8(v))
	case []int16:
		return v >= math.MinInt16 && slices.Contains(d, int16(v))
	case []uint16:
		return v >= 0 && slices.Contains(d, uint16(v))
	case []uint32:
		return v >= 0 && slices.Contains(d, uint32(v))
	case []uint64:
		return v >= 0 && slices.Contains(d, uint64(v))
	}
	return false
}

// hasMin reports whether a signed integer tensor holds its type's minimum.
func hasMin(t Tensor) bool {
	switch t.DType {
	case Int32:
		return hasValue(t, math.MinInt32)
	case Int64:
		return hasValue(t, math.MinInt64)
	case Int8:
		return hasValue(t, math.MinInt8)
	case Int16:
		return hasValue(t, math.MinInt16)
	}
	return false
}
