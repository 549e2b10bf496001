package mesh_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// echoPredictor is the cheapest Predictor: it returns the body.
type echoPredictor struct{}

func (echoPredictor) Predict(_ context.Context, _ string, body []byte) ([]byte, error) {
	return body, nil
}

// BenchmarkSubmit measures one request's round trip through the work queue
// and a Worker (publish, PubAck, pull, Predict, reply, ack). Compare its
// ns/op with BenchmarkCoreRequest; the target is within about 3x.
func BenchmarkSubmit(b *testing.B) {
	for _, tc := range []struct {
		name    string
		storage jetstream.StorageType
	}{
		{"file", jetstream.FileStorage},
		{"memory", jetstream.MemoryStorage},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := meshtest.StartServer(b)
			nc := meshtest.Connect(b, s)
			sc := mesh.StreamConfig{Job: "bench", Storage: tc.storage}
			ensure(b, nc, sc)
			runWorker(b, meshtest.Connect(b, s), mesh.WorkerConfig{Stream: sc}, echoPredictor{})
			c := newClient(b, nc)
			body := make([]byte, 256)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for b.Loop() {
				if _, err := c.Submit(ctx, "bench", mesh.Request{Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSubmitParallel is BenchmarkSubmit with concurrent callers.
func BenchmarkSubmitParallel(b *testing.B) {
	s := meshtest.StartServer(b)
	nc := meshtest.Connect(b, s)
	sc := mesh.StreamConfig{Job: "bench"}
	ensure(b, nc, sc)
	runWorker(b, meshtest.Connect(b, s), mesh.WorkerConfig{Stream: sc}, echoPredictor{})
	c := newClient(b, nc)
	body := make([]byte, 256)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for pb.Next() {
			if _, err := c.Submit(ctx, "bench", mesh.Request{Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCoreRequest is the baseline: a trivial core NATS responder on
// its own connection, the least any NATS round trip costs.
func BenchmarkCoreRequest(b *testing.B) {
	s := meshtest.StartServer(b)
	nc := meshtest.Connect(b, s)
	responder := meshtest.Connect(b, s)
	sub, err := responder.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := responder.Flush(); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 256)
	b.ResetTimer()
	for b.Loop() {
		if _, err := nc.Request("bench.echo", body, 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
