package mesh_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

func newJS(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("jetstream.New: %v", err)
	}
	return js
}

// startStreams runs an embedded NATS server with cfg's streams and returns
// it and a connection to it.
func startStreams(tb testing.TB, cfg mesh.StreamConfig) (*embedded.Server, *nats.Conn) {
	tb.Helper()
	s := meshtest.StartServer(tb)
	nc := meshtest.Connect(tb, s)
	ensure(tb, nc, cfg)
	return s, nc
}

func ensure(tb testing.TB, nc *nats.Conn, cfg mesh.StreamConfig) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mesh.EnsureStreams(ctx, newJS(tb, nc), cfg); err != nil {
		tb.Fatalf("EnsureStreams: %v", err)
	}
}

func newClient(tb testing.TB, nc *nats.Conn) *mesh.Client {
	tb.Helper()
	c, err := mesh.NewClient(nc, mesh.ClientConfig{})
	if err != nil {
		tb.Fatalf("NewClient: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// newCache is mesh.NewCache(nc, cfg), failing the test on an error.
func newCache(tb testing.TB, nc *nats.Conn, cfg mesh.CacheConfig) *mesh.Cache {
	tb.Helper()
	c, err := mesh.NewCache(nc, cfg)
	if err != nil {
		tb.Fatalf("NewCache: %v", err)
	}
	return c
}

// startService runs the NATS door (Service) with cfg on nc, its Client on
// clientConn, until cleanup.
func startService(tb testing.TB, nc, clientConn *nats.Conn, cfg mesh.ServiceConfig) *mesh.Service {
	tb.Helper()
	svc, err := mesh.NewService(nc, newClient(tb, clientConn), cfg)
	if err != nil {
		tb.Fatalf("NewService: %v", err)
	}
	meshtest.Run(tb, svc.Run)
	return svc
}

// requestResult sends msg to a NATS door and returns its reply, or the
// request's error, or the error the door's reply carries in its headers.
func requestResult(nc *nats.Conn, msg *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	reply, err := nc.RequestMsg(msg, timeout)
	if err != nil {
		return nil, err
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		return nil, fmt.Errorf("error %s: %s", code, reply.Header.Get("Nats-Service-Error"))
	}
	return reply, nil
}

// runWorker starts a Worker and returns a stop function that cancels it and
// waits for Run to return; cleanup calls it too.
func runWorker(tb testing.TB, nc *nats.Conn, cfg mesh.WorkerConfig, p mesh.Predictor) (*mesh.Worker, func()) {
	tb.Helper()
	w, err := mesh.NewWorker(nc, cfg, p)
	if err != nil {
		tb.Fatalf("NewWorker: %v", err)
	}
	return w, meshtest.Run(tb, w.Run)
}

// queueLen reports the messages left in job's work queue.
func queueLen(tb testing.TB, js jetstream.JetStream, job string) uint64 {
	tb.Helper()
	st, err := js.Stream(context.Background(), mesh.StreamName(job))
	if err != nil {
		tb.Fatalf("Stream: %v", err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		tb.Fatalf("Stream info: %v", err)
	}
	return info.State.Msgs
}

// fakePredictor stands in for *wire.Predictor behind mesh.Predictor, our
// own interface: it upper-cases the body and counts calls per body. Bodies
// starting with "bad" fail as bad input (status.ErrBadInput); with "fail" as
// a busy model (status.ErrBusy), which is retried.
// When block is non-nil, Predict waits for it (or ctx) first.
type fakePredictor struct {
	mu    sync.Mutex
	calls map[string]int
	total int
	block chan struct{}
	// delay, when set, is how long each call takes (after being counted).
	delay time.Duration
	// started is signalled (non-blocking) when a call begins.
	started chan struct{}
}

func newFake() *fakePredictor { return &fakePredictor{calls: map[string]int{}} }

func (f *fakePredictor) Predict(ctx context.Context, contentType string, body []byte) ([]byte, error) {
	f.mu.Lock()
	f.calls[string(body)]++
	f.total++
	f.mu.Unlock()
	if f.started != nil {
		select {
		case f.started <- struct{}{}:
		default:
		}
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	switch {
	case strings.HasPrefix(string(body), "bad"):
		return nil, fmt.Errorf("decode %s: bad payload: want JSON instances: %w", contentType, status.ErrBadInput)
	case strings.HasPrefix(string(body), "fail"):
		return nil, fmt.Errorf("run: model busy: %w", status.ErrBusy)
	}
	return []byte(strings.ToUpper(string(body))), nil
}

func (f *fakePredictor) count(body string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[body]
}

func (f *fakePredictor) totalCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}
