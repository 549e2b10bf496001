package wire

import (
	"context"

	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/cluster-serving/cluster-serving/infer"
)

// HeaderInferenceContentLength is the HTTP header of the OIP binary
// tensor data extension: the length of the JSON header that starts the
// body, raw tensors following it.
const HeaderInferenceContentLength = "Inference-Header-Content-Length"

// oipBinFrame is the bytes FrameOIPBinary puts before a body.
const oipBinFrame = 8

// FrameOIPBinary returns the mesh body of MediaTypeOIPBinary for an HTTP
// body whose first headerLen bytes are the JSON header: headerLen as 8
// big-endian bytes, then body. The HTTP header that carries headerLen
// does not cross the mesh, so the body carries it.
func FrameOIPBinary(headerLen int, body []byte) []byte {
	out := make([]byte, oipBinFrame, oipBinFrame+len(body))
	binary.BigEndian.PutUint64(out, uint64(headerLen))
	return append(out, body...)
}

// SplitOIPBinary undoes FrameOIPBinary: the JSON header and the raw
// tensors after it (nil when none). A frame that does not hold what it
// claims is an *infer.InputError.
func SplitOIPBinary(b []byte) (header, tensors []byte, err error) {
	if len(b) < oipBinFrame {
		return nil, nil, infer.NewInputError(-1, "", "binary OIP body of %d bytes has no header length", len(b))
	}
	n := binary.BigEndian.Uint64(b)
	b = b[oipBinFrame:]
	if n > uint64(len(b)) {
		return nil, nil, infer.NewInputError(-1, "", "%s is %d but the body has only %d bytes", HeaderInferenceContentLength, n, len(b))
	}
	if int(n) == len(b) {
		return b, nil, nil
	}
	return b[:n], b[n:], nil
}

// oipBinParams are the parameters of the binary tensor data extension.
type oipBinParams struct {
	// BinaryDataSize, on an input, says its data follows the JSON header
	// as that many raw bytes.
	BinaryDataSize *int64 `json:"binary_data_size"`
	// BinaryData, on a requested output, asks for it as raw bytes.
	BinaryData *bool `json:"binary_data"`
	// BinaryDataOutput, on the request, asks for every output as raw
	// bytes (an output's own BinaryData wins).
	BinaryDataOutput bool `json:"binary_data_output"`
}

// oipBinRequest is an OIP request with the extension's parameters.
type oipBinRequest struct {
	ID     string `json:"id"`
	Inputs []struct {
		oipInput
		Parameters oipBinParams `json:"parameters"`
	} `json:"inputs"`
	Outputs []struct {
		Name       string       `json:"name"`
		Parameters oipBinParams `json:"parameters"`
	} `json:"outputs"`
	Parameters oipBinParams `json:"parameters"`
}

// oipBinCodec is the MediaTypeOIPBinary codec: the OIP JSON request and
// answer with the binary tensor data extension (Triton's, which KServe
// adopted). An input with parameters.binary_data_size takes its data
// from the raw bytes after the JSON header, in the order of inputs (a
// BYTES input's binary_data_size is the size of all its elements, each
// framed with its length: see DecodeRaw); the
// others carry "data" as in MediaTypeOIP. Requested outputs with
// parameters.binary_data true (or all, with the request's
// parameters.binary_data_output) come back as parameters.binary_data_size
// in the answer's header and raw bytes after it. Bodies and answers are
// framed with their header's length (FrameOIPBinary).
type oipBinCodec struct{}

func init() { RegisterCodec(MediaTypeOIPBinary, oipBinCodec{}) }

func (oipBinCodec) Decode(_ context.Context, body []byte, s *Spec) (*Request, error) {
	header, tail, err := SplitOIPBinary(body)
	if err != nil {
		return nil, err
	}
	var req oipBinRequest
	if err := json.Unmarshal(header, &req); err != nil {
		return nil, infer.NewInputError(-1, "", "malformed OIP request header (the first %s bytes): %v", HeaderInferenceContentLength, err)
	}
	if len(req.Inputs) == 0 {
		return nil, infer.NewInputError(-1, "", `OIP request has no "inputs": %s`, oipInputsExample)
	}
	names := make([]string, len(req.Inputs))
	raws := make([][]byte, len(req.Inputs))
	off := int64(0)
	for i, in := range req.Inputs {
		size := in.Parameters.BinaryDataSize
		if err := in.check(i); err != nil {
			return nil, err
		}
		switch {
		case size == nil && len(in.Data) == 0:
			return nil, infer.NewInputError(-1, in.Name, `"data" or parameters.binary_data_size is required`)
		case size != nil && len(in.Data) != 0:
			return nil, infer.NewInputError(-1, in.Name, `has both "data" and parameters.binary_data_size: send its data one way`)
		case size != nil && *size < 0:
			return nil, infer.NewInputError(-1, in.Name, "parameters.binary_data_size %d is negative", *size)
		case size != nil && *size > int64(len(tail))-off:
			return nil, infer.NewInputError(-1, in.Name, "parameters.binary_data_size %d runs past the body: only %d bytes of binary data are left for it", *size, int64(len(tail))-off)
		}
		names[i] = in.Name
		if size != nil {
			raws[i] = tail[off : off+*size]
			off += *size
		}
	}
	if off != int64(len(tail)) {
		return nil, infer.NewInputError(-1, "", "the body holds %d bytes of binary data after the JSON header, the inputs' binary_data_size add up to %d", len(tail), off)
	}
	var outputs []string
	raw := map[string]bool{}
	for _, o := range req.Outputs {
		outputs = append(outputs, o.Name)
		if b := o.Parameters.BinaryData; b != nil && *b || b == nil && req.Parameters.BinaryDataOutput {
			raw[o.Name] = true
		}
	}
	if err := checkOIPOutputs(outputs, s.Info); err != nil {
		return nil, err
	}
	if req.Outputs == nil && req.Parameters.BinaryDataOutput {
		markRaw(raw, s.Info)
	}
	full, rows, err := decodeOIPInputs(names, s.Info, func(i int, mi infer.IO) (infer.Tensor, error) {
		in := req.Inputs[i]
		if in.Parameters.BinaryDataSize == nil {
			return decodeOIPTensor(in.oipInput, mi)
		}
		if _, err := checkOIPTensor(in.Datatype, in.Shape, mi); err != nil {
			return infer.Tensor{}, err
		}
		return DecodeRaw(raws[i], mi.DType, in.Shape, mi.Name)
	})
	if err != nil {
		return nil, err
	}
	return oipRequestOf(full, rows, req.ID, outputs, raw, s)
}

// Encode writes the OIP answer as MediaTypeOIP does, but for the outputs
// of req.Raw: their header says parameters.binary_data_size and their
// raw bytes follow the header, in the order of outputs. The answer is
// framed (FrameOIPBinary); with no raw output it is the JSON alone.
func (oipBinCodec) Encode(req *Request, outs [][]infer.Tensor, s *Spec) ([]byte, error) {
	sel, err := oipOutputs(req, outs, s)
	if err != nil {
		return nil, err
	}
	b := make([]byte, oipBinFrame, 256)
	b = appendOIPAnswerHead(b, req, s)
	var tensors []byte
	for i, o := range sel {
		if i > 0 {
			b = append(b, ',')
		}
		// A dtype without raw form (none yet) stays in the JSON header.
		if !req.Raw[o.Name] || !hasRaw(o.Tensor.DType) {
			b = appendOIPTensor(b, o.Name, o.Tensor)
			continue
		}
		n := len(tensors)
		tensors = AppendRaw(tensors, o.Tensor)
		b = appendOIPTensorHead(b, o.Name, o.Tensor)
		b = fmt.Appendf(b, `,"parameters":{"binary_data_size":%d}}`, len(tensors)-n)
	}
	b = append(b, "]}"...)
	binary.BigEndian.PutUint64(b, uint64(len(b)-oipBinFrame))
	return append(b, tensors...), nil
}
