package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

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
