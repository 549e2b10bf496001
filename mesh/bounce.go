package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// bounceRetention bounds how long an answer whose door's inbox does not
// listen is sent again: a door whose connection moves to another NATS
// server listens again within a few seconds; one that is gone never does.
const bounceRetention = 15 * time.Second

// bounceSweep is how often a bouncer forgets the answers the server has
// taken without a bounce.
const bounceSweep = 250 * time.Millisecond

// bouncer sends again the answers a door's inbox missed (ReplyInbox). A
// door waits on a core-NATS inbox, and while its connection moves from a
// dead NATS server to another one nothing listens there: a plain publish
// is dropped, and the worker, which acks the record once the answer is
// sent, would lose it. So each inbox answer goes out with a reply subject
// on the worker's own bounce inbox. When no one listens the server
// answers that subject with a 503 "no responders" status, and the bouncer
// sends the answer again, backing off from 25 ms to 1 s, until it is
// taken, its request's deadline passes or bounceRetention does. When
// someone listens nothing comes back: no extra message per answer. An
// answer is kept until a flush (a PING) shows the server has taken it
// without a bounce.
type bouncer struct {
	nc     *nats.Conn
	prefix string // the bounce inbox; an answer's reply is prefix.<token>
	sub    *nats.Subscription
	limit  *telemetry.LogLimit

	mu      sync.Mutex
	next    uint64
	held    map[string]*bounced // by token
	gen     uint64              // the sweep generation answers are sent in
	flushed uint64              // answers sent in a generation below it reached the server
	settled uint64              // ... and below it, their bounces were handled too
	closed  bool
}

// bounced is one answer a bouncer keeps.
type bounced struct {
	msg      *nats.Msg
	gen      uint64
	until    time.Time
	pause    time.Duration // before the next send after a bounce
	resend   bool          // a send is scheduled
	uri      string
	attempts int
}

// newBouncer subscribes the bounce inbox on nc; the same connection must
// send the answers (the server bounces to its publisher only).
func newBouncer(nc *nats.Conn, limit *telemetry.LogLimit) (*bouncer, error) {
	b := &bouncer{nc: nc, prefix: nc.NewInbox(), limit: limit, held: map[string]*bounced{}}
	sub, err := nc.Subscribe(b.prefix+".*", b.onBounce)
	if err != nil {
		return nil, fmt.Errorf("mesh: subscribe bounce inbox: %w", err)
	}
	_ = sub.SetPendingLimits(-1, 64<<20)
	b.sub = sub
	return b, nil
}

// publish sends m, an answer for a door's inbox, and keeps it until the
// server took it. until is its request's deadline (zero: none); when
// it is past bounceRetention, that bounds it.
func (b *bouncer) publish(m *nats.Msg, until time.Time) error {
	limit := time.Now().Add(bounceRetention)
	if until.IsZero() || until.After(limit) {
		until = limit
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return b.nc.PublishMsg(m)
	}
	b.next++
	tok := strconv.FormatUint(b.next, 36)
	m.Reply = b.prefix + "." + tok
	b.held[tok] = &bounced{msg: m, gen: b.gen, until: until, pause: 25 * time.Millisecond, uri: m.Header.Get(HeaderURI)}
	b.mu.Unlock()
	if err := b.nc.PublishMsg(m); err != nil {
		b.forget(tok)
		return err
	}
	return nil
}

func (b *bouncer) forget(tok string) {
	b.mu.Lock()
	delete(b.held, tok)
	b.mu.Unlock()
}

// onBounce schedules the answer a 503 names to be sent again, or gives it
// up once it would go past its time.
func (b *bouncer) onBounce(m *nats.Msg) {
	if m.Header.Get("Status") != "503" {
		return
	}
	tok := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	b.mu.Lock()
	e := b.held[tok]
	if e == nil || e.resend || b.closed {
		b.mu.Unlock()
		return
	}
	pause := e.pause
	if time.Now().Add(pause).After(e.until) {
		delete(b.held, tok)
		b.mu.Unlock()
		b.limit.Log(context.Background(), slog.LevelWarn, "mesh: answer lost: its door's inbox did not listen until the request's deadline", nil,
			"uri", e.uri, "sends", e.attempts+1)
		return
	}
	e.resend, e.pause = true, min(2*pause, time.Second)
	b.mu.Unlock()
	time.AfterFunc(pause, func() { b.resend(tok) })
}

func (b *bouncer) resend(tok string) {
	b.mu.Lock()
	e := b.held[tok]
	if e == nil || b.closed {
		b.mu.Unlock()
		return
	}
	e.resend, e.gen = false, b.gen
	e.attempts++
	b.mu.Unlock()
	if err := b.nc.PublishMsg(e.msg); err != nil {
		b.forget(tok)
		b.limit.Log(context.Background(), slog.LevelWarn, "mesh: answer lost: send again", err, "uri", e.uri)
	}
}

// run forgets, every bounceSweep until ctx ends, the answers the server
// took: those sent before a flush that came back, once the bounces read
// before that flush's PONG had a sweep's time to be handled.
func (b *bouncer) run(ctx context.Context) {
	t := time.NewTicker(bounceSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		for tok, e := range b.held {
			if !e.resend && e.gen < b.settled {
				delete(b.held, tok)
			}
		}
		b.settled = b.flushed
		mark := b.gen
		b.gen++
		n := len(b.held)
		b.mu.Unlock()
		if n == 0 {
			continue
		}
		if err := b.nc.FlushTimeout(time.Second); err == nil {
			b.mu.Lock()
			b.flushed = mark + 1
			b.mu.Unlock()
		}
	}
}

// close stops sending again and unsubscribes.
func (b *bouncer) close() {
	b.mu.Lock()
	b.closed = true
	b.held = map[string]*bounced{}
	b.mu.Unlock()
	_ = b.sub.Unsubscribe()
}

// pending reports how many answers the bouncer keeps.
func (b *bouncer) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}
