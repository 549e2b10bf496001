package respdoor

import (
	"context"
	"crypto/tls"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/match"
	"github.com/tidwall/redcon"
)

// SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE and PUNSUBSCRIBE, RESP2, with
// Redis's answers, for the keyspace notifications of notify.go.
//
// redcon.PubSub does not fit this door, so the door keeps its own: it
// answers a subscription count per kind where Redis counts channels and
// patterns together, answers nothing to UNSUBSCRIBE of a channel not
// subscribed (the client waits forever), counts a channel subscribed
// twice twice, never leaves subscribed mode, and its Publish writes to
// each client in turn under a lock, so one client that does not read
// holds every publisher (the bucket's watch) up to the write timeout.
// Neither does it know this door's AUTH, its connection counting or its
// shutdown: a detached connection leaves redcon, whose Close no longer
// closes it.
//
// Here, as there, the first SUBSCRIBE detaches the connection from
// redcon (its read loop would otherwise hold the idle timeout over a
// waiting client and own its writes). redcon ends that loop once the
// pipeline holding the SUBSCRIBE is answered, and its closed callback
// hands the connection to resume, which serves it on (serveDetached):
// a reader that runs each command through handle as redcon did, and a
// pusher that writes the messages queued for it. The connection keeps
// its limitConn (command size bound, write timeout) and its count in
// d.conns; the door closes it on shutdown (close). A subscribed
// connection, like Redis's, has no idle timeout and is never shed to
// admit another (door.Listener); once it unsubscribed from everything it
// is an ordinary connection again.

// subscriberQueue bounds the bytes of the messages waiting for one
// subscriber: Redis's hard limit for pubsub clients. A subscriber further
// behind (it does not read, or reads slower than results come) is
// disconnected, as Redis disconnects a pubsub client past its output
// buffer limit (client-output-buffer-limit pubsub 32mb 8mb 60): a message
// is never dropped silently, and the publisher (the bucket's watch, a
// results consumer) never waits for a client. A message of a result key
// is about 100 bytes with a short uri.
const subscriberQueue = 32 << 20

// pubsub is a door's subscriptions and notification settings. It is
// safe for concurrent use.
type pubsub struct {
	flags   atomic.Uint32 // notify-keyspace-events (notify.go)
	modes   atomic.Int32  // connections in subscribed mode (refreshNotify)
	dropped atomic.Int64  // subscribers closed for falling behind

	mu       sync.RWMutex
	subs     map[*session]*subscriber // the detached connections
	channels map[string]map[*subscriber]struct{}
	patterns map[string]map[*subscriber]struct{}
	hooked   bool // the buckets' OnChange is set (notify.go)
	closed   bool // the door stopped: no more subscribers
}

// subscriber is one detached connection.
type subscriber struct {
	s   *session
	dc  redcon.DetachedConn
	raw net.Conn // under TLS, if any: closing it stops both goroutines
	// queued are the messages waiting for the pusher, qbytes their
	// bytes; wake (buffered 1) wakes the pusher.
	qmu    sync.Mutex
	queued [][]byte
	qbytes int
	wake   chan struct{}
	// mu makes the reader's answers and the pusher's messages one writer.
	mu sync.Mutex
	// channels and patterns subscribed, and whether resume ran, are
	// guarded by pubsub.mu.
	channels, patterns map[string]struct{}
	started            bool
	stopped            atomic.Bool
}

func (sub *subscriber) count() int { return len(sub.channels) + len(sub.patterns) }

// stop closes the connection, at once and without blocking; it reports
// whether this call closed it.
func (sub *subscriber) stop() bool {
	if sub.stopped.Swap(true) {
		return false
	}
	_ = sub.raw.Close()
	return true
}

// subscribed reports whether s is in subscribed mode (RESP2): it has a
// channel or a pattern. One atomic load.
func (ps *pubsub) subscribed(s *session) bool { return s.subscribed.Load() }

// attach returns s's subscriber, detaching c from redcon the first time;
// nil once the door stopped.
func (ps *pubsub) attach(c redcon.Conn, s *session) *subscriber {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if sub := ps.subs[s]; sub != nil {
		return sub
	}
	if ps.closed {
		return nil
	}
	raw := s.lc.Conn
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	sub := &subscriber{s: s, dc: c.Detach(), raw: raw, wake: make(chan struct{}, 1),
		channels: map[string]struct{}{}, patterns: map[string]struct{}{}}
	if ps.subs == nil {
		ps.subs, ps.channels, ps.patterns = map[*session]*subscriber{}, map[string]map[*subscriber]struct{}{}, map[string]map[*subscriber]struct{}{}
	}
	ps.subs[s] = sub
	return sub
}

// set subscribes sub to name (on) or unsubscribes it; it returns sub's
// count after. Call it with mu held.
func (ps *pubsub) set(sub *subscriber, name string, pattern, on bool) int {
	mine, all := sub.channels, ps.channels
	if pattern {
		mine, all = sub.patterns, ps.patterns
	}
	before := sub.count()
	_, had := mine[name]
	switch {
	case on && !had:
		mine[name] = struct{}{}
		if all[name] == nil {
			all[name] = map[*subscriber]struct{}{}
		}
		all[name][sub] = struct{}{}
	case !on && had:
		delete(mine, name)
		delete(all[name], sub)
		if len(all[name]) == 0 {
			delete(all, name)
		}
	}
	switch after := sub.count(); {
	case before == 0 && after > 0:
		ps.modes.Add(1)
		sub.s.subscribed.Store(true)
	case before > 0 && after == 0:
		ps.modes.Add(-1)
		sub.s.subscribed.Store(false)
	}
	return sub.count()
}

// forget drops sub and its subscriptions. Call it with mu held.
func (ps *pubsub) forget(sub *subscriber) {
	for name := range sub.channels {
		ps.set(sub, name, false, false)
	}
	for name := range sub.patterns {
		ps.set(sub, name, true, false)
	}
	delete(ps.subs, sub.s)
}

// close stops the subscribers and admits no more: Serve calls it before
// it waits for the connections.
func (ps *pubsub) close() {
	ps.mu.Lock()
	ps.closed = true
	var started []*subscriber
	for _, sub := range ps.subs {
		if sub.started {
			started = append(started, sub)
		}
	}
	ps.mu.Unlock()
	for _, sub := range started {
		sub.stop()
	}
}

// subscribe is SUBSCRIBE channel ….
func (d *Door) subscribe(c redcon.Conn, s *session, args [][]byte) {
	d.subscribeTo(c, s, args[1:], false)
}

// psubscribe is PSUBSCRIBE pattern ….
func (d *Door) psubscribe(c redcon.Conn, s *session, args [][]byte) {
	d.subscribeTo(c, s, args[1:], true)
}

// unsubscribe is UNSUBSCRIBE [channel …]: none named, all of the
// connection's.
func (d *Door) unsubscribe(c redcon.Conn, s *session, args [][]byte) {
	d.unsubscribeFrom(c, s, args[1:], false)
}

// punsubscribe is PUNSUBSCRIBE [pattern …]: none named, all of the
// connection's.
func (d *Door) punsubscribe(c redcon.Conn, s *session, args [][]byte) {
	d.unsubscribeFrom(c, s, args[1:], true)
}

func (d *Door) subscribeTo(c redcon.Conn, s *session, names [][]byte, pattern bool) {
	sub := d.ps.attach(c, s)
	if sub == nil {
		c.WriteError("ERR the cluster-serving RESP door is shutting down")
		return
	}
	kind := "subscribe"
	if pattern {
		kind = "psubscribe"
	}
	list := make([]string, len(names))
	for i, n := range names {
		list[i] = string(n)
	}
	d.ps.mu.Lock()
	counts := d.ps.setAll(sub, list, pattern, true)
	d.ps.mu.Unlock()
	d.answerSubscriptions(c, kind, list, counts)
}

func (d *Door) unsubscribeFrom(c redcon.Conn, s *session, names [][]byte, pattern bool) {
	kind := "unsubscribe"
	if pattern {
		kind = "punsubscribe"
	}
	var list []string
	for _, n := range names {
		list = append(list, string(n))
	}
	d.ps.mu.Lock()
	sub := d.ps.subs[s]
	if len(names) == 0 && sub != nil {
		mine := sub.channels
		if pattern {
			mine = sub.patterns
		}
		list = slices.Sorted(maps.Keys(mine))
	}
	counts := d.ps.setAll(sub, list, pattern, false)
	d.ps.mu.Unlock()
	d.answerSubscriptions(c, kind, list, counts)
}

// setAll is set of each of names, in order, and the counts after each;
// a nil sub (never subscribed) counts 0. Call it with mu held.
func (ps *pubsub) setAll(sub *subscriber, names []string, pattern, on bool) []int {
	counts := make([]int, len(names))
	for i, n := range names {
		if sub != nil {
			counts[i] = ps.set(sub, n, pattern, on)
		}
	}
	return counts
}

// answerSubscriptions writes Redis's answer of kind ((p)(un)subscribe)
// for each of names with its count after, or, with no names, one with a
// null name and 0; then it sets the buckets' hooks for what changed.
func (d *Door) answerSubscriptions(c redcon.Conn, kind string, names []string, counts []int) {
	if len(names) == 0 {
		c.WriteArray(3)
		c.WriteBulkString(kind)
		c.WriteNull()
		c.WriteInt(0)
	}
	for i, n := range names {
		c.WriteArray(3)
		c.WriteBulkString(kind)
		c.WriteBulkString(n)
		c.WriteInt(counts[i])
	}
	d.refreshNotify()
}

// publish queues message on channel for its subscribers and those of a
// pattern that matches it (a glob as KEYS takes: * ? and \); it never
// blocks.
func (d *Door) publish(channel, message string) {
	d.ps.mu.RLock()
	defer d.ps.mu.RUnlock()
	if subs := d.ps.channels[channel]; len(subs) > 0 {
		b := redcon.AppendArray(nil, 3)
		b = redcon.AppendBulkString(b, "message")
		b = redcon.AppendBulkString(b, channel)
		b = redcon.AppendBulkString(b, message)
		for sub := range subs {
			d.queue(sub, b)
		}
	}
	for pattern, subs := range d.ps.patterns {
		if ok, _ := match.MatchLimit(channel, pattern, maxGlobSteps); !ok {
			continue
		}
		b := redcon.AppendArray(nil, 4)
		b = redcon.AppendBulkString(b, "pmessage")
		b = redcon.AppendBulkString(b, pattern)
		b = redcon.AppendBulkString(b, channel)
		b = redcon.AppendBulkString(b, message)
		for sub := range subs {
			d.queue(sub, b)
		}
	}
}

// queue hands b to sub's pusher, or disconnects sub when its queue is
// full (see subscriberQueue).
func (d *Door) queue(sub *subscriber, b []byte) {
	sub.qmu.Lock()
	full := len(sub.queued) > 0 && sub.qbytes+len(b) > subscriberQueue
	if !full {
		sub.queued, sub.qbytes = append(sub.queued, b), sub.qbytes+len(b)
	}
	sub.qmu.Unlock()
	if !full {
		select {
		case sub.wake <- struct{}{}:
		default: // woken already
		}
		return
	}
	if sub.stop() {
		n := d.ps.dropped.Add(1)
		d.lim.Log(context.Background(), slog.LevelWarn, "RESP door: disconnected a subscriber that fell behind, as Redis does past its pubsub output buffer limit", nil,
			"remote", sub.raw.RemoteAddr().String(), "queued_bytes", subscriberQueue, "disconnected", n)
	}
}

// pubsubCommands may run in subscribed mode (RESP2), as in Redis.
var pubsubCommands = map[string]bool{"SUBSCRIBE": true, "PSUBSCRIBE": true, "UNSUBSCRIBE": true, "PUNSUBSCRIBE": true, "PING": true, "QUIT": true}

// guardSubscribed makes the commands of cmds answer as Redis does in
// subscribed mode: PING with [pong, message], the commands outside
// pubsubCommands with an error. Its cost on a connection that is not
// subscribed is one atomic load (pubsub.subscribed) while no connection
// is. Consecutive pipelined XADDs after a SUBSCRIBE do not go through
// the table (handle stores them together) and are served.
func guardSubscribed(cmds map[string]command) {
	for name, cmd := range cmds {
		run := cmd.run
		switch {
		case name == "PING":
			cmd.run = func(d *Door, c redcon.Conn, s *session, args [][]byte) {
				if len(args) > 2 || !d.ps.subscribed(s) {
					run(d, c, s, args)
					return
				}
				c.WriteArray(2)
				c.WriteBulkString("pong")
				if len(args) == 2 {
					c.WriteBulk(args[1])
				} else {
					c.WriteBulkString("")
				}
			}
		case !pubsubCommands[name]:
			refusal := "ERR Can't execute '" + strings.ToLower(name) + "': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT are allowed in this context"
			cmd.run = func(d *Door, c redcon.Conn, s *session, args [][]byte) {
				if d.ps.subscribed(s) {
					c.WriteError(refusal)
					return
				}
				run(d, c, s, args)
			}
		}
		cmds[name] = cmd
	}
}
