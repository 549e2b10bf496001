package grpcdoor

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// frame is a message as its proto bytes, which passCodec neither decodes
// nor encodes: ModelInfer's request goes to the worker, and the worker's
// answer to the client, as they came.
type frame struct{ b []byte }

// passCodec is the server's "proto" codec: a *frame passes through as
// bytes, every other message goes through gRPC's own proto codec. It
// saves ModelInfer a decode and a re-encode each way (about 2 to 3 ms
// per 4 MiB message each on 2 cores).
type passCodec struct{ proto encoding.CodecV2 }

func newPassCodec() passCodec { return passCodec{proto: encoding.GetCodecV2("proto")} }

func (c passCodec) Name() string { return "proto" }

func (c passCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c passCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		f.b = data.Materialize() // a copy: data is freed on return
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// serviceDesc is kservepb's service description with ModelInfer's and
// ModelStreamInfer's handlers taking and returning frames (see
// inferFrame, streamInfer); the other RPCs are as generated.
func serviceDesc() *grpc.ServiceDesc {
	desc := kservepb.GRPCInferenceService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		if desc.Methods[i].MethodName == "ModelInfer" {
			desc.Methods[i].Handler = modelInferHandler
		}
	}
	desc.Streams = slices.Clone(desc.Streams)
	for i := range desc.Streams {
		if desc.Streams[i].StreamName == "ModelStreamInfer" {
			desc.Streams[i].Handler = streamInferHandler
		}
	}
	return &desc
}

// modelInferHandler is the generated handler of ModelInfer with a frame
// in place of the decoded ModelInferRequest.
func modelInferHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := &frame{}
	if err := dec(in); err != nil {
		return nil, err
	}
	d := srv.(*Door)
	if interceptor == nil {
		return d.inferFrame(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: kservepb.GRPCInferenceService_ModelInfer_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return d.inferFrame(ctx, req.(*frame))
	})
}

// inferFrame routes a ModelInferRequest by its model_name and
// model_version, read from its bytes, and answers with the worker's
// ModelInferResponse bytes. A request with a tensor in shared memory
// goes through inferSHM.
func (d *Door) inferFrame(ctx context.Context, in *frame) (*frame, error) {
	name, version, shm, err := modelOf(in.b)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "malformed ModelInferRequest: %v", err)
	}
	infer := d.infer
	if shm {
		infer = d.inferSHM
	}
	out, err := infer(ctx, name, version, in.b)
	if err != nil {
		return nil, err
	}
	return &frame{b: out}, nil
}

// modelOf reads fields 1 (model_name) and 2 (model_version) of a
// proto-encoded ModelInferRequest, and whether an input (field 5) or a
// requested output (field 6) has a shared memory parameter (hasSHMParam),
// skipping the rest; the last of a repeated field wins, as in
// proto.Unmarshal.
func modelOf(b []byte) (name, version string, shm bool, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", false, protowire.ParseError(n)
		}
		b = b[n:]
		if (num == 1 || num == 2 || num == 5 || num == 6) && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return "", "", false, protowire.ParseError(m)
			}
			switch num {
			case 1:
				name = string(v)
			case 2:
				version = string(v)
			case 5:
				shm = shm || hasSHMParam(v, 4) // InferInputTensor.parameters
			case 6:
				shm = shm || hasSHMParam(v, 2) // InferRequestedOutputTensor.parameters
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", "", false, fmt.Errorf("field %d: %w", num, protowire.ParseError(m))
		}
		b = b[m:]
	}
	return name, version, shm, nil
}

// hasSHMParam reports whether the tensor message b has, in its
// parameters map (field params), the key of a shared memory parameter;
// or is malformed, which inferSHM's decode then reports.
func hasSHMParam(b []byte, params protowire.Number) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return true
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return true
		}
		if num == params && typ == protowire.BytesType {
			entry, _ := protowire.ConsumeBytes(b)
			if door.IsSHMParam(mapKey(entry)) {
				return true
			}
		}
		b = b[m:]
	}
	return false
}

// mapKey is the key (field 1, the last one) of a map entry, "" when
// absent or malformed.
func mapKey(entry []byte) string {
	var key []byte
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return ""
		}
		entry = entry[n:]
		m := protowire.ConsumeFieldValue(num, typ, entry)
		if m < 0 {
			return ""
		}
		if num == 1 && typ == protowire.BytesType {
			key, _ = protowire.ConsumeBytes(entry)
		}
		entry = entry[m:]
	}
	return string(key)
}
