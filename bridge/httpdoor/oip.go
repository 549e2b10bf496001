package httpdoor

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// ioMeta is one input or output in model metadata.
type ioMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// oipMeta is the OIP model metadata answer. Parameters is an extension
// the protocol allows: whether the model batches and why.
type oipMeta struct {
	Name       string     `json:"name"`
	Versions   []string   `json:"versions"`
	Platform   string     `json:"platform"`
	Inputs     []ioMeta   `json:"inputs"`
	Outputs    []ioMeta   `json:"outputs"`
	Parameters *batchMeta `json:"parameters,omitempty"`
}

// batchMeta says whether the workers stack concurrent requests of a model
// into one run, and why (infer.ModelInfo.BatchReason); nil when the door
// does not know (it did not describe the model).
type batchMeta struct {
	Batching       bool   `json:"batching"`
	BatchingReason string `json:"batching_reason"`
}

func batching(info infer.ModelInfo) *batchMeta {
	if info.BatchReason == "" {
		return nil
	}
	return &batchMeta{Batching: info.DynamicBatch, BatchingReason: info.BatchReason}
}

// modelMeta is the metadata of the original /models routes.
type modelMeta struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Job     string   `json:"job"`
	Inputs  []ioMeta `json:"inputs"`
	Outputs []ioMeta `json:"outputs"`
	*batchMeta
}

func ioMetas(ios []infer.IO) []ioMeta {
	out := make([]ioMeta, len(ios))
	for i, io := range ios {
		shape := io.Shape
		if shape == nil {
			shape = []int64{}
		}
		out[i] = ioMeta{Name: io.Name, Datatype: wire.OIPDatatype(io.DType), Shape: shape}
	}
	return out
}

func legacyMeta(m Model) modelMeta {
	return modelMeta{Name: m.Name, Version: m.Version, Job: m.Job, Inputs: ioMetas(m.Info.Inputs), Outputs: ioMetas(m.Info.Outputs),
		batchMeta: batching(m.Info)}
}

func (s *Server) oipMeta(m Model) oipMeta {
	var versions []string
	for _, o := range s.models() {
		if o.Name == m.Name {
			versions = append(versions, o.Version)
		}
	}
	return oipMeta{Name: m.Name, Versions: versions, Platform: door.PlatformOf(m),
		Inputs: ioMetas(m.Info.Inputs), Outputs: ioMetas(m.Info.Outputs), Parameters: batching(m.Info)}
}

// infer serves POST /v2/models/{m}[/versions/{v}]/infer: the body goes
// through to m's job as it came, and the worker's answer (the whole OIP
// response, see wire.MediaTypeOIP) comes back as it is. A body with the
// binary tensor data extension goes through inferBinary, one with
// inputs or outputs in shared memory through inferSHM.
func (s *Server) infer(w http.ResponseWriter, r *http.Request, m Model) {
	defer s.timed("cluster-serving.http.infer", m)()
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	if s.inferSHM(w, r, m, body) {
		return
	}
	if r.Header.Get(wire.HeaderInferenceContentLength) != "" || bytes.Contains(body, []byte("binary_data")) {
		s.inferBinary(w, r, m, body)
		return
	}
	answer, err := s.send(r, m, wire.MediaTypeOIP, body)
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	writeRaw(w, http.StatusOK, answer)
}

// inferBinary serves an OIP request with the binary tensor data
// extension (wire.MediaTypeOIPBinary): Inference-Header-Content-Length
// bytes of JSON, then the raw tensors of the inputs that say
// parameters.binary_data_size. Without the header the body is all JSON,
// which may still ask for binary outputs (binary_data,
// binary_data_output, as Triton's clients do by default; the door looks
// for the word in the body). An answer with binary outputs has the same
// form under Content-Type application/octet-stream; one without is plain
// JSON.
func (s *Server) inferBinary(w http.ResponseWriter, r *http.Request, m Model, body []byte) {
	headerLen, err := headerLength(r, body)
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	s.sendBinary(w, r, m, wire.FrameOIPBinary(headerLen, body), wire.SplitOIPBinary)
}

// sendBinary sends framed, a MediaTypeOIPBinary body, to m's job and
// answers what split makes of the worker's answer (writeBinary).
func (s *Server) sendBinary(w http.ResponseWriter, r *http.Request, m Model, framed []byte, split func([]byte) (header, tensors []byte, err error)) {
	answer, err := s.send(r, m, wire.MediaTypeOIPBinary, framed)
	if err == nil {
		var header, tensors []byte
		if header, tensors, err = split(answer); err == nil {
			writeBinary(w, header, tensors)
			return
		}
	}
	s.writeError(w, err, "")
}

// headerLength is the length of the JSON header that starts body: the
// Inference-Header-Content-Length of r, or all of body without one.
func headerLength(r *http.Request, body []byte) (int, error) {
	h := r.Header.Get(wire.HeaderInferenceContentLength)
	if h == "" {
		return len(body), nil
	}
	n, err := strconv.Atoi(h)
	if err != nil || n < 0 || n > len(body) {
		return 0, status.Errorf(status.BadInput, "header %s: %q is not a length within the body's %d bytes", wire.HeaderInferenceContentLength, h, len(body))
	}
	return n, nil
}

// writeBinary answers an OIP answer of the binary tensor data extension:
// plain JSON when it has no raw tensors, else the header and the tensors
// under Content-Type application/octet-stream.
func writeBinary(w http.ResponseWriter, header, tensors []byte) {
	if tensors == nil {
		writeRaw(w, http.StatusOK, header)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(wire.HeaderInferenceContentLength, strconv.Itoa(len(header)))
	w.Header().Set("Content-Length", strconv.Itoa(len(header)+len(tensors)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(header)
	_, _ = w.Write(tensors)
}
