// Package meshtest helps tests that need the real mesh, as
// net/http/httptest helps HTTP tests: an embedded NATS server with
// JetStream on a random port, connections to it, and long-lived parts run
// in the background until the test ends. It is for _test.go files only.
package meshtest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// StartServer runs an embedded NATS server with JetStream on a random port
// for one test, its store in a temporary directory; it shuts down at
// cleanup.
func StartServer(tb testing.TB) *embedded.Server {
	tb.Helper()
	return StartServerWith(tb, "")
}

// StartServerWith is StartServer with conf, the text of a nats-server
// configuration file, as its embedded.Config.ConfigFile; "" is none.
func StartServerWith(tb testing.TB, conf string) *embedded.Server {
	tb.Helper()
	cfg := embedded.Config{Port: embedded.RandomPort, StoreDir: tb.TempDir()}
	if conf != "" {
		cfg.ConfigFile = filepath.Join(tb.TempDir(), "nats.conf")
		if err := os.WriteFile(cfg.ConfigFile, []byte(conf), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	s, err := embedded.Start(cfg)
	if err != nil {
		tb.Fatalf("embedded.Start: %v", err)
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// Connect opens a TCP connection to s, closed at cleanup.
func Connect(tb testing.TB, s *embedded.Server) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		tb.Fatalf("nats.Connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Run runs fn(ctx) on a goroutine, as cmd runs a part's Run. The returned
// stop function (also run at cleanup) cancels ctx, waits for fn and fails
// the test when fn returned an error; it may be called more than once.
func Run(tb testing.TB, fn func(context.Context) error) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("Run: %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// WaitFor is infertest.WaitFor: it polls cond every 10ms until it holds,
// and fails the test when it still does not after 30s.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	infertest.WaitFor(tb, what, cond)
}
