package mesh_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestKeepReachableLeavesAPartitionedServer cuts a stream's leader off
// the other two servers (its routes blackholed; its clients' connections
// stay healthy): a connection that KeepReachable watches moves to a
// server of the majority and reaches the stream again, while one left
// alone stays on the cut-off server. The leader is the hard case: it
// still answers for the stream (and, when it led the meta group, for the
// account, about 20 s), with its replicas out of touch.
func TestKeepReachableLeavesAPartitionedServer(t *testing.T) {
	cl := meshtest.StartClusterWith(t, meshtest.ClusterConfig{RoutePing: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := newJS(t, cl.Connect(t))
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "REACH", Subjects: []string{"reach"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream info: %v", err)
	}
	leader := cl.Index(info.Cluster.Leader)
	watched, alone := cl.ConnectTo(t, leader), cl.ConnectTo(t, leader)
	cut := watched.ConnectedServerName()
	stop := meshtest.Run(t, func(ctx context.Context) error {
		mesh.KeepReachable(ctx, watched, "REACH", slog.New(slog.DiscardHandler))
		return nil
	})
	defer stop()
	heal := cl.Isolate(leader)
	defer heal()
	start := time.Now()
	wjs := newJS(t, watched)
	meshtest.WaitFor(t, "the watched connection on a majority server, reaching the stream", func() bool {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := wjs.Stream(ctx, "REACH")
		return err == nil && watched.IsConnected() && watched.ConnectedServerName() != cut
	})
	t.Logf("moved from %s to %s %v after the partition", cut, watched.ConnectedServerName(), time.Since(start).Round(time.Millisecond))
	if got := alone.ConnectedServerName(); got != cut {
		t.Fatalf("the connection left alone moved to %s by itself: the test shows nothing", got)
	}
}
