package pipeline

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// stepContentType is the format of a step's request on the mesh: the
// OIP gRPC ModelInferRequest with raw_input_contents, which the
// composing model's worker decodes as it does the gRPC door's requests,
// and which carries every dtype bit for bit; the answer comes as
// raw_output_contents.
const stepContentType = wire.MediaTypeKServeGRPC

// encodeStep is step s's request: ins in the model's input order, under
// the model's input names, asking for the outputs s maps only.
func encodeStep(s *step, ins []infer.Tensor) ([]byte, error) {
	req := &kservepb.ModelInferRequest{ModelName: s.member.Name, ModelVersion: s.member.Version}
	for i, t := range ins {
		dt := wire.OIPDatatype(t.DType)
		if dt == "" {
			return nil, fmt.Errorf("input %q: dtype %s has no OIP datatype", s.inputs[i].model, t.DType)
		}
		req.Inputs = append(req.Inputs, &kservepb.ModelInferRequest_InferInputTensor{Name: s.inputs[i].model, Datatype: dt, Shape: t.Shape})
		req.RawInputContents = append(req.RawInputContents, wire.AppendRaw(nil, t))
	}
	for _, o := range s.outputs {
		req.Outputs = append(req.Outputs, &kservepb.ModelInferRequest_InferRequestedOutputTensor{Name: o.model})
	}
	return proto.Marshal(req)
}

// decodeStep reads the answer of step s: its outputs in s.outputs order.
func decodeStep(s *step, body []byte) ([]infer.Tensor, error) {
	var res kservepb.ModelInferResponse
	if err := proto.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("malformed ModelInferResponse: %w", err)
	}
	if len(res.RawOutputContents) != len(res.Outputs) {
		return nil, fmt.Errorf("answer has %d outputs and %d raw_output_contents", len(res.Outputs), len(res.RawOutputContents))
	}
	out := make([]infer.Tensor, len(s.outputs))
	for i, o := range s.outputs {
		j := -1
		for k, ro := range res.Outputs {
			if ro.Name == o.model {
				j = k
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("answer lacks output %q", o.model)
		}
		dt, ok := wire.OIPDType(res.Outputs[j].Datatype)
		if !ok {
			return nil, fmt.Errorf("output %q: unknown datatype %q", o.model, res.Outputs[j].Datatype)
		}
		t, err := wire.DecodeRaw(res.RawOutputContents[j], dt, res.Outputs[j].Shape, o.model)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.model, err)
		}
		out[i] = t
	}
	return out, nil
}
