package httpdoor

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// Paths of Triton's shared memory extension.
const (
	shmPrefix     = "/v2/systemsharedmemory"
	cudaSHMPrefix = "/v2/cudasharedmemory"
)

// errNoCUDA answers a CUDA shared memory registration: the workers run
// on other machines than the door, which cannot map a client's GPU
// memory.
var errNoCUDA = status.Errorf(status.BadInput, "CUDA shared memory is not supported; use system shared memory (/v2/systemsharedmemory)")

// shmRoutes are the system shared memory extension's routes (Triton's):
// status (GET), register and unregister (POST), of one region or all;
// and the CUDA extension's, which list no region, unregister nothing and
// refuse to register (errNoCUDA), so that a client that clears both
// kinds, as perf_analyzer does, works.
func (s *Server) shmRoutes(mux *http.ServeMux) {
	reg := s.cfg.SharedMemory
	for _, p := range []string{"", "/region/{r}"} {
		mux.HandleFunc("GET "+shmPrefix+p+"/status", func(w http.ResponseWriter, r *http.Request) {
			regions, err := reg.Status(r.PathValue("r"))
			if err != nil {
				s.writeError(w, err, "")
				return
			}
			writeJSON(w, http.StatusOK, regions)
		})
		mux.HandleFunc("POST "+shmPrefix+p+"/unregister", func(w http.ResponseWriter, r *http.Request) {
			reg.Unregister(r.PathValue("r"))
			w.WriteHeader(http.StatusOK)
		})
		mux.HandleFunc("GET "+cudaSHMPrefix+p+"/status", func(w http.ResponseWriter, r *http.Request) {
			if name := r.PathValue("r"); name != "" {
				s.writeError(w, status.Errorf(status.NotFound, "Unable to find cuda shared memory region: '%s': CUDA shared memory is not supported; use system shared memory", name), "")
				return
			}
			writeJSON(w, http.StatusOK, []struct{}{})
		})
		mux.HandleFunc("POST "+cudaSHMPrefix+p+"/unregister", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
		mux.HandleFunc("POST "+cudaSHMPrefix+p+"/register", func(w http.ResponseWriter, _ *http.Request) { s.writeError(w, errNoCUDA, "") })
	}
	mux.HandleFunc("POST "+shmPrefix+"/register", func(w http.ResponseWriter, _ *http.Request) {
		s.writeError(w, status.Errorf(status.BadInput, "'region name' is necessary to register system shared memory region: POST %s/region/{name}/register", shmPrefix), "")
	})
	mux.HandleFunc("POST "+shmPrefix+"/region/{r}/register", s.shmRegister)
}

// shmRegister serves POST /v2/systemsharedmemory/region/{r}/register:
// {"key": "/NAME", "offset": N, "byte_size": N}.
func (s *Server) shmRegister(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	var req struct {
		Key      *string `json:"key"`
		Offset   int64   `json:"offset"`
		ByteSize *int64  `json:"byte_size"`
	}
	switch err = json.Unmarshal(body, &req); {
	case err != nil:
		err = status.Errorf(status.BadInput, `malformed register request: %v: want {"key": "/NAME", "offset": 0, "byte_size": N}`, err)
	case req.Key == nil:
		err = status.Errorf(status.BadInput, "Shared memory register request has no 'key' field")
	case req.ByteSize == nil:
		err = status.Errorf(status.BadInput, "Shared memory register request has no 'byte_size' field")
	default:
		err = s.cfg.SharedMemory.Register(r.PathValue("r"), *req.Key, req.Offset, *req.ByteSize)
	}
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// shmAdmin reports whether path registers or unregisters shared memory,
// which needs a token of role admin: it makes the door map a file of
// its host. Listing regions needs an infer token.
func shmAdmin(path string) bool {
	return (strings.HasPrefix(path, shmPrefix+"/") || strings.HasPrefix(path, cudaSHMPrefix+"/")) &&
		(strings.HasSuffix(path, "/register") || strings.HasSuffix(path, "/unregister"))
}

// object is a JSON object whose values stay as they came.
type object = map[string]json.RawMessage

// mayUseSHM reports whether an OIP JSON header may name a shared memory
// parameter: it holds its prefix or a \u escape, which could spell it.
// Without either the request surely has none and skips the parse.
func mayUseSHM(header []byte) bool {
	return bytes.Contains(header, []byte("shared_memory_")) || bytes.Contains(header, []byte(`\u`))
}

// inferSHM serves an OIP request whose inputs or outputs are in shared
// memory, and reports whether it did: false when the request uses none
// (or is malformed, which the codec then answers), for infer's usual
// path. The door turns it into a binary tensor data request (region
// inputs become raw bytes, region outputs binary_data), and writes the
// answer's raw outputs into their regions, answering them without data.
func (s *Server) inferSHM(w http.ResponseWriter, r *http.Request, m Model, body []byte) bool {
	headerLen, err := headerLength(r, body)
	if err != nil || !mayUseSHM(body[:headerLen]) {
		return false
	}
	switch plan, err := planSHM(s.cfg.SharedMemory, body, headerLen, s.cfg.MaxBodyBytes); {
	case err != nil:
		s.writeError(w, err, "")
	case plan == nil:
		return false
	default:
		s.sendBinary(w, r, m, plan.body, plan.answer)
	}
	return true
}

// shmPlan is a request rewritten for the worker: its framed binary body,
// and the regions its outputs go to, by name.
type shmPlan struct {
	reg     *door.SharedMemory
	body    []byte
	outputs map[string]door.Ref
}

// planSHM rewrites the OIP request body (its first headerLen bytes JSON)
// when an input or output names a region: nil when none does. The
// regions' bytes may not take it past limit (door.OverLimit).
func planSHM(reg *door.SharedMemory, body []byte, headerLen int, limit int64) (*shmPlan, error) {
	var top object
	var ins, outs []object
	if json.Unmarshal(body[:headerLen], &top) != nil || unmarshalIf(top["inputs"], &ins) != nil || unmarshalIf(top["outputs"], &outs) != nil {
		return nil, nil
	}
	plan := &shmPlan{reg: reg, outputs: map[string]door.Ref{}}
	fits := func(n int64) error { return door.OverLimit(int64(headerLen)+n, limit) }
	tail, used, err := shmInputs(reg, ins, body[headerLen:], fits)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		name, params, ref, err := tensorRef(o)
		switch {
		case err != nil:
			return nil, err
		case ref == nil:
			continue
		case string(params["binary_data"]) == "true" || params["classification"] != nil:
			return nil, status.Errorf(status.BadInput, "output %s: shared_memory_region goes with neither binary_data true nor classification", name)
		}
		if err := reg.Check(ref.Region, ref.Offset, ref.ByteSize); err != nil {
			return nil, err
		}
		door.DropSHMParams(params)
		params["binary_data"] = json.RawMessage("true")
		o["parameters"], _ = json.Marshal(params)
		plan.outputs[name] = *ref
	}
	if !used && len(plan.outputs) == 0 {
		return nil, nil
	}
	top["inputs"], _ = json.Marshal(ins)
	if outs != nil {
		top["outputs"], _ = json.Marshal(outs)
	}
	header, _ := json.Marshal(top)
	plan.body = wire.FrameOIPBinary(len(header), append(header, tail...))
	return plan, nil
}

// shmInputs turns the region inputs of ins into binary ones, in place,
// and returns the binary data after the header: the request's own
// (tail) with the regions' bytes in the order of the inputs; used says
// whether an input named a region. fits checks the size the binary data
// would have before a region is read.
func shmInputs(reg *door.SharedMemory, ins []object, tail []byte, fits func(int64) error) (out []byte, used bool, err error) {
	off := int64(0)
	for _, in := range ins {
		name, params, ref, err := tensorRef(in)
		if err != nil {
			return nil, false, err
		}
		if ref == nil {
			var n int64
			if json.Unmarshal(params["binary_data_size"], &n) == nil {
				if n < 0 || n > int64(len(tail))-off {
					return nil, false, status.Errorf(status.BadInput, "input %s: parameters.binary_data_size %d runs past the body: only %d bytes of binary data are left for it", name, n, int64(len(tail))-off)
				}
				out = append(out, tail[off:off+n]...)
				off += n
			}
			continue
		}
		if in["data"] != nil || params["binary_data_size"] != nil {
			return nil, false, status.Errorf(status.BadInput, "input %s: has shared_memory_region and also \"data\" or binary_data_size: send its data one way", name)
		}
		if err := fits(int64(len(out)) + ref.ByteSize + int64(len(tail)) - off); err != nil {
			return nil, false, err
		}
		if out, err = reg.AppendRead(out, ref.Region, ref.Offset, ref.ByteSize); err != nil {
			return nil, false, err
		}
		door.DropSHMParams(params)
		params["binary_data_size"] = strconv.AppendInt(nil, ref.ByteSize, 10)
		in["parameters"], _ = json.Marshal(params)
		used = true
	}
	return append(out, tail[off:]...), used, nil
}

// tensorRef reads the name, the parameters (never nil) and the shared
// memory Ref (nil: none) of an input or output.
func tensorRef(t object) (string, object, *door.Ref, error) {
	var name string
	_ = json.Unmarshal(t["name"], &name)
	params := object{}
	if err := unmarshalIf(t["parameters"], &params); err != nil || params == nil {
		return name, object{}, nil, nil // the codec answers malformed parameters
	}
	var region *string
	var offset, size *int64
	for key, dst := range map[string]any{door.ParamSHMRegion: &region, door.ParamSHMOffset: &offset, door.ParamSHMByteSize: &size} {
		if err := unmarshalIf(params[key], dst); err != nil {
			return name, params, nil, status.Errorf(status.BadInput, "tensor %s: parameters.%s: %v", name, key, err)
		}
	}
	ref, err := door.NewRef(name, region, offset, size)
	return name, params, ref, err
}

// unmarshalIf unmarshals raw into v unless raw is absent.
func unmarshalIf(raw json.RawMessage, v any) error {
	if raw == nil {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// answer writes the raw outputs of the worker's answer (framed,
// MediaTypeOIPBinary) that go to regions into them, and returns the
// answer's JSON header, those outputs now without data or parameters, and
// the raw bytes of the other outputs.
func (p *shmPlan) answer(answer []byte) (header, tensors []byte, err error) {
	header, tensors, err = wire.SplitOIPBinary(answer)
	if err != nil || len(p.outputs) == 0 {
		return header, tensors, err
	}
	var top object
	var outs []object
	if json.Unmarshal(header, &top) != nil || unmarshalIf(top["outputs"], &outs) != nil {
		return nil, nil, status.Errorf(status.Internal, "the worker's answer is no OIP response")
	}
	var rest []byte
	off := int64(0)
	for _, o := range outs {
		name, params, _, _ := tensorRef(o)
		var n int64
		if json.Unmarshal(params["binary_data_size"], &n) != nil {
			continue
		}
		if n < 0 || n > int64(len(tensors))-off {
			return nil, nil, status.Errorf(status.Internal, "the worker's answer holds less binary data than its outputs' binary_data_size")
		}
		data := tensors[off : off+n]
		off += n
		ref, ok := p.outputs[name]
		if !ok {
			rest = append(rest, data...)
			continue
		}
		if err := p.reg.WriteOutput(name, ref, data); err != nil {
			return nil, nil, err
		}
		// Triton answers an output written to a region with its name,
		// datatype and shape only: no data, no parameters (tritonclient's
		// C++ client reads any output with parameters as binary data).
		delete(o, "parameters")
	}
	top["outputs"], _ = json.Marshal(outs)
	header, _ = json.Marshal(top)
	return header, rest, nil
}
