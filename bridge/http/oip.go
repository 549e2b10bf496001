package httpdoor

import (
	"net/http"

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
	return oipMeta{Name: m.Name, Versions: versions, Platform: "onnxruntime_onnx",
		Inputs: ioMetas(m.Info.Inputs), Outputs: ioMetas(m.Info.Outputs), Parameters: batching(m.Info)}
}

// infer serves POST /v2/models/{m}[/versions/{v}]/infer: the body goes
// through to m's job as it came, and the worker's answer (the whole OIP
// response, see wire.MediaTypeOIP) comes back as it is.
func (s *Server) infer(w http.ResponseWriter, r *http.Request, m Model) {
	defer s.timed("cluster-serving.http.infer", m)()
	body, err := s.submit(w, r, m, wire.MediaTypeOIP)
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	writeRaw(w, http.StatusOK, body)
}
