package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// The slow step of the pipeline part is generated, not committed: every
// committed test model is a few element-wise operations (microseconds),
// and the ResNet-50-shaped model needs python3-onnx and a 100 MB file. A
// step that scales with worker processes must spend its time in ONNX
// Runtime, not in the mesh, and take a small request: this one turns
// x[batch,4] into y[batch,4] through slowRows rows of slowWidth per
// record and slowDepth dense tanh layers (each a GEMM of 64×256 by
// 256×256, 4.2M multiply-adds): about 0.54 GFLOP, some 17 ms of one core of
// the 2-core bench machine per record, for a 16-byte input.
const (
	slowRows  = 64
	slowWidth = 256
	slowDepth = 64
)

// ONNX protobuf field numbers (onnx.proto, IR version 8) and element
// types that writeSlowModel writes.
const (
	pbModelIRVersion = 1
	pbModelGraph     = 7
	pbModelOpset     = 8
	pbOpsetVersion   = 2
	pbGraphNode      = 1
	pbGraphName      = 2
	pbGraphInit      = 5
	pbGraphInput     = 11
	pbGraphOutput    = 12
	pbNodeInput      = 1
	pbNodeOutput     = 2
	pbNodeOpType     = 4
	pbTensorDims     = 1
	pbTensorType     = 2
	pbTensorName     = 8
	pbTensorRaw      = 9
	onnxFloat        = 1
	onnxInt64        = 7
)

// writeSlowModel writes the slow step's model to path: y = tanh-MLP(x),
// weights from a fixed seed, so every run serves the same file.
func writeSlowModel(path string) error {
	rng := rand.New(rand.NewPCG(7, 11))
	hidden := slowRows * slowWidth
	var g []byte
	g = pbBytes(g, pbGraphName, []byte("slow"))
	g = pbBytes(g, pbGraphInit, floatInit("w_in", rng, 4, hidden))
	g = pbBytes(g, pbGraphInit, floatInit("w", rng, slowWidth, slowWidth))
	g = pbBytes(g, pbGraphInit, floatInit("w_out", rng, hidden, 4))
	g = pbBytes(g, pbGraphInit, int64Init("rows", -1, slowWidth))
	g = pbBytes(g, pbGraphInit, int64Init("flat", -1, int64(hidden)))
	g = pbBytes(g, pbGraphNode, onnxNode("MatMul", "wide", "x", "w_in"))
	g = pbBytes(g, pbGraphNode, onnxNode("Reshape", "h0", "wide", "rows"))
	for i := range slowDepth {
		mm, h := fmt.Sprintf("m%d", i+1), fmt.Sprintf("h%d", i+1)
		g = pbBytes(g, pbGraphNode, onnxNode("MatMul", mm, fmt.Sprintf("h%d", i), "w"))
		g = pbBytes(g, pbGraphNode, onnxNode("Tanh", h, mm))
	}
	g = pbBytes(g, pbGraphNode, onnxNode("Reshape", "back", fmt.Sprintf("h%d", slowDepth), "flat"))
	g = pbBytes(g, pbGraphNode, onnxNode("MatMul", "y", "back", "w_out"))
	g = pbBytes(g, pbGraphInput, floatValueInfo("x"))
	g = pbBytes(g, pbGraphOutput, floatValueInfo("y"))
	var m []byte
	m = protowire.AppendTag(m, pbModelIRVersion, protowire.VarintType)
	m = protowire.AppendVarint(m, 8)
	m = pbBytes(m, pbModelOpset, protowire.AppendVarint(protowire.AppendTag(nil, pbOpsetVersion, protowire.VarintType), 13))
	m = pbBytes(m, pbModelGraph, g)
	return os.WriteFile(path, m, 0o644)
}

// pbBytes appends field as a length-delimited value.
func pbBytes(b []byte, field protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, field, protowire.BytesType), v)
}

// onnxNode is a NodeProto of op with inputs ins and one output out.
func onnxNode(op, out string, ins ...string) []byte {
	var n []byte
	for _, in := range ins {
		n = pbBytes(n, pbNodeInput, []byte(in))
	}
	n = pbBytes(n, pbNodeOutput, []byte(out))
	return pbBytes(n, pbNodeOpType, []byte(op))
}

// floatValueInfo is the ValueInfoProto of a float tensor [batch, 4].
func floatValueInfo(name string) []byte {
	dim := func(v []byte) []byte { return pbBytes(nil, 1, v) } // TensorShapeProto.dim
	shape := append(dim(pbBytes(nil, 2, []byte("batch"))), dim(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 4))...)
	tensor := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), onnxFloat) // elem_type
	tensor = pbBytes(tensor, 2, shape)
	return pbBytes(pbBytes(nil, 1, []byte(name)), 2, pbBytes(nil, 1, tensor)) // name, type.tensor_type
}

// tensorInit is a TensorProto initializer of dtype and dims holding raw.
func tensorInit(name string, dtype uint64, dims []int64, raw []byte) []byte {
	var packed []byte
	for _, d := range dims {
		packed = protowire.AppendVarint(packed, uint64(d))
	}
	t := pbBytes(nil, pbTensorDims, packed)
	t = protowire.AppendVarint(protowire.AppendTag(t, pbTensorType, protowire.VarintType), dtype)
	t = pbBytes(t, pbTensorName, []byte(name))
	return pbBytes(t, pbTensorRaw, raw)
}

// floatInit is a rows×cols float initializer, uniform with variance
// 1/rows so that the activations stay in tanh's range layer after layer.
func floatInit(name string, rng *rand.Rand, rows, cols int) []byte {
	a := math.Sqrt(3 / float64(rows))
	raw := make([]byte, 0, 4*rows*cols)
	for range rows * cols {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32((2*rng.Float64()-1)*a)))
	}
	return tensorInit(name, onnxFloat, []int64{int64(rows), int64(cols)}, raw)
}

// int64Init is a 1-D int64 initializer: a Reshape's target shape.
func int64Init(name string, vs ...int64) []byte {
	var raw []byte
	for _, v := range vs {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
	}
	return tensorInit(name, onnxInt64, []int64{int64(len(vs))}, raw)
}
