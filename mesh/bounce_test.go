package mesh_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// gatedDialer dials at once the first time, then waits for open: a door
// whose server died stays away until the test lets it back.
type gatedDialer struct {
	open  chan struct{}
	first atomic.Bool
}

func (d *gatedDialer) Dial(network, address string) (net.Conn, error) {
	if d.first.Swap(true) {
		<-d.open
	}
	return net.Dial(network, address)
}

// TestInboxAnswerWhileDoorReconnects kills the NATS server a door (its
// Client) is on while a worker on another server runs its request, and
// lets the door reconnect only after the worker has answered: the answer
// went out while nothing listened on the door's inbox, and must still
// reach it (the worker's bouncer sends it again), not be lost with the
// record acked.
func TestInboxAnswerWhileDoorReconnects(t *testing.T) {
	cl := meshtest.StartCluster(t, 3)
	sc := mesh.StreamConfig{Job: "bounce", Replicas: 3}
	admin := cl.Connect(t)
	ensure(t, admin, sc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var leader string
	meshtest.WaitFor(t, "stream leader", func() bool {
		leader = streamLeaders(ctx, newJS(t, admin), sc.Job, 1)[0]
		return leader != ""
	})
	li := cl.Index(leader)
	door := (li + 1) % 3

	fake := newFake()
	fake.block, fake.started = make(chan struct{}), make(chan struct{}, 1)
	runWorker(t, cl.ConnectTo(t, li), mesh.WorkerConfig{Stream: sc}, fake)
	dial := &gatedDialer{open: make(chan struct{})}
	c := newClient(t, cl.ConnectTo(t, door, nats.SetCustomDialer(dial)))

	type outcome struct {
		res mesh.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Submit(ctx, sc.Job, mesh.Request{URI: "u", Body: []byte("while away")})
		done <- outcome{res, err}
	}()
	<-fake.started
	cl.Kill(door)
	close(fake.block) // the worker answers while the door has no server
	time.Sleep(500 * time.Millisecond)
	close(dial.open)
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("Submit: %v", o.err)
		}
		if got, want := string(o.res.Body), "WHILE AWAY"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the answer sent while the door reconnected never came")
	}
	if got, want := fake.count("while away"), 1; got != want {
		t.Errorf("got %d runs, want %d (the answer, not the record, is sent again)", got, want)
	}
}

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
