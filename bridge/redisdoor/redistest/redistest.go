// Package redistest helps tests that need a real redis-server, as
// net/http/httptest helps HTTP tests: a server on a free loopback port,
// without persistence, killed when the test ends. When redis-server is not
// installed the test fails in CI (CLUSTER_SERVING_REQUIRE_DEPS=1) and
// skips elsewhere (see infertest.Missing). It is for _test.go files only.
package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// Start runs a redis-server on a free port for one test and returns its
// address and a client to it, closed at cleanup; it returns once the
// server answers PING.
func Start(tb testing.TB) (addr string, rdb *goredis.Client) {
	tb.Helper()
	return StartWith(tb, &goredis.Options{})
}

// StartWith is Start with more redis-server args (such as "--requirepass",
// pw) and the options of the returned client (such as its Password); it
// sets opt.Addr.
func StartWith(tb testing.TB, opt *goredis.Options, args ...string) (addr string, rdb *goredis.Client) {
	tb.Helper()
	port := infertest.FreePort(tb)
	RunServer(tb, append([]string{"--port", fmt.Sprint(port)}, args...)...)
	return connect(tb, port, opt)
}

// TLS names the PEM files of a TLS redis-server: its certificate and key,
// and the CA that verifies client certificates. With AuthClients the
// server requires one (--tls-auth-clients yes), else it asks for none.
type TLS struct {
	Cert, Key, CA string
	AuthClients   bool
}

// StartTLS runs a TLS-only redis-server (no plain port) with s's files and
// args, and returns its address and a client made from opt, whose
// TLSConfig must trust s.CA (and present a client certificate when
// s.AuthClients); it sets opt.Addr and returns once the client's PING
// succeeds.
func StartTLS(tb testing.TB, s TLS, opt *goredis.Options, args ...string) (addr string, rdb *goredis.Client) {
	tb.Helper()
	port := infertest.FreePort(tb)
	auth := "no"
	if s.AuthClients {
		auth = "yes"
	}
	RunServer(tb, append([]string{"--port", "0", "--tls-port", fmt.Sprint(port),
		"--tls-cert-file", s.Cert, "--tls-key-file", s.Key, "--tls-ca-cert-file", s.CA,
		"--tls-auth-clients", auth}, args...)...)
	return connect(tb, port, opt)
}

// connect makes a client from opt to the server on port, closed at
// cleanup, and waits until it answers PING.
func connect(tb testing.TB, port int, opt *goredis.Options) (string, *goredis.Client) {
	tb.Helper()
	opt.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	rdb := goredis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	meshtest.WaitFor(tb, "redis-server", func() bool { return rdb.Ping(context.Background()).Err() == nil })
	return opt.Addr, rdb
}

// RunServer starts redis-server with args (which should name its ports)
// bound to 127.0.0.1, without persistence, and kills it at cleanup.
func RunServer(tb testing.TB, args ...string) {
	tb.Helper()
	args = append(args, "--save", "", "--appendonly", "no")
	if cmd := run(tb, args...); cmd != nil {
		tb.Cleanup(cmd.kill)
	}
}

// proc is a running redis-server.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// kill ends the server with SIGKILL and waits for it.
func (p *proc) kill() { _ = p.cmd.Process.Kill(); <-p.done }

// run starts redis-server bound to 127.0.0.1 with args; nil when
// redis-server is missing and the test was skipped.
func run(tb testing.TB, args ...string) *proc {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		infertest.Missing(tb, "redis-server not found: apt-get install redis-server")
		return nil
	}
	cmd := exec.Command(bin, append(args, "--bind", "127.0.0.1")...)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

// Server is a redis-server that keeps its data in an append-only file
// (fsync always), so a test can kill it (SIGKILL) and start it again on
// the same port with its data, as a Redis restart does.
type Server struct {
	tb   testing.TB
	port int
	dir  string
	// Addr is the server's host:port.
	Addr string

	mu sync.Mutex
	p  *proc
}

// StartPersistent starts a Server for one test and returns it and a
// client to it; cleanup kills it.
func StartPersistent(tb testing.TB) (*Server, *goredis.Client) {
	tb.Helper()
	s := &Server{tb: tb, port: infertest.FreePort(tb), dir: tb.TempDir()}
	s.Addr = fmt.Sprintf("127.0.0.1:%d", s.port)
	rdb := goredis.NewClient(&goredis.Options{Addr: s.Addr})
	tb.Cleanup(func() { _ = rdb.Close(); s.Kill() })
	s.Start()
	meshtest.WaitFor(tb, "redis-server", func() bool { return rdb.Ping(context.Background()).Err() == nil })
	return s, rdb
}

// Start starts the server again after Kill; it returns before the server
// answers.
func (s *Server) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		s.p = run(s.tb, "--port", fmt.Sprint(s.port), "--dir", s.dir, "--save", "",
			"--appendonly", "yes", "--appendfsync", "always")
	}
}

// Kill ends the server with SIGKILL, as a crash does; it is a no-op when
// it is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.kill()
		s.p = nil
	}
}
