package respdoor_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// These tests run the door on an embedded NATS server with workers on
// the real ONNX Runtime (infer/testdata models), and talk to it with real
// Redis clients: go-redis, redis-cli, redis-py. No redis-server runs,
// except where a test compares with the Redis door.

// started is a running door: its address, a go-redis client to it and the
// mesh behind it.
type started struct {
	addr string
	rdb  *goredis.Client
	mesh *doortest.Mesh
	stop func()
}

// startDoor runs the mesh for models and a door with cfg (Addr, Jobs and
// Streams filled in) on a loopback port, and a go-redis client to it
// (with opt's password and TLS, when set).
func startDoor(tb testing.TB, cfg respdoor.Config, opt *goredis.Options, models ...doortest.Served) started {
	tb.Helper()
	m := startDoorMesh(tb, models...)
	for _, mm := range m.Models {
		cfg.Jobs = append(cfg.Jobs, mm.Job)
	}
	return startOn(tb, m, cfg, opt)
}

// startDoorMesh runs the mesh of models.
func startDoorMesh(tb testing.TB, models ...doortest.Served) *doortest.Mesh {
	tb.Helper()
	var dc door.Config
	return doortest.StartMesh(tb, &dc, models...)
}

// startOn runs a door with cfg for the jobs of m.
func startOn(tb testing.TB, m *doortest.Mesh, cfg respdoor.Config, opt *goredis.Options) started {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Addr = ln.Addr().String()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Streams.Storage = jetstream.MemoryStorage
	d, err := respdoor.New(m.Client, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	stop := meshtest.Run(tb, func(ctx context.Context) error { return d.Serve(ctx, ln) })
	if opt == nil {
		opt = &goredis.Options{}
	}
	opt.Addr = cfg.Addr
	opt.MaxRetries = -1
	rdb := goredis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	meshtest.WaitFor(tb, "the door's PING", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err() == nil
	})
	return started{addr: cfg.Addr, rdb: rdb, mesh: m, stop: stop}
}

// add is the served model of most tests: add_f32, x [-1,4] float32,
// y = 2x+1, as job "add".
var add = doortest.Served{Name: "add", File: "add_f32"}

// redisDoors runs a Redis door for each job of s on a real redis-server
// on the same mesh, and returns the server's address: the reference the
// RESP door's values are compared with.
func (s started) redisDoors(tb testing.TB) string {
	tb.Helper()
	addr, _ := redistest.Start(tb)
	for _, m := range s.mesh.Models {
		d, err := redisdoor.New(redisdoor.Config{Addr: addr, Job: m.Job}, s.mesh.Client, nil)
		if err != nil {
			tb.Fatal(err)
		}
		meshtest.Run(tb, d.Run)
	}
	return addr
}
