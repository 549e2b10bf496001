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
// without a bounce; those not shown taken when the worker's own
// connection moves to another server (written to a server that died
// before it read them) are sent again once it has.
type bouncer struct {
	nc     *nats.Conn
	prefix string // the bounce inbox; an answer's reply is prefix.<token>
	sub    *nats.Subscription
	limit  *telemetry.LogLimit

	mu     sync.Mutex
	next   uint64
	held   map[string]*bounced // by token
	sweep  uint64              // sweeps so far
	closed bool
	// reconnects is the connection's reconnect count the last sweep saw.
	reconnects uint64
}

// bounced is one answer a bouncer keeps.
type bounced struct {
	msg *nats.Msg
	// conn is the connection's reconnect count when it was last sent;
	// taken the sweep whose flush on that same connection showed the
	// server read it (0: not yet).
	conn, taken uint64
	until       time.Time
	pause       time.Duration // before the next send after a bounce
	resend      bool          // a send is scheduled
	attempts    int
}

// newBouncer subscribes the bounce inbox on nc; the same connection must
// send the answers (the server bounces to its publisher only).
func newBouncer(nc *nats.Conn, limit *telemetry.LogLimit) (*bouncer, error) {
	b := &bouncer{nc: nc, prefix: nc.NewInbox(), limit: limit, held: map[string]*bounced{}, reconnects: nc.Stats().Reconnects}
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
	// The reconnect count the last sweep saw, not the connection's own
	// (a lock of it per answer): an answer sent just after a reconnect
	// the sweep has not seen yet is sent once more, which its door drops.
	b.held[tok] = &bounced{msg: m, conn: b.reconnects, until: until, pause: 25 * time.Millisecond}
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
			"uri", e.msg.Header.Get(HeaderURI), "sends", e.attempts+1)
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
	e.resend, e.taken, e.conn = false, 0, b.reconnects
	e.attempts++
	b.mu.Unlock()
	if err := b.nc.PublishMsg(e.msg); err != nil {
		b.forget(tok)
		b.limit.Log(context.Background(), slog.LevelWarn, "mesh: answer lost: send again", err, "uri", e.msg.Header.Get(HeaderURI))
	}
}

// run, every bounceSweep until ctx ends, forgets the answers the server
// took (shown by a flush on the connection they were sent on, a sweep
// ago, so that a bounce read before the flush's PONG was handled), and
// sends again those sent on a connection that is gone and never shown
// taken: they may have died with the server they were written to.
func (b *bouncer) run(ctx context.Context) {
	every(ctx, bounceSweep, func(time.Time) { b.sweepOnce() })
}

func (b *bouncer) sweepOnce() {
	conn := b.nc.Stats().Reconnects
	b.mu.Lock()
	b.sweep++
	var lost, sent []string
	for tok, e := range b.held {
		switch {
		case e.resend:
		case e.taken != 0 && e.taken < b.sweep:
			delete(b.held, tok)
		case e.taken == 0 && e.conn != conn && conn != b.reconnects:
			lost = append(lost, tok)
		case e.taken == 0 && e.conn == conn:
			sent = append(sent, tok)
		}
	}
	b.reconnects = conn
	sweep := b.sweep
	b.mu.Unlock()
	for _, tok := range lost {
		b.resend(tok)
	}
	if len(sent) > 0 && b.nc.FlushTimeout(time.Second) == nil && b.nc.Stats().Reconnects == conn {
		b.taken(sent, conn, sweep)
	}
}

// taken marks the answers toks, sent on connection conn, as taken by the
// server at sweep, unless they were sent again since.
func (b *bouncer) taken(toks []string, conn, sweep uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, tok := range toks {
		if e := b.held[tok]; e != nil && !e.resend && e.conn == conn && e.taken == 0 {
			e.taken = sweep
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
