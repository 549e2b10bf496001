package httpdoor

import (
	"net/http"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// statsRoutes serve Triton's statistics extension: GET /v2/models/stats
// (every served model), /v2/models/{m}/stats (every version of m) and
// /v2/models/{m}/versions/{v}/stats, each a ModelStatisticsResponse in
// Triton's JSON, summed over the mesh's workers (door.Statistics). They
// need a token of role infer, as every read-only route does.
//
// GET /v2/models/stats is the more specific pattern, so it wins over the
// metadata route GET /v2/models/{m} for a model named "stats", as in
// Triton; that model's metadata stays at /v2/models/stats/versions/{v},
// and its other routes (/v2/models/stats/ready, /infer, /stats) are not
// shadowed: they have more segments.
func (s *Server) statsRoutes(mux *http.ServeMux) {
	for _, p := range []string{"/v2/models/stats", "/v2/models/{m}/stats", "/v2/models/{m}/versions/{v}/stats"} {
		mux.HandleFunc("GET "+p, s.stats)
	}
}

// stats answers the statistics of the models the route names.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	res, err := door.Statistics(r.Context(), s.sub, s.cfg.Repository, s.models(), r.PathValue("m"), r.PathValue("v"))
	if err != nil {
		s.writeError(w, err, "")
		return
	}
	b, err := kservepb.JSON(res)
	if err != nil {
		s.writeError(w, status.Errorf(status.Internal, "encode statistics: %v", err), "")
		return
	}
	writeRaw(w, http.StatusOK, b)
}
