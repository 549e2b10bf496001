package httpdoor

import (
	"encoding/json"
	"fmt"
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

// oipMeta is the OIP model metadata answer.
type oipMeta struct {
	Name     string   `json:"name"`
	Versions []string `json:"versions"`
	Platform string   `json:"platform"`
	Inputs   []ioMeta `json:"inputs"`
	Outputs  []ioMeta `json:"outputs"`
}

// modelMeta is the metadata of the original /models routes.
type modelMeta struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Job     string   `json:"job"`
	Inputs  []ioMeta `json:"inputs"`
	Outputs []ioMeta `json:"outputs"`
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
	return modelMeta{Name: m.Name, Version: m.Version, Job: m.Job, Inputs: ioMetas(m.Info.Inputs), Outputs: ioMetas(m.Info.Outputs)}
}

func (s *Server) oipMeta(m Model) oipMeta {
	var versions []string
	for _, o := range s.cfg.Models {
		if o.Name == m.Name {
			versions = append(versions, o.Version)
		}
	}
	return oipMeta{Name: m.Name, Versions: versions, Platform: "onnxruntime_onnx",
		Inputs: ioMetas(m.Info.Inputs), Outputs: ioMetas(m.Info.Outputs)}
}

// oipRequest is what the door reads of an infer request; "data" stays raw
// for the worker's codec (wire.MediaTypeOIP) to decode.
type oipRequest struct {
	ID     string `json:"id"`
	Inputs []struct {
		Name     string          `json:"name"`
		Datatype string          `json:"datatype"`
		Shape    []int64         `json:"shape"`
		Data     json.RawMessage `json:"data"`
	} `json:"inputs"`
	Outputs []struct {
		Name string `json:"name"`
	} `json:"outputs"`
}

type oipResponse struct {
	ModelName    string            `json:"model_name"`
	ModelVersion string            `json:"model_version"`
	ID           string            `json:"id,omitempty"`
	Outputs      []json.RawMessage `json:"outputs"`
}

// infer serves POST /v2/models/{m}[/versions/{v}]/infer.
func (s *Server) infer(w http.ResponseWriter, r *http.Request, m Model) {
	defer s.timed("cluster-serving.http.infer", m)()
	var req oipRequest
	check := func(body []byte) error {
		if err := json.Unmarshal(body, &req); err != nil {
			return wire.Errorf(wire.StatusBadInput, "malformed JSON: %v", err)
		}
		if len(req.Inputs) == 0 {
			return wire.Errorf(wire.StatusBadInput, `no "inputs": want {"inputs":[{"name","datatype","shape","data"}]}`)
		}
		for i, in := range req.Inputs {
			switch {
			case in.Name == "":
				return wire.Errorf(wire.StatusBadInput, `inputs[%d]: "name" is required`, i)
			case in.Datatype == "":
				return wire.Errorf(wire.StatusBadInput, `input %q: "datatype" is required`, in.Name)
			case in.Shape == nil:
				return wire.Errorf(wire.StatusBadInput, `input %q: "shape" is required`, in.Name)
			case len(in.Data) == 0:
				return wire.Errorf(wire.StatusBadInput, `input %q: "data" is required`, in.Name)
			}
		}
		for _, o := range req.Outputs {
			if !hasOutput(m, o.Name) {
				return wire.Errorf(wire.StatusBadInput, "unknown output %q: the model's outputs are %v", o.Name, outputNames(m))
			}
		}
		return nil
	}
	body, err := s.submit(w, r, m, wire.MediaTypeOIP, check)
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	var ans struct {
		Outputs []json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		s.writeError(w, fmt.Errorf("worker answer: %w", err), "")
		return
	}
	resp := oipResponse{ModelName: m.Name, ModelVersion: m.Version, ID: req.ID, Outputs: ans.Outputs}
	if len(req.Outputs) > 0 {
		resp.Outputs = resp.Outputs[:0:0]
		for _, raw := range ans.Outputs {
			var o struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(raw, &o)
			for _, want := range req.Outputs {
				if want.Name == o.Name {
					resp.Outputs = append(resp.Outputs, raw)
					break
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func hasOutput(m Model, name string) bool {
	for _, o := range m.Info.Outputs {
		if o.Name == name {
			return true
		}
	}
	return false
}

func outputNames(m Model) []string {
	names := make([]string, len(m.Info.Outputs))
	for i, o := range m.Info.Outputs {
		names[i] = o.Name
	}
	return names
}
