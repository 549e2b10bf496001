package httpdoor

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// The status page: one HTML file with its script, embedded, no build
// step and nothing fetched from elsewhere. It polls GET /ui/status, the
// same document `cluster-serving status -json` prints.
//
//go:embed ui/index.html
var uiPage []byte

// uiPolicy is the page's Content-Security-Policy: its own inline script
// (by hash) and styles, requests to this door only, no framing.
var uiPolicy = func() string {
	script := ""
	if m := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindSubmatch(uiPage); m != nil {
		sum := sha256.Sum256(m[1])
		script = " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	return "default-src 'none'; script-src" + script + "; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// StatusFunc takes the status document of the whole mesh
// (serving.Node.Status).
type StatusFunc func(context.Context) (*mesh.Status, error)

// statusCacheFor is how long one taken document answers every page:
// pages polling together cost the mesh one discovery, not one each.
const statusCacheFor = time.Second

// statusTimeout bounds taking the document (discovery waits 300ms).
const statusTimeout = 5 * time.Second

// statusCache holds the last document taken; its lock makes concurrent
// polls wait for one taking instead of each starting its own.
type statusCache struct {
	mu   sync.Mutex
	at   time.Time
	body []byte
}

// uiRoutes serve the page (no token needed: it holds no data) and the
// document behind it (the door's token, role infer or admin), both
// compressed for a browser (a poll of a small mesh is under 1 KB).
func (s *Server) uiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui", compressing(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", uiPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(uiPage)
	}))
	mux.HandleFunc("GET /ui/status", compressing(func(w http.ResponseWriter, r *http.Request) {
		body, err := s.statusDoc(r.Context())
		if err != nil {
			s.writeError(w, err, "")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeRaw(w, http.StatusOK, body)
	}))
}

// statusDoc is the status document as JSON, taken at most once per
// statusCacheFor. Without a StatusFunc it is a 404; a mesh that does not
// answer a 503 (retry).
func (s *Server) statusDoc(ctx context.Context) ([]byte, error) {
	if s.cfg.Status == nil {
		return nil, status.Errorf(status.NotFound, "no status page: this HTTP door was built without a connection to the mesh")
	}
	c := &s.statusCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.body != nil && time.Since(c.at) < statusCacheFor {
		return c.body, nil
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	doc, err := s.cfg.Status(ctx)
	if err != nil {
		return nil, status.Errorf(status.Busy, "status of the mesh: %v", err)
	}
	if c.body, err = json.Marshal(doc); err != nil {
		return nil, err
	}
	c.at = time.Now()
	return c.body, nil
}
