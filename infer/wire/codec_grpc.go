package wire

import (
	"context"

	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// grpcCodec is the MediaTypeKServeGRPC codec: a proto-encoded
// ModelInferRequest in, a proto-encoded ModelInferResponse out, so that
// the gRPC door passes ModelInfer through as the HTTP door passes OIP
// bodies. Inputs come as typed contents or as raw_input_contents (never
// both); they are matched to the model, split into rows and stacked back
// as the OIP JSON codec does (decodeOIPInputs, oipRequestOf, oipOutputs).
// BYTES (an ONNX STRING tensor) comes in bytes_contents, or framed in
// raw_input_contents (see DecodeRaw). The answer is raw_output_contents
// when the request's inputs were raw, or when an answered output has no
// typed contents (FP16, BF16: the protocol allows no mix); typed
// contents otherwise (BYTES in bytes_contents).
type grpcCodec struct{}

func init() { RegisterCodec(MediaTypeKServeGRPC, grpcCodec{}) }

func (grpcCodec) Decode(_ context.Context, body []byte, s *Spec) (*Request, error) {
	var req kservepb.ModelInferRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return nil, infer.NewInputError(-1, "", "malformed ModelInferRequest: %v", err)
	}
	if len(req.Inputs) == 0 {
		return nil, infer.NewInputError(-1, "", "ModelInferRequest has no inputs: want one per model input %v", s.Info.InputNames())
	}
	raw := req.RawInputContents
	if len(raw) > 0 && len(raw) != len(req.Inputs) {
		return nil, infer.NewInputError(-1, "", "raw_input_contents has %d entries for %d inputs: want one per input, in the order of inputs", len(raw), len(req.Inputs))
	}
	names := make([]string, len(req.Inputs))
	for i, in := range req.Inputs {
		switch {
		case in.Name == "":
			return nil, infer.NewInputError(-1, "", "inputs[%d]: name is required", i)
		case in.Datatype == "":
			return nil, infer.NewInputError(-1, in.Name, "datatype is required")
		case len(raw) > 0 && in.Contents != nil:
			return nil, infer.NewInputError(-1, in.Name, "has contents while raw_input_contents is set: send every input one way")
		case len(raw) == 0 && in.Contents == nil:
			return nil, infer.NewInputError(-1, in.Name, "has no contents: set its contents or raw_input_contents")
		}
		names[i] = in.Name
	}
	var outputs []string
	for _, o := range req.Outputs {
		outputs = append(outputs, o.Name)
	}
	if err := checkOIPOutputs(outputs, s.Info); err != nil {
		return nil, err
	}
	full, rows, err := decodeOIPInputs(names, s.Info, func(i int, mi infer.IO) (infer.Tensor, error) {
		in := req.Inputs[i]
		n, err := checkOIPTensor(in.Datatype, in.Shape, mi)
		if err != nil {
			return infer.Tensor{}, err
		}
		if len(raw) > 0 {
			return DecodeRaw(raw[i], mi.DType, in.Shape, mi.Name)
		}
		return decodeContents(in.Contents, mi, in.Shape, n)
	})
	if err != nil {
		return nil, err
	}
	rawOut := map[string]bool{}
	if len(raw) > 0 {
		markRaw(rawOut, s.Info) // raw inputs: raw outputs
	}
	return oipRequestOf(full, rows, req.Id, outputs, rawOut, s)
}

func (grpcCodec) Encode(req *Request, outs [][]infer.Tensor, s *Spec) ([]byte, error) {
	sel, err := oipOutputs(req, outs, s)
	if err != nil {
		return nil, err
	}
	resp := &kservepb.ModelInferResponse{ModelName: s.Model.Name, ModelVersion: s.Model.Version, Id: req.ID}
	raw := len(req.Raw) > 0
	for _, o := range sel {
		if !hasRaw(o.Tensor.DType) {
			return nil, fmt.Errorf("output %s: %s cannot be answered over gRPC yet", o.Name, o.Tensor.DType)
		}
		raw = raw || !hasContents(o.Tensor.DType)
	}
	for _, o := range sel {
		t := &kservepb.ModelInferResponse_InferOutputTensor{Name: o.Name, Datatype: OIPDatatype(o.Tensor.DType), Shape: o.Tensor.Shape}
		if raw {
			resp.RawOutputContents = append(resp.RawOutputContents, AppendRaw(nil, o.Tensor))
		} else {
			t.Contents = encodeContents(o.Tensor)
		}
		resp.Outputs = append(resp.Outputs, t)
	}
	return proto.Marshal(resp)
}

// hasContents reports whether d has a typed contents field (FP16 and
// BF16 have none).
func hasContents(d infer.DType) bool {
	switch d {
	case infer.String, infer.Bool, infer.Int8, infer.Int16, infer.Int32, infer.Int64, infer.Uint8, infer.Uint16, infer.Uint32, infer.Uint64, infer.Float32, infer.Float64:
		return true
	}
	return false
}

// decodeContents reads input mi's typed contents, which must hold the n
// elements of shape in the field of mi's dtype.
func decodeContents(c *kservepb.InferTensorContents, mi infer.IO, shape []int64, n int64) (infer.Tensor, error) {
	shape = append([]int64(nil), shape...)
	var (
		field string
		have  int
		data  any
		err   error
	)
	switch mi.DType {
	case infer.Bool:
		field, have, data = "bool_contents", len(c.BoolContents), c.BoolContents
	case infer.Int8:
		field, have = "int_contents", len(c.IntContents)
		data, err = narrowContents[int8](c.IntContents, math.MinInt8, math.MaxInt8, mi.DType)
	case infer.Int16:
		field, have = "int_contents", len(c.IntContents)
		data, err = narrowContents[int16](c.IntContents, math.MinInt16, math.MaxInt16, mi.DType)
	case infer.Int32:
		field, have, data = "int_contents", len(c.IntContents), c.IntContents
	case infer.Int64:
		field, have, data = "int64_contents", len(c.Int64Contents), c.Int64Contents
	case infer.Uint8:
		field, have = "uint_contents", len(c.UintContents)
		data, err = narrowContents[uint8](c.UintContents, 0, math.MaxUint8, mi.DType)
	case infer.Uint16:
		field, have = "uint_contents", len(c.UintContents)
		data, err = narrowContents[uint16](c.UintContents, 0, math.MaxUint16, mi.DType)
	case infer.Uint32:
		field, have, data = "uint_contents", len(c.UintContents), c.UintContents
	case infer.Uint64:
		field, have, data = "uint64_contents", len(c.Uint64Contents), c.Uint64Contents
	case infer.Float32:
		field, have, data = "fp32_contents", len(c.Fp32Contents), c.Fp32Contents
	case infer.Float64:
		field, have, data = "fp64_contents", len(c.Fp64Contents), c.Fp64Contents
	case infer.String:
		field, have = "bytes_contents", len(c.BytesContents)
		v := make([]string, len(c.BytesContents))
		for i, e := range c.BytesContents {
			v[i] = string(e)
		}
		data = v
	default:
		return infer.Tensor{}, infer.NewInputError(-1, mi.Name, "%s has no typed contents: send it in raw_input_contents", OIPDatatype(mi.DType))
	}
	if int64(have) != n {
		return infer.Tensor{}, infer.NewInputError(-1, mi.Name, "contents.%s holds %d elements, %s of shape %s needs %d", field, have, OIPDatatype(mi.DType), infer.ShapeString(shape), n)
	}
	if err != nil {
		return infer.Tensor{}, infer.NewInputError(-1, mi.Name, "contents.%s: %v", field, err)
	}
	return infer.Tensor{DType: mi.DType, Shape: shape, Data: data}, nil
}

// narrowContents converts the wide ints of a contents field to T,
// refusing a value outside [lo, hi].
func narrowContents[T int8 | int16 | uint8 | uint16, S int32 | uint32](src []S, lo, hi int64, dt infer.DType) ([]T, error) {
	out := make([]T, len(src))
	for i, v := range src {
		if int64(v) < lo || int64(v) > hi {
			return nil, fmt.Errorf("element %d: %d is not a %s", i, v, OIPDatatype(dt))
		}
		out[i] = T(v)
	}
	return out, nil
}

// widenContents converts T to the wide ints of a contents field.
func widenContents[S int32 | uint32, T int8 | int16 | uint8 | uint16](src []T) []S {
	out := make([]S, len(src))
	for i, v := range src {
		out[i] = S(v)
	}
	return out
}

// encodeContents returns t's data as typed contents; nil for a dtype
// without (see hasContents).
func encodeContents(t infer.Tensor) *kservepb.InferTensorContents {
	c := &kservepb.InferTensorContents{}
	switch v := t.Data.(type) {
	case []bool:
		c.BoolContents = v
	case []int8:
		c.IntContents = widenContents[int32](v)
	case []int16:
		c.IntContents = widenContents[int32](v)
	case []int32:
		c.IntContents = v
	case []int64:
		c.Int64Contents = v
	case []uint8:
		c.UintContents = widenContents[uint32](v)
	case []uint16:
		c.UintContents = widenContents[uint32](v)
	case []uint32:
		c.UintContents = v
	case []uint64:
		c.Uint64Contents = v
	case []float32:
		c.Fp32Contents = v
	case []float64:
		c.Fp64Contents = v
	case []string:
		c.BytesContents = make([][]byte, len(v))
		for i, e := range v {
			c.BytesContents[i] = []byte(e)
		}
	default:
		return nil
	}
	return c
}
