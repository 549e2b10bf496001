package mesh

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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

// dropProxy forwards TCP connections to a server; while drop is set it
// throws away what the client writes, as a server that dies before it
// reads does; cut closes the connections it carries.
type dropProxy struct {
	ln     net.Listener
	target string
	drop   atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(in, out) }()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := in.Read(buf)
					if err != nil {
						out.Close()
						return
					}
					if !p.drop.Load() {
						if _, err := out.Write(buf[:n]); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return p
}

func (p *dropProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestBouncerResendsAfterReconnect: an answer written to a server that
// dies before it reads it gets no bounce and no flush confirms it; once
// the worker's connection is back, the answer is sent again.
func TestBouncerResendsAfterReconnect(t *testing.T) {
	s := meshtest.StartServer(t)
	p := newDropProxy(t, strings.TrimPrefix(s.ClientURL(), "nats://"))
	nc, err := nats.Connect("nats://"+p.ln.Addr().String(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
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
	p.drop.Store(true)
	m := nats.NewMsg("door.x")
	m.Data = []byte("answer")
	if err := b.publish(m, time.Time{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // a sweep's flush, unanswered
	p.drop.Store(false)
	p.cut()
	got, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the answer lost with its server: %v", err)
	}
	if string(got.Data) != "answer" {
		t.Errorf("got %q", got.Data)
	}
	meshtest.WaitFor(t, "the answer forgotten once taken", func() bool { return b.pending() == 0 })
}
