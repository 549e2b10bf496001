package infer

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers of the shapes in onnx.proto, read only here.
const (
	fTensorTypeShape = 2 // TypeProto.Tensor.shape
	fShapeDim        = 1 // TensorShapeProto.dim
	fDimParam        = 2 // TensorShapeProto.Dimension.dim_param
)

// dimParams reads the symbolic dim names (dim_param, e.g. "batch", "seq")
// of the main graph's inputs and outputs of the ModelProto in b, by value
// name: one string per dim, "" for a dim without one. A float16/bfloat16
// output shares such names with its inputs ([batch, seq] in, [batch, seq,
// 8] out), which gives its size before the run (see halfOutputShape).
func dimParams(b []byte) (map[string][]string, error) {
	out := map[string][]string{}
	err := walkProto(b, func(num protowire.Number, _ protowire.Type, graph []byte, _ uint64) error {
		if num != fModelGraph {
			return nil
		}
		return walkProto(graph, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
			if num != fGraphInput && num != fGraphOutput {
				return nil
			}
			name, params, err := valueDimParams(v)
			if err == nil {
				out[name] = params
			}
			return err
		})
	})
	return out, err
}

// valueDimParams reads the name and dim_params of a ValueInfoProto.
func valueDimParams(b []byte) (name string, params []string, err error) {
	// ValueInfoProto.type -> TypeProto.tensor_type -> .shape -> dims.
	path := []protowire.Number{fValueInfoType, fTypeTensor, fTensorTypeShape}
	var walk func(b []byte, depth int) error
	walk = func(b []byte, depth int) error {
		return walkProto(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
			switch {
			case depth == 0 && num == fValueInfoName:
				name = string(v)
			case depth < len(path) && num == path[depth]:
				return walk(v, depth+1)
			case depth == len(path) && num == fShapeDim:
				params = append(params, dimParam(v))
			}
			return nil
		})
	}
	err = walk(b, 0)
	return name, params, err
}

// dimParam returns the dim_param of a TensorShapeProto.Dimension, "" when
// it has none (a fixed dim_value, or nothing).
func dimParam(b []byte) string {
	p := ""
	_ = walkProto(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == fDimParam && typ == protowire.BytesType {
			p = string(v)
		}
		return nil
	})
	return p
}
