package wire

import (
	"context"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cluster-serving/cluster-serving/infer"
)

// oipCodec is the MediaTypeOIP codec: it reads and writes the whole OIP
// envelope, so the HTTP door passes bodies and answers through. One OIP
// request holds every input with its batch dim; Decode splits it along
// dim 0 into one record per row so that the Batcher can stack rows of
// concurrent requests, and Encode stacks the rows' outputs back.
type oipCodec struct{}

func init() { RegisterCodec(MediaTypeOIP, oipCodec{}) }

// OIPDatatype returns the OIP datatype name of d: FP16, BF16, FP32, FP64,
// INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, BOOL or BYTES
// (an ONNX STRING tensor, whose elements are JSON strings in OIP's JSON);
// "" for Invalid.
func OIPDatatype(d infer.DType) string {
	switch d {
	case infer.Float32:
		return "FP32"
	case infer.Float64:
		return "FP64"
	case infer.Int32:
		return "INT32"
	case infer.Int64:
		return "INT64"
	case infer.Uint8:
		return "UINT8"
	case infer.Bool:
		return "BOOL"
	case infer.Int8:
		return "INT8"
	case infer.Int16:
		return "INT16"
	case infer.Uint16:
		return "UINT16"
	case infer.Uint32:
		return "UINT32"
	case infer.Uint64:
		return "UINT64"
	case infer.Float16:
		return "FP16"
	case infer.BFloat16:
		return "BF16"
	case infer.String:
		return "BYTES"
	}
	return ""
}

type oipInput struct {
	Name     string          `json:"name"`
	Datatype string          `json:"datatype"`
	Shape    []int64         `json:"shape"`
	Data     json.RawMessage `json:"data"`
}

// check returns the *InputError of a missing name, datatype or shape,
// which every OIP input needs, JSON or binary; i is its index.
func (in *oipInput) check(i int) error {
	switch {
	case in.Name == "":
		return infer.NewInputError(-1, "", `inputs[%d]: "name" is required`, i)
	case in.Datatype == "":
		return infer.NewInputError(-1, in.Name, `"datatype" is required`)
	case in.Shape == nil:
		return infer.NewInputError(-1, in.Name, `"shape" is required`)
	}
	return nil
}

// oipRequest is the OIP inference request: its id, inputs and the outputs
// the answer should hold (all when none are named).
type oipRequest struct {
	ID      string     `json:"id"`
	Inputs  []oipInput `json:"inputs"`
	Outputs []struct {
		Name string `json:"name"`
	} `json:"outputs"`
}

// Decode reads the whole OIP envelope: the id and the requested outputs
// go into the Request for Encode, the inputs become records.
func (oipCodec) Decode(_ context.Context, body []byte, s *Spec) (*Request, error) {
	req, err := parseOIPRequest(body, s.Info)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(req.Inputs))
	for i, in := range req.Inputs {
		names[i] = in.Name
	}
	full, rows, err := decodeOIPInputs(names, s.Info, func(i int, mi infer.IO) (infer.Tensor, error) {
		return decodeOIPTensor(req.Inputs[i], mi)
	})
	if err != nil {
		return nil, err
	}
	var outputs []string
	for _, o := range req.Outputs {
		outputs = append(outputs, o.Name)
	}
	return oipRequestOf(full, rows, req.ID, outputs, nil, s)
}

// oipRequestOf is the Request of an OIP request whose inputs decoded to
// full (model order, batch dim included; rows as decodeOIPInputs says),
// shared by every OIP codec (JSON, binary, gRPC): its records, whole or
// one per row (oipRecords), its id, requested outputs and the outputs
// to answer in raw form (raw; none when empty). Rows above s.MaxBatch
// are refused here, before the split: split, each record is one row,
// which the engine's own bound lets through.
func oipRequestOf(full []infer.Tensor, rows int64, id string, outputs []string, raw map[string]bool, s *Spec) (*Request, error) {
	if rows >= 0 && len(s.Info.Inputs) > 0 {
		if err := infer.CheckRequestBatch(s.Info.Inputs[0].Name, rows, s.MaxBatch); err != nil {
			return nil, err
		}
	}
	records, err := oipRecords(full, rows, s)
	if err != nil {
		return nil, err
	}
	out := &Request{Records: records, ID: id, Whole: oipWhole(rows, s), Outputs: outputs}
	if len(raw) > 0 {
		out.Raw = raw
	}
	return out, nil
}

// markRaw marks every output of info raw in raw.
func markRaw(raw map[string]bool, info infer.ModelInfo) {
	for _, o := range info.Outputs {
		raw[o.Name] = true
	}
}

// checkOIPOutputs refuses a requested output the model does not have.
func checkOIPOutputs(names []string, info infer.ModelInfo) error {
	for _, name := range names {
		if !slices.Contains(info.OutputNames(), name) {
			return infer.NewInputError(-1, "", "unknown output %q: the model's outputs are %v", name, info.OutputNames())
		}
	}
	return nil
}

// oipInputsExample is shown in errors about the request's overall form.
const oipInputsExample = `want {"inputs":[{"name","datatype","shape","data"}]}`

// parseOIPRequest reads body and checks the envelope: every input names
// itself, its datatype, shape and data, and every requested output exists.
func parseOIPRequest(body []byte, info infer.ModelInfo) (*oipRequest, error) {
	var req oipRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, infer.NewInputError(-1, "", "malformed OIP request: %v", err)
	}
	if len(req.Inputs) == 0 {
		return nil, infer.NewInputError(-1, "", `OIP request has no "inputs": %s`, oipInputsExample)
	}
	for i, in := range req.Inputs {
		if err := in.check(i); err != nil {
			return nil, err
		}
		if len(in.Data) == 0 {
			return nil, infer.NewInputError(-1, in.Name, `"data" is required`)
		}
	}
	for _, o := range req.Outputs {
		if err := checkOIPOutputs([]string{o.Name}, info); err != nil {
			return nil, err
		}
	}
	return &req, nil
}

// decodeOIPInputs matches a request's inputs, named by names in request
// order, to the model's and decodes each with decode (i indexes names)
// in model order, each with its batch dim; rows is their common dim 0,
// -1 when they have none (see commonRows). Every OIP codec shares it, so
// they all refuse an unknown, missing or doubled input alike.
func decodeOIPInputs(names []string, info infer.ModelInfo, decode func(i int, mi infer.IO) (infer.Tensor, error)) (full []infer.Tensor, rows int64, err error) {
	known := make(map[string]bool, len(info.Inputs))
	for _, mi := range info.Inputs {
		known[mi.Name] = true
	}
	byName := make(map[string]int, len(names))
	for i, name := range names {
		if _, dup := byName[name]; dup {
			return nil, 0, infer.NewInputError(-1, name, "given twice")
		}
		// An unknown name first: a misspelt input is unknown, not the
		// model's input it was meant to be "missing".
		if !known[name] {
			return nil, 0, infer.NewInputError(-1, name, "unknown input: the model's inputs are %v", info.InputNames())
		}
		byName[name] = i
	}
	full = make([]infer.Tensor, len(info.Inputs))
	rows = -1
	for j, mi := range info.Inputs {
		i, ok := byName[mi.Name]
		if !ok {
			return nil, 0, infer.NewInputError(-1, mi.Name, "missing: the model's inputs are %v", info.InputNames())
		}
		delete(byName, mi.Name)
		t, err := decode(i, mi)
		if err != nil {
			return nil, 0, err
		}
		full[j] = t
	}
	return full, commonRows(full), nil
}

// commonRows returns the dim 0 the tensors share, or -1 when they have no
// rows to split along: a scalar among them (a rank-0 tensor has no rows,
// e.g. Clip's min or CumSum's axis) or inputs that disagree on dim 0.
func commonRows(ts []infer.Tensor) int64 {
	rows := int64(-1)
	for _, t := range ts {
		switch {
		case len(t.Shape) == 0:
			return -1
		case rows >= 0 && t.Shape[0] != rows:
			return -1
		}
		rows = t.Shape[0]
	}
	return rows
}

// oipWhole reports whether a request runs as one record, whole: when it
// has no common rows (a scalar input, or inputs that disagree on dim 0),
// or the model has no dynamic batch dim (its dim 0 is fixed, e.g. [3,4,5],
// so rows cannot be stacked anyway). The engine passes tensors of the
// model's rank untouched, and the outputs go out as the model made them.
func oipWhole(rows int64, s *Spec) bool { return rows < 0 || !s.Info.DynamicBatch }

// oipRecords splits the request's tensors along dim 0 into one record per
// row, so that the Batcher can stack rows of concurrent requests; a whole
// request (oipWhole) is one record.
func oipRecords(full []infer.Tensor, rows int64, s *Spec) ([][]infer.Tensor, error) {
	if oipWhole(rows, s) {
		return [][]infer.Tensor{full}, nil
	}
	if rows == 0 {
		return nil, infer.NewInputError(-1, s.Info.Inputs[0].Name, "batch dim is 0: send at least one row")
	}
	ns := make([]int64, rows)
	for r := range ns {
		ns[r] = 1
	}
	records := make([][]infer.Tensor, rows)
	for r := range records {
		records[r] = make([]infer.Tensor, len(full))
	}
	for j, t := range full {
		parts, err := infer.Split(t, ns)
		if err != nil {
			return nil, err
		}
		for r, part := range parts {
			if !s.AlreadyBatched {
				part.Shape = part.Shape[1:]
			}
			records[r][j] = part
		}
	}
	return records, nil
}

// checkOIPTensor checks an OIP input's datatype and shape against the
// model input mi, whatever form its data comes in, and returns its
// element count.
func checkOIPTensor(datatype string, shape []int64, mi infer.IO) (int64, error) {
	if want := OIPDatatype(mi.DType); datatype != want {
		return 0, infer.NewInputError(-1, mi.Name, "datatype %q does not match the model's %s", datatype, want)
	}
	n, err := rawElems(shape, mi.Name)
	if err != nil {
		return 0, err
	}
	if !infer.FitsShape(shape, mi.Shape) {
		return 0, infer.NewInputError(-1, mi.Name, "shape %s does not match model %s (OIP shapes include the batch dim)", infer.ShapeString(shape), infer.ShapeString(mi.Shape))
	}
	return n, nil
}

// decodeOIPTensor checks one OIP input against the model input and parses
// its data, flat or nested, into a Tensor of the given shape, with the
// decoder of the instances (json_decode.go): one JSON tensor decoder.
func decodeOIPTensor(in oipInput, mi infer.IO) (infer.Tensor, error) {
	n, err := checkOIPTensor(in.Datatype, in.Shape, mi)
	if err != nil {
		return infer.Tensor{}, err
	}
	if len(bytes.TrimSpace(in.Data)) == 0 {
		return infer.Tensor{}, infer.NewInputError(-1, mi.Name, `"data" is required`)
	}
	// The shape only hints at the elements' count: a short body may claim
	// a huge shape, and a hint of that size would end the process (out of
	// memory). Each element takes at least two bytes of data with its comma.
	t, err := parseDenseNulls(&scanner{b: in.Data}, mi.DType, int(min(n, int64(len(in.Data)/2+1))))
	if err != nil {
		var ie *infer.InputError
		if errors.As(err, &ie) && ie.Input == "" {
			return infer.Tensor{}, &infer.InputError{Instance: -1, Input: mi.Name, Msg: "data: " + ie.Msg} // ie may be shared (errRagged)
		}
		return infer.Tensor{}, infer.NewInputError(-1, mi.Name, "data: %v", err)
	}
	if int64(t.Len()) != n {
		return infer.Tensor{}, infer.NewInputError(-1, mi.Name, "data has %d elements, shape %s needs %d", t.Len(), infer.ShapeString(in.Shape), n)
	}
	t.Shape = append([]int64(nil), in.Shape...) // flat or nested: the shape is the request's
	return t, nil
}

// Encode writes the whole OIP answer: model_name and model_version of
// s.Model, the request's id when it had one, and its requested outputs
// (every output when it named none), each stacked back along dim 0 from
// the records' rows. Post-processing does not apply to OIP answers: they
// are typed tensors.
func (oipCodec) Encode(req *Request, outs [][]infer.Tensor, s *Spec) ([]byte, error) {
	sel, err := oipOutputs(req, outs, s)
	if err != nil {
		return nil, err
	}
	b := appendOIPAnswerHead(make([]byte, 0, 256), req, s)
	for i, o := range sel {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendOIPTensor(b, o.Name, o.Tensor)
	}
	return append(b, "]}"...), nil
}

// appendOIPAnswerHead appends an OIP answer up to its outputs' '[':
// model_name and model_version of s.Model and the request's id when it
// had one.
func appendOIPAnswerHead(b []byte, req *Request, s *Spec) []byte {
	b = append(b, `{"model_name":`...)
	b = appendQuoted(b, s.Model.Name)
	b = append(b, `,"model_version":`...)
	b = appendQuoted(b, s.Model.Version)
	if req.ID != "" {
		b = append(b, `,"id":`...)
		b = appendQuoted(b, req.ID)
	}
	return append(b, `,"outputs":[`...)
}

// oipOutput is one output of an OIP answer.
type oipOutput struct {
	Name   string
	Tensor infer.Tensor
}

// oipOutputs returns the outputs an OIP answer holds, shared by every
// OIP codec: the request's requested outputs (every output when it named
// none), in model order, each stacked back along dim 0 from the records'
// rows unless the request ran whole.
func oipOutputs(req *Request, outs [][]infer.Tensor, s *Spec) ([]oipOutput, error) {
	if len(outs) == 0 {
		return nil, fmt.Errorf("no records to encode")
	}
	for r, rec := range outs {
		if len(rec) != len(outs[0]) {
			return nil, fmt.Errorf("record %d has %d outputs, record 0 has %d", r, len(rec), len(outs[0]))
		}
	}
	var sel []oipOutput
	for j := range outs[0] {
		name := ""
		if j < len(s.Info.Outputs) {
			name = s.Info.Outputs[j].Name
		}
		if req.Outputs != nil && !slices.Contains(req.Outputs, name) {
			continue
		}
		t := outs[0][j]
		if !req.Whole {
			var err error
			if t, err = stackOutput(outs, j, s.Info); err != nil {
				return nil, err
			}
		}
		sel = append(sel, oipOutput{Name: name, Tensor: t})
	}
	return sel, nil
}

// stackOutput stacks output j of every record along dim 0.
func stackOutput(outs [][]infer.Tensor, j int, info infer.ModelInfo) (infer.Tensor, error) {
	col := make([]infer.Tensor, len(outs))
	for r, rec := range outs {
		t := rec[j]
		// A record's output lost its batch dim of 1 unless the inputs
		// came batched: give it back.
		if j < len(info.Outputs) && len(t.Shape) == len(info.Outputs[j].Shape)-1 || len(t.Shape) == 0 {
			t.Shape = append([]int64{1}, t.Shape...)
		}
		if r > 0 && !slices.Equal(t.Shape[1:], col[0].Shape[1:]) {
			return infer.Tensor{}, fmt.Errorf("output %d: rows have shapes %s and %s", j, infer.ShapeString(col[0].Shape), infer.ShapeString(t.Shape))
		}
		col[r] = t
	}
	return infer.Stack(col)
}

// appendOIPTensor appends {"name","datatype","shape","data"} for t.
func appendOIPTensor(b []byte, name string, t infer.Tensor) []byte {
	b = appendOIPTensorHead(b, name, t)
	b = append(b, `,"data":[`...)
	b = appendData(b, t.Data)
	return append(b, "]}"...)
}

// appendOIPTensorHead appends an OIP output up to its shape's ']':
// {"name","datatype","shape" of t, without the closing brace.
func appendOIPTensorHead(b []byte, name string, t infer.Tensor) []byte {
	b = append(b, `{"name":`...)
	b = appendQuoted(b, name)
	b = append(b, `,"datatype":"`...)
	b = append(b, OIPDatatype(t.DType)...)
	b = append(b, `","shape":[`...)
	b = appendList(b, t.Shape, appendInt[int64])
	return append(b, ']')
}
