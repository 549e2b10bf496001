package mesh

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestBouncerSendsAgainUntilTaken: an inbox answer that reached a
// subscriber which did not say it took it (as one dropped by a broken
// route: the server took it, nobody got it) is sent again; one whose
// door says it took it is sent once and forgotten.
func TestBouncerSendsAgainUntilTaken(t *testing.T) {
	nc := meshtest.Connect(t, meshtest.StartServer(t))
	b, err := newBouncer(nc, telemetry.NewLogLimit(slog.New(slog.DiscardHandler), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	stop := meshtest.Run(t, func(ctx context.Context) error { b.run(ctx); return nil })
	defer stop()
	var silent, taking atomic.Int32
	subscribe(t, nc, "door.silent", func(*nats.Msg) { silent.Add(1) })
	subscribe(t, nc, "door.taking", func(m *nats.Msg) { taking.Add(1); _ = m.Respond(nil) })

	until := time.Now().Add(10 * time.Second)
	for _, subj := range []string{"door.silent", "door.taking"} {
		if err := b.publish(nats.NewMsg(subj), until); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.WaitFor(t, "the untaken answer sent again", func() bool { return silent.Load() >= 2 })
	meshtest.WaitFor(t, "the taken answer forgotten", func() bool { return b.pending() == 1 })
	if n := taking.Load(); n != 1 {
		t.Errorf("the answer its door took was sent %d times, want once", n)
	}
}

func subscribe(t *testing.T, nc *nats.Conn, subj string, f nats.MsgHandler) {
	t.Helper()
	if _, err := nc.Subscribe(subj, f); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}
