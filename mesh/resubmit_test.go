package mesh_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest/netfault"
)

// TestSubmitStoresAgainWhenItsAnswerIsLost loses a Submit's answer: the
// Client's connection (through a fault proxy) stops passing bytes while a
// worker runs its request, the server takes the answer for it, the worker
// stops (its bouncer, which would send the answer again, with it), and
// the connection breaks. The request is acked. Once the Client is connected again the Submit
// stores its request again and gets the second run's answer, where
// before it waited out its deadline (the fault suite's HTTP requests
// "never answered" at partitions).
func TestSubmitStoresAgainWhenItsAnswerIsLost(t *testing.T) {
	fake := newFake()
	fake.block, fake.started = make(chan struct{}), make(chan struct{}, 1)
	sc := mesh.StreamConfig{Job: "lost", Storage: jetstream.MemoryStorage}
	s, _ := startStreams(t, sc)
	p := netfault.ListenForTest(t, strings.TrimPrefix(s.ClientURL(), "nats://"))
	cnc, err := nats.Connect("nats://"+p.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	c := newClient(t, cnc)
	w, stopWorker := runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc, ShutdownGrace: 100 * time.Millisecond}, fake)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	type outcome struct {
		res mesh.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Submit(ctx, "lost", mesh.Request{Body: []byte("x")})
		done <- outcome{res, err}
	}()
	<-fake.started
	// The server takes the answer for the Client's connection, which
	// holds it (a network that stopped passing packets), and then the
	// connection breaks: the answer is gone, and no "no responders" told
	// the worker to send it again.
	p.Blackhole()
	close(fake.block)
	meshtest.WaitFor(t, "the worker's answer, taken by the server", func() bool { return w.Stats().Processed == 1 })
	time.Sleep(100 * time.Millisecond) // the server writes it to the held connection
	stopWorker()                       // and its bouncer, which would send it again, with it
	other := newFake()
	runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc}, other)
	p.Cut()
	p.Heal()
	got := <-done
	if got.err != nil || string(got.res.Body) != "X" {
		t.Fatalf("Submit: got %q, %v; want X", got.res.Body, got.err)
	}
	if n := other.count("x"); n != 1 {
		t.Errorf("the request ran %d times on the second worker, want once more after the answer was lost", n)
	}
}
