package grpcdoor_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// These tests run the door against the real mesh: an embedded NATS
// server on a random port, JetStream work queues, Workers and real
// engines (through their wire.Predictor) on the models of
// infer/testdata, and a real gRPC client over TCP.

// served is one model behind the door: name, version ("" = 1) and the
// file of infer/testdata, or a predictor standing in for its engine
// (info describes it).
type served struct {
	name, version, file string
	predictor           mesh.Predictor
	info                infer.ModelInfo
}

// startDoor runs the mesh for models and the door (cfg.Addr and
// cfg.Models are filled in) on 127.0.0.1:0, and returns its address.
func startDoor(tb testing.TB, cfg grpcdoor.Config, models ...served) string {
	tb.Helper()
	addr, _ := startDoorAndGet(tb, cfg, models...)
	return addr
}

// startDoorAndGet is startDoor that returns the door too.
func startDoorAndGet(tb testing.TB, cfg grpcdoor.Config, models ...served) (string, *grpcdoor.Door) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return startDoorOn(tb, ln, cfg, models...)
}

// startDoorOn is startDoorAndGet serving on ln.
func startDoorOn(tb testing.TB, ln net.Listener, cfg grpcdoor.Config, models ...served) (string, *grpcdoor.Door) {
	tb.Helper()
	infertest.RequireLibrary(tb)
	ms := make([]doortest.Served, len(models))
	for i, m := range models {
		ms[i] = doortest.Served{Name: m.name, Version: m.version, File: m.file, Predictor: m.predictor, Info: m.info}
	}
	m := doortest.StartMesh(tb, &cfg.Config, ms...)
	cfg.Addr = ln.Addr().String()
	door, err := grpcdoor.New(m.Client, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- door.Serve(dctx, ln) }()
	tb.Cleanup(func() {
		dcancel()
		if err := <-served; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return cfg.Addr, door
}

// dial connects a client to addr, plaintext unless creds are given.
func dial(tb testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	tb.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// inferClient is the OIP service client of dial(tb, addr, nil).
func inferClient(tb testing.TB, addr string) kservepb.GRPCInferenceServiceClient {
	return kservepb.NewGRPCInferenceServiceClient(dial(tb, addr, nil))
}

// callCtx bounds one call of a test.
func callCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
