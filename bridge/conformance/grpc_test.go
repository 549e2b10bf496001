package conformance

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest/onnxnode"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// grpcInfer sends the case's inputs to ModelInfer as raw_input_contents,
// as Triton's and KServe's clients send large or non-finite tensors, and
// reads the raw outputs back.
func grpcInfer(ctx context.Context, n *node, c *served) outcome {
	in, err := onnxnode.Inputs(c.dir, c.ins)
	if err != nil {
		return outcome{"request not built from the test data: " + err.Error()}
	}
	req := &kservepb.ModelInferRequest{ModelName: c.name}
	for _, x := range in {
		req.Inputs = append(req.Inputs, &kservepb.ModelInferRequest_InferInputTensor{
			Name: x.Name, Datatype: wire.OIPDatatype(x.Tensor.DType), Shape: x.Tensor.Shape,
		})
		req.RawInputContents = append(req.RawInputContents, wire.AppendRaw(nil, x.Tensor))
	}
	conn, err := n.grpcConn()
	if err != nil {
		return outcome{"no connection: " + err.Error()}
	}
	resp, err := kservepb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, req)
	if err != nil {
		st := status.Convert(err)
		return outcome{fmt.Sprintf("%s %s", st.Code(), requestCause(st.Message()))}
	}
	outs := make([]onnxnode.Output, len(resp.Outputs))
	for i, o := range resp.Outputs {
		if i >= len(resp.RawOutputContents) {
			return outcome{fmt.Sprintf("answer has %d raw outputs for %d outputs", len(resp.RawOutputContents), len(resp.Outputs))}
		}
		dt, ok := wire.OIPDType(o.Datatype)
		if !ok {
			return outcome{fmt.Sprintf("output %q: datatype %q", o.Name, o.Datatype)}
		}
		t, err := wire.DecodeRaw(resp.RawOutputContents[i], dt, o.Shape, o.Name)
		if err != nil {
			return outcome{"answer unreadable: " + err.Error()}
		}
		outs[i] = onnxnode.Output{Name: o.Name, Datatype: o.Datatype, Shape: o.Shape}
		if s, ok := t.Data.([]string); ok {
			outs[i].Strings = s
		} else {
			outs[i].Values, _ = infer.Float64s(t)
		}
	}
	if msg := onnxnode.Compare(c.dir, outs); msg != "" {
		return outcome{"200, outputs differ: " + msg}
	}
	return outcome{}
}

// grpcConn dials the node's gRPC door once.
func (n *node) grpcConn() (*grpc.ClientConn, error) {
	if n.conn == nil {
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return nil, err
		}
		n.conn = conn
	}
	return n.conn, nil
}
