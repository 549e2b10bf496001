package httpdoor

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// Repository is the model control behind the model repository extension
// of the Open Inference Protocol (Triton's "model_repository"): the models
// that serve now, the index of the repository, and load and unload. cmd
// passes an adapter of the node's model repository. Its methods must be
// safe for concurrent use.
type Repository interface {
	// Models and Index: see door.Catalog (the gRPC door takes the same
	// adapter as its Catalog, and serves load and unload through its
	// door.Control).
	door.Catalog
	door.Control
}

// models lists the served models: the repository's when there is one.
func (s *Server) models() []Model {
	if s.cfg.Repository == nil {
		return s.cfg.Models
	}
	return door.Models(s.cfg.Repository, nil)
}

// repositoryRoutes are the model repository extension's routes, when the
// door has a Repository:
//
//	POST /v2/repository/index                 {"ready": bool} (optional) → [{name, version, state, reason}]
//	POST /v2/repository/models/{m}/load       {} (optional) → 200, empty body
//	POST /v2/repository/models/{m}/unload     {} (optional) → 200, empty body
//
// Failures answer {"error": "..."}: 404 for an unknown model, 400 for a
// model that fails to load or a body that cannot be read.
func (s *Server) repositoryRoutes(mux *http.ServeMux) {
	if s.cfg.Repository == nil {
		return
	}
	mux.HandleFunc("POST /v2/repository/index", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RepositoryName string `json:"repository_name"`
			Ready          bool   `json:"ready"`
		}
		if err := readOptionalJSON(r, &req); err != nil {
			s.writeError(w, err, "")
			return
		}
		if err := door.OneRepository(req.RepositoryName); err != nil {
			s.writeError(w, err, "")
			return
		}
		out := s.cfg.Repository.Index(req.Ready)
		if out == nil {
			out = []door.ModelState{}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /v2/repository/models/{m}/load", func(w http.ResponseWriter, r *http.Request) {
		if err := readControl(r, nil); err != nil {
			s.writeError(w, err, "")
			return
		}
		s.control(w, r.PathValue("m"), "load", s.cfg.Repository.Load(r.Context(), r.PathValue("m")))
	})
	mux.HandleFunc("POST /v2/repository/models/{m}/unload", func(w http.ResponseWriter, r *http.Request) {
		// unload_dependents is Triton's, for ensembles; there are none here.
		if err := readControl(r, []string{"unload_dependents"}); err != nil {
			s.writeError(w, err, "")
			return
		}
		s.control(w, r.PathValue("m"), "unload", s.cfg.Repository.Unload(r.Context(), r.PathValue("m")))
	})
}

// control answers a load or unload: 200 with an empty body, or the error.
func (s *Server) control(w http.ResponseWriter, name, what string, err error) {
	if err := door.ControlError(what, name, err); err != nil {
		s.writeError(w, err, "")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// readControl reads a load or unload body, {"parameters": {...}}, empty
// allowed; a parameter not in known is refused by name, since it would
// otherwise be silently ignored (Triton's config and file: overrides).
func readControl(r *http.Request, known []string) error {
	var req struct {
		Parameters map[string]json.RawMessage `json:"parameters"`
	}
	if err := readOptionalJSON(r, &req); err != nil {
		return err
	}
	return door.UnsupportedParameters(slices.Collect(maps.Keys(req.Parameters)), known...)
}

// readOptionalJSON decodes r's body into v; an empty body leaves v as it
// is. Unknown fields are refused by name.
func readOptionalJSON(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(body)) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return status.Errorf(status.BadInput, "request body: %v", err)
	}
	return nil
}
