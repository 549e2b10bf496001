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
// door waits on a core-NATS inbox: while its connection moves from a dead
// NATS server to another one nothing listens there, and a route that
// breaks between the worker's server and the door's drops what it
// carried; a plain publish is lost, and the worker, which acks the record
// once the answer is sent, would lose it with it (the fault suite's HTTP
// requests never answered while routes were cut). So each inbox answer
// goes out with a reply subject on the worker's own bounce inbox, and the
// door's Client, once it has the answer, sends an empty message there
// (Client.onReply): the answer is taken. When no one listens the server
// answers that subject with a 503 "no responders" status at once, and the
// bouncer sends the answer again, backing off from 25 ms to 1 s; an
// answer that nobody took within bounceAckWait (a route that dropped it,
// a server that died with it) is sent again too, backing off to 4 s.
// Either way until it is taken, its request's deadline passes or
// bounceRetention does. A second copy finds no waiter at the door, which
// still says it took it. A door older than the acks takes its answers
// without saying so: each is sent a few times more, and dropped there.
type bouncer struct {
	nc     *nats.Conn
	prefix string // the bounce inbox; an answer's reply is prefix.<token>
	sub    *nats.Subscription
	limit  *telemetry.LogLimit

	mu     sync.Mutex
	next   uint64
	held   map[string]*bounced // by token
	closed bool
}

// bounceAckWait is how long an answer may go without its door saying it
// took it before it is sent again; it doubles up to bounceAckMax.
const (
	bounceAckWait = time.Second
	bounceAckMax  = 4 * time.Second
)

// bounced is one answer a bouncer keeps.
type bounced struct {
	msg      *nats.Msg
	sent     time.Time     // its last send
	wait     time.Duration // how long after sent it is sent again, untaken
	until    time.Time
	pause    time.Duration // before the next send after a bounce
	resend   bool          // a send is scheduled
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
	b.held[tok] = &bounced{msg: m, sent: time.Now(), wait: bounceAckWait, until: until, pause: 25 * time.Millisecond}
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

// onBounce forgets the answer its door took (a message without a status),
// or schedules the answer a 503 names to be sent again, or gives it up
// once it would go past its time.
func (b *bouncer) onBounce(m *nats.Msg) {
	tok := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	if m.Header.Get("Status") != "503" {
		b.forget(tok) // taken
		return
	}
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
		b.lost(e)
		return
	}
	e.resend, e.pause = true, min(2*pause, time.Second)
	b.mu.Unlock()
	time.AfterFunc(pause, func() { b.resend(tok) })
}

func (b *bouncer) lost(e *bounced) {
	b.limit.Log(context.Background(), slog.LevelWarn, "mesh: answer lost: its door did not take it before the request's deadline", nil,
		"uri", e.msg.Header.Get(HeaderURI), "sends", e.attempts+1)
}

func (b *bouncer) resend(tok string) {
	b.mu.Lock()
	e := b.held[tok]
	if e == nil || b.closed {
		b.mu.Unlock()
		return
	}
	e.resend, e.sent = false, time.Now()
	e.attempts++
	b.mu.Unlock()
	if err := b.nc.PublishMsg(e.msg); err != nil {
		b.forget(tok)
		b.limit.Log(context.Background(), slog.LevelWarn, "mesh: answer lost: send again", err, "uri", e.msg.Header.Get(HeaderURI))
	}
}

// run, every bounceSweep until ctx ends, sends again the answers no door
// took within their wait, and gives up those past their time.
func (b *bouncer) run(ctx context.Context) {
	every(ctx, bounceSweep, func(now time.Time) { b.sweepOnce(now) })
}

func (b *bouncer) sweepOnce(now time.Time) {
	var again []string
	var gone []*bounced
	b.mu.Lock()
	for tok, e := range b.held {
		switch {
		case e.resend:
		case now.After(e.until):
			delete(b.held, tok)
			gone = append(gone, e)
		case now.Sub(e.sent) >= e.wait:
			e.wait = min(2*e.wait, bounceAckMax)
			again = append(again, tok)
		}
	}
	b.mu.Unlock()
	for _, e := range gone {
		b.lost(e)
	}
	for _, tok := range again {
		b.resend(tok)
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
