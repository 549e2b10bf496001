package httpdoor

import (
	"errors"
	"net/http"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// exempt reports whether r may come without a token: the welcome page,
// the health probes, which load balancers and orchestrators call bare,
// and the status page (its document, /ui/status, needs the token).
func exempt(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/", "/v2/health/live", "/v2/health/ready", "/ui":
		return true
	}
	return false
}

// repositoryPrefix starts the paths of the model repository extension.
const repositoryPrefix = "/v2/repository/"

// need returns the role r's route needs: admin for model control (the
// repository extension: its index too, which tells every model on disk and
// why it fails) and for registering shared memory (shmAdmin), infer for
// the rest.
func need(r *http.Request) door.Role {
	if strings.HasPrefix(r.URL.Path, repositoryPrefix) || shmAdmin(r.URL.Path) {
		return door.RoleAdmin
	}
	return door.RoleInfer
}

// authenticated answers 401 to a request without a valid bearer token,
// and 403 to one whose token's role is short of its route's (see need),
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
		if !strings.EqualFold(scheme, "Bearer") {
			token = ""
		}
		switch err := s.tokens.Check(strings.TrimSpace(token), need(r)); {
		case errors.Is(err, door.ErrForbidden):
			s.writeError(w, status.Errorf(http.StatusForbidden, "forbidden: %s needs a token of role admin (a line 'TOKEN admin' of httpAuthTokenFile); this one is an infer token", r.URL.Path), "")
			return
		case err != nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="cluster-serving"`)
			s.writeError(w, status.Errorf(http.StatusUnauthorized, "missing or invalid bearer token: send the header 'Authorization: Bearer TOKEN' with a token of httpAuthTokenFile"), "")
			return
		}
		next.ServeHTTP(w, r)
	})
}
