package grpcdoor

import (
	"context"
	"math"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// SystemSharedMemoryStatus lists the registered regions, or the one
// named (NotFound when it is not registered).
func (d *Door) SystemSharedMemoryStatus(_ context.Context, req *kservepb.SystemSharedMemoryStatusRequest) (*kservepb.SystemSharedMemoryStatusResponse, error) {
	regions, err := d.cfg.SharedMemory.Status(req.Name)
	if err != nil {
		return nil, grpcError(err)
	}
	out := &kservepb.SystemSharedMemoryStatusResponse{Regions: map[string]*kservepb.SystemSharedMemoryStatusResponse_RegionStatus{}}
	for _, r := range regions {
		out.Regions[r.Name] = &kservepb.SystemSharedMemoryStatusResponse_RegionStatus{Name: r.Name, Key: r.Key, Offset: uint64(r.Offset), ByteSize: uint64(r.ByteSize)}
	}
	return out, nil
}

// SystemSharedMemoryRegister registers a region (see
// door.SharedMemory.Register); it needs a token of role admin.
func (d *Door) SystemSharedMemoryRegister(_ context.Context, req *kservepb.SystemSharedMemoryRegisterRequest) (*kservepb.SystemSharedMemoryRegisterResponse, error) {
	if req.Offset > math.MaxInt64 || req.ByteSize > math.MaxInt64 {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "shared memory region '%s': offset %d and byte_size %d are out of range", req.Name, req.Offset, req.ByteSize)
	}
	if err := d.cfg.SharedMemory.Register(req.Name, req.Key, int64(req.Offset), int64(req.ByteSize)); err != nil {
		return nil, grpcError(err)
	}
	return &kservepb.SystemSharedMemoryRegisterResponse{}, nil
}

// SystemSharedMemoryUnregister unregisters the region named, or all when
// the name is empty; it needs a token of role admin.
func (d *Door) SystemSharedMemoryUnregister(_ context.Context, req *kservepb.SystemSharedMemoryUnregisterRequest) (*kservepb.SystemSharedMemoryUnregisterResponse, error) {
	d.cfg.SharedMemory.Unregister(req.Name)
	return &kservepb.SystemSharedMemoryUnregisterResponse{}, nil
}

// noCUDA is the message of the CUDA shared memory RPCs that cannot be
// served: the door does not run the models, and cannot map a client's
// GPU memory.
const noCUDA = "CUDA shared memory is not supported; use system shared memory (SystemSharedMemoryRegister)"

// CudaSharedMemoryStatus lists no region: the door registers none.
func (d *Door) CudaSharedMemoryStatus(_ context.Context, req *kservepb.CudaSharedMemoryStatusRequest) (*kservepb.CudaSharedMemoryStatusResponse, error) {
	if req.Name != "" {
		return nil, grpcstatus.Errorf(codes.NotFound, "Unable to find cuda shared memory region: '%s': %s", req.Name, noCUDA)
	}
	return &kservepb.CudaSharedMemoryStatusResponse{}, nil
}

// CudaSharedMemoryRegister is Unimplemented (noCUDA).
func (d *Door) CudaSharedMemoryRegister(context.Context, *kservepb.CudaSharedMemoryRegisterRequest) (*kservepb.CudaSharedMemoryRegisterResponse, error) {
	return nil, grpcstatus.Error(codes.Unimplemented, noCUDA)
}

// CudaSharedMemoryUnregister unregisters nothing, successfully, so that
// a client that clears both kinds of region, as perf_analyzer does, works.
func (d *Door) CudaSharedMemoryUnregister(context.Context, *kservepb.CudaSharedMemoryUnregisterRequest) (*kservepb.CudaSharedMemoryUnregisterResponse, error) {
	return &kservepb.CudaSharedMemoryUnregisterResponse{}, nil
}

// inferSHM is infer for a ModelInferRequest b with tensors in shared
// memory: the door decodes it, puts the inputs' region bytes into
// raw_input_contents and drops the outputs' region parameters
// (rewriteSHM), sends it, and writes the raw outputs of the answer into
// their regions (answerSHM). Errors are gRPC status errors.
func (d *Door) inferSHM(ctx context.Context, name, version string, b []byte) ([]byte, error) {
	req := &kservepb.ModelInferRequest{}
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "malformed ModelInferRequest: %v", err)
	}
	reg := d.cfg.SharedMemory
	outs, err := rewriteSHM(reg, req, int64(d.cfg.MaxRecvBytes))
	if err != nil {
		return nil, grpcError(err)
	}
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, grpcstatus.Errorf(codes.Internal, "encode request: %v", err)
	}
	answer, err := d.infer(ctx, name, version, body)
	if err != nil || len(outs) == 0 {
		return answer, err
	}
	if answer, err = answerSHM(reg, answer, outs); err != nil {
		return nil, grpcError(err)
	}
	return answer, nil
}

// rewriteSHM makes req's inputs all raw: each region input's bytes, the
// others' raw_input_contents in order (as Triton counts them: only the
// inputs outside shared memory take one). Typed contents cannot go with
// shared memory: the worker answers raw outputs only to raw inputs. It
// checks the outputs' regions and returns them by output name. The
// regions' bytes may not take the request past limit (door.OverLimit).
func rewriteSHM(reg *door.SharedMemory, req *kservepb.ModelInferRequest, limit int64) (map[string]door.Ref, error) {
	raw := make([][]byte, 0, len(req.Inputs))
	next := 0
	size := int64(proto.Size(req))
	for _, in := range req.Inputs {
		ref, err := refOf(in.Name, in.Parameters)
		switch {
		case err != nil:
			return nil, err
		case in.Contents != nil:
			return nil, status.Errorf(status.BadInput, "input %s: typed contents cannot go with shared memory in one request: send it in raw_input_contents (as Triton's clients do) or a region", in.Name)
		case ref == nil && next >= len(req.RawInputContents):
			return nil, status.Errorf(status.BadInput, "input %s: no data: raw_input_contents has %d entries for the inputs outside shared memory", in.Name, len(req.RawInputContents))
		case ref == nil:
			raw = append(raw, req.RawInputContents[next])
			next++
			continue
		}
		size += ref.ByteSize
		if err := door.OverLimit(size, limit); err != nil {
			return nil, err
		}
		data, err := reg.AppendRead(nil, ref.Region, ref.Offset, ref.ByteSize)
		if err != nil {
			return nil, err
		}
		raw = append(raw, data)
		door.DropSHMParams(in.Parameters)
	}
	if next != len(req.RawInputContents) {
		return nil, status.Errorf(status.BadInput, "raw_input_contents has %d entries, the inputs outside shared memory take %d", len(req.RawInputContents), next)
	}
	req.RawInputContents = raw
	outs := map[string]door.Ref{}
	for _, o := range req.Outputs {
		ref, err := refOf(o.Name, o.Parameters)
		if err != nil || ref == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := reg.Check(ref.Region, ref.Offset, ref.ByteSize); err != nil {
			return nil, err
		}
		door.DropSHMParams(o.Parameters)
		outs[o.Name] = *ref
	}
	return outs, nil
}

// refOf is the shared memory Ref of tensor from its parameters (nil:
// none): shared_memory_region a string_param, the offset and byte size
// int64_params, as Triton takes them.
func refOf(tensor string, params map[string]*kservepb.InferParameter) (*door.Ref, error) {
	var region *string
	if p, ok := params[door.ParamSHMRegion]; ok {
		s, ok := p.GetParameterChoice().(*kservepb.InferParameter_StringParam)
		if !ok {
			return nil, status.Errorf(status.BadInput, "tensor %s: parameter %s: want a string_param", tensor, door.ParamSHMRegion)
		}
		region = &s.StringParam
	}
	var nums [2]*int64
	for i, key := range []string{door.ParamSHMOffset, door.ParamSHMByteSize} {
		if p, ok := params[key]; ok {
			n, ok := p.GetParameterChoice().(*kservepb.InferParameter_Int64Param)
			if !ok {
				return nil, status.Errorf(status.BadInput, "tensor %s: parameter %s: want an int64_param", tensor, key)
			}
			nums[i] = &n.Int64Param
		}
	}
	return door.NewRef(tensor, region, nums[0], nums[1])
}

// answerSHM writes the raw outputs of answer, a ModelInferResponse, that
// go to regions (outs) into them, and returns answer with those outputs'
// raw_output_contents empty (as Triton answers) and the regions'
// parameters on them.
func answerSHM(reg *door.SharedMemory, answer []byte, outs map[string]door.Ref) ([]byte, error) {
	resp := &kservepb.ModelInferResponse{}
	if err := proto.Unmarshal(answer, resp); err != nil || len(resp.RawOutputContents) != len(resp.Outputs) {
		return nil, status.Errorf(status.Internal, "the worker's answer is no ModelInferResponse with raw outputs")
	}
	for i, o := range resp.Outputs {
		ref, ok := outs[o.Name]
		if !ok {
			continue
		}
		data := resp.RawOutputContents[i]
		if err := reg.WriteOutput(o.Name, ref, data); err != nil {
			return nil, err
		}
		resp.RawOutputContents[i] = nil
		o.Parameters = map[string]*kservepb.InferParameter{
			door.ParamSHMRegion:   {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: ref.Region}},
			door.ParamSHMOffset:   {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: ref.Offset}},
			door.ParamSHMByteSize: {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: int64(len(data))}},
		}
	}
	return proto.Marshal(resp)
}
