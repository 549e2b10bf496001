package mesh_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestLocalAnswers: a Client made with Local gets the answers of a worker
// of its process in memory (local.go): right, each to its own Submit,
// a bad record's error too, and none of them crosses the NATS server,
// which a spy on every inbox sees; without Local every answer does.
func TestLocalAnswers(t *testing.T) {
	for _, local := range []bool{true, false} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			sc := mesh.StreamConfig{Job: "local"}
			s, nc := startStreams(t, sc)
			runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc}, newFake())
			var crossed atomic.Int32
			spy := meshtest.Connect(t, s)
			if _, err := spy.Subscribe("_INBOX.>", func(m *nats.Msg) {
				if m.Header.Get(mesh.HeaderStatus) != "" {
					crossed.Add(1)
				}
			}); err != nil {
				t.Fatal(err)
			}
			if err := spy.Flush(); err != nil {
				t.Fatal(err)
			}
			c, err := mesh.NewClient(meshtest.Connect(t, s), mesh.ClientConfig{Local: local})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const n = 20
			errs := make(chan error, n)
			for i := range n {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					body := fmt.Sprintf("rec-%d", i)
					res, err := c.Submit(ctx, "local", mesh.Request{Body: []byte(body)})
					if err == nil && string(res.Body) != fmt.Sprintf("REC-%d", i) {
						err = fmt.Errorf("%s: got %q", body, res.Body)
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := c.Submit(ctx, "local", mesh.Request{Body: []byte("bad")}); err == nil {
				t.Error("a bad record: got no error, want its 400")
			}
			_ = nc.Flush()
			_ = spy.Flush()
			want := int32(0)
			if !local {
				want = n + 1
			}
			meshtest.WaitFor(t, "the spy to count every answer", func() bool { return crossed.Load() >= want })
			if got := crossed.Load(); got != want {
				t.Errorf("answers through the NATS server: got %d, want %d", got, want)
			}
		})
	}
}
