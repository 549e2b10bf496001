package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestRouterPinsACallersMessage: when an attempt times out waiting for its
// PubAck, the partition may have stored the message. A message answered
// straight to a NATS caller (ReplyCaller) is then only tried again on that
// partition, never stored as a second copy elsewhere (whose worker would
// answer the caller twice); so is a coalesced batch of callers'
// requests; any other message (a batch of a door's inbox requests too)
// moves on to a partition that answers. The partition that times out here is a real subscriber on
// its subject that swallows the publish, as a stream whose leader died
// after storing it would look to the publisher.
func TestRouterPinsACallersMessage(t *testing.T) {
	srv := meshtest.StartServer(t)
	nc := meshtest.Connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PIN_B", Subjects: []string{"pin.b"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	swallowed := make(chan string, 64)
	sub, err := nc.Subscribe("pin.a", func(m *nats.Msg) { swallowed <- m.Header.Get(HeaderMsgID) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	subjects := []string{"pin.a", "pin.b"}

	for _, tc := range []struct {
		name   string
		reply  Reply
		batch  map[string]string // the headers of a batch work message
		stored bool              // on pin.b
	}{
		{"inbox", Reply{ReplyInbox, "_INBOX_cs.x.1"}, nil, true},
		{"durable", Reply{ReplyDurable, "serving.j.results.x"}, nil, true},
		{"caller", Reply{ReplyCaller, "_INBOX_app.caller.1"}, nil, false},
		{"inbox batch", Reply{}, map[string]string{HeaderBatch: "2"}, true},
		{"callers batch", Reply{}, map[string]string{HeaderBatch: "2", HeaderBatchCallers: "true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter(100 * time.Millisecond)
			m := nats.NewMsg("")
			m.Header.Set(HeaderMsgID, "pin-"+tc.name)
			tc.reply.set(m.Header)
			for k, v := range tc.batch {
				m.Header.Set(k, v)
			}
			pctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			st, err := r.publish(pctx, nc, js, subjects, 0, m)
			switch {
			case tc.stored && (err != nil || st.partition != 1):
				t.Fatalf("got partition %d, %v; want it stored on pin.b after pin.a timed out", st.partition, err)
			case !tc.stored && !errors.Is(err, ErrUnavailable):
				t.Fatalf("got partition %d, %v; want ErrUnavailable, never a second copy on pin.b", st.partition, err)
			}
			n := 0
			for len(swallowed) > 0 {
				if id := <-swallowed; id != m.Header.Get(HeaderMsgID) {
					t.Fatalf("pin.a got %q, want only %q", id, m.Header.Get(HeaderMsgID))
				}
				n++
			}
			if !tc.stored && n < 2 {
				t.Errorf("pin.a was asked %d times, want it asked again until the deadline", n)
			}
		})
	}
	info, err := js.Stream(ctx, "PIN_B")
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != 3 {
		t.Errorf("pin.b holds %d messages, want 3 (inbox, durable and the inbox batch, not the callers')", got)
	}
}

// TestBouncer sends answers to three inboxes on a real server: one that
// listens, one that starts listening 300 ms later (its answer is sent
// again until taken), and one that never listens (given up at its
// deadline). The bouncer keeps none of them in the end.
func TestBouncer(t *testing.T) {
	s := meshtest.StartServer(t)
	nc := meshtest.Connect(t, s)
	b, err := newBouncer(nc, telemetry.NewLogLimit(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	meshtest.Run(t, func(ctx context.Context) error { b.run(ctx); return nil })

	listener := meshtest.Connect(t, s)
	now, err := listener.SubscribeSync("door.now")
	if err != nil {
		t.Fatal(err)
	}
	if err := listener.Flush(); err != nil {
		t.Fatal(err)
	}
	send := func(subject string, until time.Time) {
		m := nats.NewMsg(subject)
		m.Data = []byte(subject)
		if err := b.publish(m, until); err != nil {
			t.Fatal(err)
		}
	}
	send("door.now", time.Time{})
	send("door.late", time.Time{})
	send("door.never", time.Now().Add(time.Second))
	time.Sleep(300 * time.Millisecond)
	late, err := listener.SubscribeSync("door.late")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []*nats.Subscription{now, late} {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: %v", sub.Subject, err)
		}
		if string(m.Data) != sub.Subject {
			t.Errorf("%s: got %q", sub.Subject, m.Data)
		}
		if extra, err := sub.NextMsg(300 * time.Millisecond); err == nil {
			t.Errorf("%s: got a second copy %q once taken", sub.Subject, extra.Data)
		}
	}
	meshtest.WaitFor(t, "every answer taken or given up", func() bool { return b.pending() == 0 })
}

// TestBouncerResendsAfterReconnect: an answer written to a server that
// dies before it reads it gets no bounce and no flush confirms it; once
// the worker's connection is back, the answer is sent again.
func TestBouncerResendsAfterReconnect(t *testing.T) {
	s := meshtest.StartServer(t)
	p := meshtest.NewProxy(t, s.ClientURL()[len("nats://"):])
	nc, err := nats.Connect("nats://"+p.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, err := newBouncer(nc, telemetry.NewLogLimit(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	meshtest.Run(t, func(ctx context.Context) error { b.run(ctx); return nil })
	sub, err := meshtest.Connect(t, s).SubscribeSync("door.x")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p.Drop(true)
	m := nats.NewMsg("door.x")
	m.Data = []byte("answer")
	if err := b.publish(m, time.Time{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // a sweep's flush, unanswered
	p.Drop(false)
	p.Break()
	got, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the answer lost with its server: %v", err)
	}
	if string(got.Data) != "answer" {
		t.Errorf("got %q", got.Data)
	}
	meshtest.WaitFor(t, "the answer forgotten once taken", func() bool { return b.pending() == 0 })
}
