package httpdoor

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Welcome is the plain-text answer of GET /.
const Welcome = "welcome to cluster-serving: POST /predict or /v2/models/{model}/infer; GET /models, /metrics, /v2; the status page: GET /ui\n"

// routes builds the door's mux: the original frontend's routes, the Open
// Inference Protocol's, and a JSON 404 for anything else.
func (s *Server) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(Welcome))
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.metrics.snapshot())
	})
	s.legacyRoutes(mux)
	s.oipRoutes(mux)
	s.repositoryRoutes(mux)
	s.shmRoutes(mux)
	s.statsRoutes(mux)
	s.uiRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, allow)})
			return
		}
		s.writeError(w, status.Errorf(status.NotFound, "no route %s %s", r.Method, r.URL.Path), "")
	})
	s.mux = mux
}

// allowed lists the methods a route of mux other than the catch-all
// takes for r's path, "" when none does. The catch-all pattern "/" takes
// every method, so net/http's own 405 never fires: this restores it.
func allowed(mux *http.ServeMux, r *http.Request) string {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host}
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
			methods = append(methods, m)
		}
	}
	return strings.Join(methods, ", ")
}

// legacyRoutes are the original frontend's: POST /predict (the first
// model), GET /models and the per-version routes.
func (s *Server) legacyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /predict", compressing(func(w http.ResponseWriter, r *http.Request) {
		models := s.models()
		if len(models) == 0 {
			s.writeError(w, status.Errorf(status.NotFound, "no model is loaded"), "")
			return
		}
		s.predict(w, r, models[0])
	}))
	mux.HandleFunc("GET /models", func(w http.ResponseWriter, _ *http.Request) {
		models := s.models()
		out := make([]modelMeta, len(models))
		for i, m := range models {
			out[i] = legacyMeta(m)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /models/{name}", func(w http.ResponseWriter, r *http.Request) {
		var out []modelMeta
		for _, m := range s.models() {
			if m.Name == r.PathValue("name") {
				out = append(out, legacyMeta(m))
			}
		}
		if out == nil {
			s.writeError(w, status.Errorf(status.NotFound, "unknown model %q", r.PathValue("name")), "")
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /models/{name}/versions/{v}", s.withModel("name", func(w http.ResponseWriter, _ *http.Request, m Model) {
		writeJSON(w, http.StatusOK, legacyMeta(m))
	}))
	mux.HandleFunc("POST /models/{name}/versions/{v}/predict", compressing(s.withModel("name", s.predict)))
}

// oipRoutes are the Open Inference Protocol (KServe v2) REST routes.
func (s *Server) oipRoutes(mux *http.ServeMux) {
	// GET /v2 lists the extensions both doors serve (door.Extensions).
	mux.HandleFunc("GET /v2", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"name": "cluster-serving", "version": s.cfg.Version,
			"extensions": door.Extensions(s.cfg.Repository != nil)})
	})
	// The health routes answer OIP's REST health bodies, {"live": true}
	// and {"ready": true}, as KServe's server does.
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"live": true})
	})
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, _ *http.Request) {
		s.writeReady(w, "")
	})
	mux.HandleFunc("GET /v2/models", func(w http.ResponseWriter, _ *http.Request) {
		models := s.models()
		out := make([]oipMeta, len(models))
		for i, m := range models {
			out[i] = s.oipMeta(m)
		}
		writeJSON(w, http.StatusOK, map[string]any{"models": out})
	})
	for _, p := range []string{"/v2/models/{m}", "/v2/models/{m}/versions/{v}"} {
		mux.HandleFunc("GET "+p, s.withModel("m", func(w http.ResponseWriter, _ *http.Request, m Model) {
			writeJSON(w, http.StatusOK, s.oipMeta(m))
		}))
		mux.HandleFunc("GET "+p+"/ready", s.withModel("m", func(w http.ResponseWriter, _ *http.Request, m Model) {
			s.writeReady(w, m.Name)
		}))
		mux.HandleFunc("GET "+p+"/config", s.withModel("m", s.writeConfig))
		mux.HandleFunc("POST "+p+"/infer", compressing(s.withModel("m", s.infer)))
	}
}

// withModel resolves the model a route names (path values nameKey and
// "v", see model) before h runs, answering 404 when it is not served.
func (s *Server) withModel(nameKey string, h func(http.ResponseWriter, *http.Request, Model)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, err := s.model(r.PathValue(nameKey), r.PathValue("v"))
		if err != nil {
			s.writeError(w, err, "")
			return
		}
		h(w, r, m)
	}
}

// writeReady answers a readiness route, the server's (name "") or a
// model's: 200 {"ready": true}, a model's with its "name" as KServe's
// server answers, else 503 with "ready": false and the "error" of every
// error answer.
func (s *Server) writeReady(w http.ResponseWriter, name string) {
	ans := map[string]any{"ready": true}
	if name != "" {
		ans["name"] = name
	}
	if s.cfg.Ready == nil || s.cfg.Ready() {
		writeJSON(w, http.StatusOK, ans)
		return
	}
	what := "the server"
	if name != "" {
		what = "model " + name
	}
	ans["ready"] = false
	ans["error"] = what + " is not ready: models are loading or no worker serves them yet"
	writeJSON(w, http.StatusServiceUnavailable, ans)
}

// writeConfig answers GET /v2/models/{m}[/versions/{v}]/config: m's
// model configuration (door.ConfigOf) in Triton's JSON shape.
func (s *Server) writeConfig(w http.ResponseWriter, _ *http.Request, m Model) {
	b, err := kservepb.JSON(door.ConfigOf(m))
	if err != nil {
		s.writeError(w, fmt.Errorf("model %q: configuration: %w", m.Name, err), "")
		return
	}
	writeRaw(w, http.StatusOK, b)
}

// timed records the request's latency in the route's timer for m.
func (s *Server) timed(route string, m Model) func() {
	start := time.Now()
	return func() { s.metrics.timer(route + "." + m.Name + ".v" + m.Version).observe(time.Since(start)) }
}

// predict serves POST /predict: {"instances":[...]} through to m's job
// as it came; the worker's decoder answers a body it cannot read with 400,
// to which the door adds a valid example (predictHint).
func (s *Server) predict(w http.ResponseWriter, r *http.Request, m Model) {
	defer s.timed("cluster-serving.http.predict", m)()
	body, err := s.submit(w, r, m, wire.MediaTypeJSON)
	if err != nil {
		s.writeError(w, err, predictHint(m))
		return
	}
	writeRaw(w, http.StatusOK, body)
}

// predictHint is appended to a /predict 400: a valid request for m, as the
// original frontend printed one.
func predictHint(m Model) string {
	var fields []string
	for _, in := range m.Info.Inputs {
		fields = append(fields, fmt.Sprintf("%q:%s", in.Name, exampleValue(in)))
	}
	if len(fields) == 0 {
		fields = []string{`"tensor":[1.0,2.0]`}
	}
	return fmt.Sprintf(`. A valid request looks like {"instances":[{%s}]}: one object per record, mapping each model input to a tensor `+
		`(nested arrays, without the batch dim), a base64-encoded image string, or a sparse tensor {"shape":[...],"data":[...],"indices":[[...],...]}`,
		strings.Join(fields, ","))
}

// exampleValue is a tensor of in's shape without the batch dim, dynamic
// dims set to 1, when that is small; else a short vector.
func exampleValue(in infer.IO) string {
	dims := in.Shape
	if len(dims) > 0 {
		dims = dims[1:]
	}
	n := int64(1)
	dims = append([]int64(nil), dims...)
	for i, d := range dims {
		if d < 0 {
			dims[i] = 1
		}
		n *= dims[i]
	}
	if n > 8 {
		if in.DType == infer.String {
			return `["a","b"]`
		}
		return "[1.0,2.0]"
	}
	var b strings.Builder
	var k int
	var rec func(level int)
	rec = func(level int) {
		if level == len(dims) {
			k++
			if in.DType == infer.Bool {
				b.WriteString("true")
			} else if in.DType == infer.String {
				fmt.Fprintf(&b, `"s%d"`, k)
			} else if in.DType == infer.Float32 || in.DType == infer.Float64 {
				fmt.Fprintf(&b, "%d.0", k)
			} else {
				fmt.Fprintf(&b, "%d", k)
			}
			return
		}
		b.WriteByte('[')
		for i := range dims[level] {
			if i > 0 {
				b.WriteByte(',')
			}
			rec(level + 1)
		}
		b.WriteByte(']')
	}
	rec(0)
	return b.String()
}
