package infer

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// onnxNode is one NodeProto of a model's graph or of a subgraph in one of
// its attributes (If, Loop, Scan bodies).
type onnxNode struct {
	opType, domain, name string
	inputs, outputs      []string
	castTo               int32  // Cast's "to" attribute, 0 when absent
	value                []byte // Constant's "value" TensorProto, nil when absent
}

// onnxGraph is what infer reads of a model's graph: its nodes (subgraphs'
// included, in order), the names fed by the caller (graph inputs that no
// initializer backs), the element types known by name (inputs, outputs,
// value_info, initializers) and the initializers' TensorProto bytes.
type onnxGraph struct {
	nodes   []onnxNode
	inputs  []string
	types   map[string]int32
	initial map[string][]byte
}

// parseModelGraph reads the main graph of the ModelProto in b.
func parseModelGraph(b []byte) (*onnxGraph, error) {
	g := &onnxGraph{types: map[string]int32{}, initial: map[string][]byte{}}
	var graph []byte
	err := walkProto(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if num == fModelGraph {
			graph = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var declared []string
	if err := g.parseGraph(graph, &declared, 0); err != nil {
		return nil, err
	}
	for _, name := range declared {
		if _, ok := g.initial[name]; !ok {
			g.inputs = append(g.inputs, name)
		}
	}
	return g, nil
}

// maxGraphDepth bounds subgraph nesting, so that a crafted file cannot
// exhaust the stack.
const maxGraphDepth = 64

// parseGraph adds the GraphProto in b to g; the main graph's declared
// inputs go to inputs (a subgraph's are its own and are not collected).
func (g *onnxGraph) parseGraph(b []byte, inputs *[]string, depth int) error {
	if depth > maxGraphDepth {
		return fmt.Errorf("%w: subgraphs nested deeper than %d", errProto, maxGraphDepth)
	}
	return walkProto(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case fGraphNode:
			return g.parseNode(v, depth)
		case fGraphInitializer:
			p, err := parseTensorHead(v)
			if err != nil {
				return err
			}
			g.initial[p.name], g.types[p.name] = v, p.elemType
		case fGraphInput, fGraphOutput, fGraphValueInfo:
			name, elem, err := parseValueInfo(v)
			if err != nil {
				return err
			}
			if elem != 0 {
				g.types[name] = elem
			}
			if num == fGraphInput && depth == 0 {
				*inputs = append(*inputs, name)
			}
		}
		return nil
	})
}

// parseNode appends the NodeProto in b to g, after the nodes of the
// subgraphs its attributes hold.
func (g *onnxGraph) parseNode(b []byte, depth int) error {
	var n onnxNode
	var attrs [][]byte
	err := walkProto(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case fNodeInput:
			n.inputs = append(n.inputs, string(v))
		case fNodeOutput:
			n.outputs = append(n.outputs, string(v))
		case fNodeName:
			n.name = string(v)
		case fNodeOpType:
			n.opType = string(v)
		case fNodeDomain:
			n.domain = string(v)
		case fNodeAttribute:
			attrs = append(attrs, v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range attrs {
		if err := g.parseAttr(&n, a, depth); err != nil {
			return err
		}
	}
	g.nodes = append(g.nodes, n)
	return nil
}

// parseAttr reads what infer needs of one AttributeProto of n: Cast's
// "to", Constant's "value", and subgraphs, whose nodes it adds to g.
func (g *onnxGraph) parseAttr(n *onnxNode, b []byte, depth int) error {
	var name string
	var i int64
	var t []byte
	var subs [][]byte
	err := walkProto(b, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
		switch num {
		case fAttrName:
			name = string(v)
		case fAttrI:
			i = int64(x)
		case fAttrT:
			t = v
		case fAttrG, fAttrGraphs:
			subs = append(subs, v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case n.opType == "Cast" && name == "to":
		n.castTo = int32(i)
	case n.opType == "Constant" && name == "value":
		n.value = t
	}
	for _, sub := range subs {
		var ignored []string
		if err := g.parseGraph(sub, &ignored, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// parseTensorHead reads a TensorProto's name and element type only.
func parseTensorHead(b []byte) (*tensorProto, error) {
	p := &tensorProto{}
	err := walkProto(b, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
		switch num {
		case fTensorName:
			p.name = string(v)
		case fTensorType:
			p.elemType = int32(x)
		}
		return nil
	})
	return p, err
}

// parseValueInfo reads a ValueInfoProto's name and, for a tensor, its
// element type (0 for other types).
func parseValueInfo(b []byte) (name string, elem int32, err error) {
	err = walkProto(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case fValueInfoName:
			name = string(v)
		case fValueInfoType:
			return walkProto(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				if num != fTypeTensor {
					return nil
				}
				return walkProto(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
					if num == fTensorElem {
						elem = int32(x)
					}
					return nil
				})
			})
		}
		return nil
	})
	return name, elem, err
}
