package respdoor

import (
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// resume takes over c once redcon let it go, when a SUBSCRIBE detached
// it (see pubsub.go): closed calls it first and, when it reports true,
// leaves the connection's count in d.conns to serveDetached. A
// connection detached while the door stops is closed here instead, and
// closed ends it as any other.
func (d *Door) resume(c redcon.Conn) bool {
	s, _ := c.Context().(*session)
	if s == nil {
		return false
	}
	d.ps.mu.Lock()
	sub := d.ps.subs[s]
	switch {
	case sub == nil || sub.started:
		d.ps.mu.Unlock()
		return false
	case d.ps.closed:
		d.ps.forget(sub)
		d.ps.mu.Unlock()
		d.refreshNotify()
		sub.stop()
		return false
	}
	sub.started = true
	d.ps.mu.Unlock()
	go d.serveDetached(sub)
	return true
}

// serveDetached serves a detached connection until it closes: it writes
// what the pipeline that detached it answered, then reads and runs its
// commands one by one, while a pusher writes the messages queued for it.
func (d *Door) serveDetached(sub *subscriber) {
	defer d.conns.Done()
	var pusher sync.WaitGroup
	done := make(chan struct{})
	busy := false
	defer func() {
		d.ps.mu.Lock()
		d.ps.forget(sub)
		d.ps.mu.Unlock()
		d.refreshNotify()
		sub.stop() // first: a pusher blocked in a write returns at once
		close(done)
		pusher.Wait()
		if busy {
			d.lst.End(sub.s.lc.Conn)
		}
	}()
	sub.mu.Lock()
	err := sub.dc.Flush()
	sub.mu.Unlock()
	pusher.Go(func() { sub.push(done) })
	for err == nil {
		busy = d.waitMode(sub, busy)
		var cmd redcon.Command
		if cmd, err = sub.dc.ReadCommand(); err != nil {
			if strings.HasPrefix(err.Error(), "Protocol error") { // redcon's, answered as its loop does
				sub.mu.Lock()
				sub.dc.WriteError("ERR " + err.Error())
				_ = sub.dc.Flush()
				sub.mu.Unlock()
			}
			break
		}
		sub.mu.Lock()
		d.handle(sub.dc, cmd)
		err = sub.dc.Flush()
		sub.mu.Unlock()
	}
	if !errors.Is(err, io.EOF) {
		d.log.Debug("RESP connection ended", "remote", sub.dc.RemoteAddr(), "err", err)
	}
}

// waitMode sets how the next read of sub waits: subscribed, with no idle
// timeout and busy for door.Listener (never shed), as Redis exempts its
// pubsub clients from its timeout; else as any connection. It returns
// whether the connection is now busy.
func (d *Door) waitMode(sub *subscriber, busy bool) bool {
	subscribed := d.ps.subscribed(sub.s)
	if subscribed {
		_ = sub.s.lc.SetReadDeadline(time.Time{})
	} else {
		_ = sub.s.lc.SetReadDeadline(time.Now().Add(d.cfg.IdleTimeout))
	}
	switch {
	case subscribed && !busy:
		d.lst.Begin(sub.s.lc.Conn)
	case !subscribed && busy:
		d.lst.End(sub.s.lc.Conn)
	}
	return subscribed
}

// push writes the messages queued for sub, all that wait in one write,
// until done or a write fails (then it closes the connection, which ends
// its reader).
func (sub *subscriber) push(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-sub.wake:
		}
		sub.qmu.Lock()
		batch := sub.queued
		sub.queued, sub.qbytes = nil, 0
		sub.qmu.Unlock()
		if len(batch) == 0 {
			continue
		}
		sub.mu.Lock()
		for _, b := range batch {
			sub.dc.WriteRaw(b)
		}
		err := sub.dc.Flush()
		sub.mu.Unlock()
		if err != nil {
			sub.stop()
			return
		}
	}
}
