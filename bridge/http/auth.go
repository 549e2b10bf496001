package httpdoor

import (
	"net/http"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// exempt reports whether r may come without a token: the welcome page and
// the health probes, which load balancers and orchestrators call bare.
func exempt(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/", "/v2/health/live", "/v2/health/ready":
		return true
	}
	return false
}

// authenticated answers 401 to a request without a valid bearer token,
// before its body is read, unless the route is exempt. It neither logs
// nor echoes the Authorization header.
func (s *Server) authenticated(next http.Handler) http.Handler {
	if s.tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || !s.tokens.Valid(strings.TrimSpace(token)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cluster-serving"`)
			s.writeError(w, wire.Errorf(http.StatusUnauthorized, "missing or invalid bearer token: send the header 'Authorization: Bearer TOKEN' with a token of httpAuthTokenFile"), "")
			return
		}
		next.ServeHTTP(w, r)
	})
}
