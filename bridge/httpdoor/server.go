package httpdoor

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/telemetry"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// Submitter and Model are the doors' (see package door).
type (
	Submitter = door.Submitter
	Model     = door.Model
)

// Defaults applied by Config for zero fields.
const (
	DefaultAddr           = "0.0.0.0:10020"
	DefaultRequestTimeout = door.DefaultRequestTimeout
	DefaultMaxBodyBytes   = door.DefaultMaxBodyBytes
	DefaultShutdownGrace  = door.DefaultShutdownGrace
)

// Config configures a Server. The zero value, with Models set, means all
// defaults.
//
// Of the fields it shares with the gRPC door (door.Config): Addr
// defaults to 0.0.0.0:10020; the first of Models is the default model of
// POST /predict; an inference request past RequestTimeout is answered
// 504, one that gets no token within TokenAcquireTimeout 429;
// /v2/health/ready and the model ready routes answer 503 until Ready
// returns true; Version is what /v2 reports; 5xx answers are logged.
// With TokenFile every route but GET /, /v2/health/live and
// /v2/health/ready answers 401 to a request without "Authorization:
// Bearer <one of its tokens>". Conns holds the idle, read and write
// timeouts and the cap past which the door sheds its longest-idle
// connection.
type Config struct {
	door.Config
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default 16 MiB.
	MaxBodyBytes int64

	// Repository, when set, lists the served models instead of Models
	// (which may then be empty) and answers the model repository
	// extension's routes (repository.go).
	Repository Repository

	// Status, when set, serves the status page GET /ui and its document
	// GET /ui/status (ui.go).
	Status StatusFunc
}

// ErrInvalidConfig is wrapped by Config.Validate; the message names the field.
var ErrInvalidConfig = errors.New("httpdoor: invalid config")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	if len(c.Models) == 0 && c.Repository == nil {
		return fmt.Errorf("%w: Models is empty", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, m := range c.Models {
		v := m.Version
		v = cmp.Or(v, "1")
		switch {
		case !nameRE.MatchString(m.Name):
			return fmt.Errorf("%w: Models: name %q may hold only letters, digits, '_', '.' and '-'", ErrInvalidConfig, m.Name)
		case !nameRE.MatchString(v):
			return fmt.Errorf("%w: Models: version %q of %s may hold only letters, digits, '_', '.' and '-'", ErrInvalidConfig, v, m.Name)
		case seen[m.Name+"/"+v]:
			return fmt.Errorf("%w: Models: %s version %s listed twice", ErrInvalidConfig, m.Name, v)
		}
		seen[m.Name+"/"+v] = true
		if err := mesh.ValidateJob(m.Job); err != nil {
			return fmt.Errorf("%w: Models: %s: %w", ErrInvalidConfig, m.Name, err)
		}
	}
	if err := c.ValidateTLS(ErrInvalidConfig); err != nil {
		return err
	}
	if err := c.Conns.Validate(ErrInvalidConfig, cmp.Or(c.RequestTimeout, DefaultRequestTimeout)); err != nil {
		return err
	}
	return mesh.CheckLimits(ErrInvalidConfig, mesh.Limit{Name: "RequestTimeout", Value: c.RequestTimeout},
		mesh.Limit{Name: "MaxBodyBytes", Value: c.MaxBodyBytes}, mesh.Limit{Name: "TokensPerSecond", Value: c.TokensPerSecond},
		mesh.Limit{Name: "TokenAcquireTimeout", Value: c.TokenAcquireTimeout}, mesh.Limit{Name: "ShutdownGrace", Value: c.ShutdownGrace})
}

// Server is the HTTP door. Its handler is safe for concurrent use; Run or
// Serve it once.
type Server struct {
	cfg     Config
	sub     Submitter
	limiter *door.TokenBucket // nil: no limit
	metrics *registry
	log     *slog.Logger
	mux     *http.ServeMux
	tls     *tls.Config  // nil: plain HTTP
	tokens  *door.Tokens // nil: no authentication
	conns   *door.Listener

	statusCache statusCache
}

// New validates cfg, loads its TLS and token files and builds the routes.
// The caller keeps ownership of s. A file that cannot be used is a
// *door.FileError naming its Config field.
func New(s Submitter, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Addr = cmp.Or(cfg.Addr, DefaultAddr)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	o, err := cfg.Open(ErrInvalidConfig, s)
	if err != nil {
		return nil, err
	}
	srv := &Server{cfg: cfg, sub: s, metrics: newRegistry(), log: cfg.Logger, tls: o.TLS, tokens: o.Tokens, limiter: o.Bucket}
	srv.routes()
	return srv, nil
}

// Handler returns the door's routes, each request in a server span, its
// token checked (TokenFile) and then its body bounded (MaxBodyBytes).
func (s *Server) Handler() http.Handler {
	return s.traced(s.recovering(s.authenticated(s.bounded(s.mux))))
}

// bounded answers 413 at once to a request whose Content-Length is over
// MaxBodyBytes, whatever its route, and caps the body of every other
// request, so that no route can read more than MaxBodyBytes. A body with
// a Content-Encoding is decoded as it is read and capped again at
// MaxBodyBytes decoded (decode); an unknown coding is a 415.
func (s *Server) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.writeError(w, tooLarge(s.cfg.MaxBodyBytes), "")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		if err := decode(w, r, s.cfg.MaxBodyBytes); err != nil {
			s.writeError(w, err, "")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func tooLarge(limit int64) error {
	return status.Errorf(status.TooLarge, "request body larger than %d bytes (httpMaxBodyBytes)", limit)
}

// recovering answers a request whose handling panicked with 500
// {"error":...}, logging the panic once with its stack, so that one bad
// request cannot take the door down; http.ErrAbortHandler passes through
// as net/http means it.
func (s *Server) recovering(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.ErrorContext(r.Context(), "HTTP door: handler panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": fmt.Sprintf("internal error: %v", p)})
		}()
		next.ServeHTTP(w, r)
	})
}

// Run listens on Config.Addr and serves until ctx ends (see Serve).
func (s *Server) Run(ctx context.Context) error {
	return door.Run(ctx, s.cfg.Addr, s.Serve)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, lets requests in flight finish within ShutdownGrace and then
// closes what is left. With TLSCertFile it speaks TLS on ln and nothing
// else. It holds at most Conns.MaxConnections connections open, shedding
// the longest-idle one to admit a new one (door.Listener), and closes
// connections idle past Conns.IdleTimeout and requests slower than
// Conns.ReadTimeout or Conns.WriteTimeout. It closes ln and returns an
// error only when serving fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	door.WarnIfOpen(s.log, "HTTP door", ln.Addr(), s.tokens == nil && s.cfg.TLSClientCAFile == "")
	scheme := "http://"
	if s.tls != nil {
		scheme = "https://"
	}
	defer s.cfg.Metrics.OpenDoor(telemetry.DoorHTTP, scheme+ln.Addr().String())()
	s.conns = door.NewListener(ln, s.cfg.Conns.MaxConnections)
	if ln = s.conns; s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: door.HeaderTimeout,
		ReadTimeout:       s.cfg.Conns.ReadTimeout,
		WriteTimeout:      s.cfg.Conns.WriteTimeout,
		IdleTimeout:       s.cfg.Conns.IdleTimeout,
		ConnState:         s.connState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return door.Serve(ctx, hs, ln, "HTTP door", s.cfg.ShutdownGrace, s.log, "models", len(s.models()),
		"tls", s.tls != nil, "clientCerts", s.cfg.TLSClientCAFile != "", "tokens", s.tokens != nil)
}

// connState tells the listener which connections have a request in
// flight, so that it sheds only idle ones.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateActive:
		s.conns.Begin(c)
	case http.StateIdle:
		s.conns.End(c)
	}
}

// model finds name at version ("" = the last listed version of name).
func (s *Server) model(name, version string) (Model, error) {
	return door.Lookup(s.models(), s.cfg.Repository, name, version)
}

// submit reads the body (at most MaxBodyBytes: bounded caps it), waits for a token and
// sends the body as it came to m's job under contentType. It returns the
// worker's answer or an error for writeError.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, m Model, contentType string) ([]byte, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return s.send(r, m, contentType, body)
}

// readBody reads r's body, which bounded caps.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(mbe.Limit)
		}
		return nil, status.Errorf(status.BadInput, "read body: %v", err)
	}
	return body, nil
}

// send waits for a token and sends body to m's job under contentType.
func (s *Server) send(r *http.Request, m Model, contentType string, body []byte) ([]byte, error) {
	if sw, _ := r.Context().Value(statusWriterKey{}).(*statusWriter); sw != nil {
		sw.job = m.Job
	}
	if err := s.limiter.Take(r.Context()); err != nil {
		s.record(r.Context(), m.Job, status.Of(err), time.Now())
		return nil, err
	}
	sched, err := door.ScheduleOf(m, contentType, body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	// ctx carries the door's server span (traced): the mesh continues it.
	start := time.Now()
	res, err := s.cfg.Submit(ctx, s.sub, m, mesh.Request{ContentType: contentType, Body: body, Schedule: sched})
	s.record(ctx, m.Job, status.Of(err), start)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// answerOf maps err to its HTTP status (status.Of) and the message the
// door answers with (door.Message).
func answerOf(err error) (int, string) {
	return status.Of(err), door.Message(err)
}

// writeError answers {"error": msg} with err's status.
func (s *Server) writeError(w http.ResponseWriter, err error, hint string) int {
	st, msg := answerOf(err)
	if st >= 500 {
		s.log.Warn("HTTP door", "status", st, "err", err)
	}
	if hint != "" && st == status.BadInput {
		msg += hint
	}
	if sw := statusWriterOf(w); sw != nil {
		sw.msg = msg
	}
	writeJSON(w, st, map[string]string{"error": msg})
	return st
}

func writeJSON(w http.ResponseWriter, st int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		st, b = http.StatusInternalServerError, []byte(`{"error":"encode answer"}`)
	}
	writeRaw(w, st, b)
}

func writeRaw(w http.ResponseWriter, st int, b []byte) {
	w.Header().Set("Content-Type", wire.MediaTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(st)
	_, _ = w.Write(b)
}
