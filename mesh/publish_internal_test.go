package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestRouterPinsACallersMessage: when an attempt times out waiting for its
// PubAck, the partition may have stored the message. A message answered
// straight to a NATS caller (ReplyCaller) is then only tried again on that
// partition, never stored as a second copy elsewhere (whose worker would
// answer the caller twice); any other message moves on to a partition
// that answers. The partition that times out here is a real subscriber on
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
		stored bool // on pin.b
	}{
		{"inbox", Reply{ReplyInbox, "_INBOX_cs.x.1"}, true},
		{"durable", Reply{ReplyDurable, "serving.j.results.x"}, true},
		{"caller", Reply{ReplyCaller, "_INBOX_app.caller.1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter(100 * time.Millisecond)
			m := nats.NewMsg("")
			m.Header.Set(HeaderMsgID, "pin-"+tc.name)
			tc.reply.set(m.Header)
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
	if got := info.CachedInfo().State.Msgs; got != 2 {
		t.Errorf("pin.b holds %d messages, want 2 (inbox and durable, not the caller's)", got)
	}
}
