package respdoor

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// connListener wraps each accepted connection (over the door.Listener,
// TLS included) in a limitConn.
type connListener struct {
	net.Listener
	d *Door
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &limitConn{Conn: c, max: l.d.cfg.MaxCommandBytes, write: l.d.cfg.WriteTimeout}, nil
}

// errCommandTooLong ends a connection whose command passed MaxCommandBytes.
var errCommandTooLong = errors.New("respdoor: command too long")

// limitConn bounds what one command may take and how long one answer
// may wait for a client that does not read. redcon buffers a command
// whole before the handler sees it, growing its buffer as it must, so the
// bound is on the bytes read since the last command was handled: reads
// and handlers of a connection run on one goroutine, so no lock is needed.
type limitConn struct {
	net.Conn
	max   int
	read  int
	write time.Duration
	// commits run after the next write, told whether it went out: the
	// deletes of the answers it carries (DEL). redcon writes a
	// connection's answers once per pipeline, on its goroutine.
	commits []func(sent bool)
}

// afterWrite runs commit after the next write.
func (c *limitConn) afterWrite(commit func(sent bool)) { c.commits = append(c.commits, commit) }

// settle runs the commits waiting for a write, told whether it went out.
func (c *limitConn) settle(sent bool) {
	for _, commit := range c.commits {
		commit(sent)
	}
	c.commits = c.commits[:0]
}

// Read fails once the bytes read since the last command pass the bound,
// after telling the client why (Redis's own words for a query buffer
// over its limit start the same way).
func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += n
	if c.read > c.max {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.write))
		_, _ = fmt.Fprintf(c.Conn, "-ERR Protocol error: command longer than %d bytes (the RESP door's MaxCommandBytes); closing the connection\r\n", c.max)
		return 0, errCommandTooLong
	}
	return n, err
}

func (c *limitConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.write))
	n, err := c.Conn.Write(p)
	c.settle(err == nil)
	return n, err
}

// handled resets the bound for the next command.
func (c *limitConn) handled() { c.read = 0 }

// session is one connection's state, its redcon context.
type session struct {
	lc     *limitConn
	authed bool
	name   string
	id     int64
	// unread holds the keys whose last read on this connection did not
	// give their value (readFailed, readMissing), which DEL leaves alone
	// until a read gives it.
	unread map[string]readOutcome
	began  time.Time // when the pipeline being served began
	// subscribed: the connection has a channel or a pattern (pubsub.set).
	subscribed atomic.Bool
}

// maxDelPipeline is how long a pipeline may have run for its DELs to be
// done: past it (leader reads timing out in an election), its client may
// have given up waiting (go-redis reads for 3 s), and the values its
// HGETs read would be lost with the keys.
const maxDelPipeline = time.Second

// readOutcome is what the last read of a key on a connection gave, when
// not its value.
type readOutcome uint8

const (
	readFailed  readOutcome = iota + 1 // an error (-BUSY)
	readMissing                        // no result (yet)
)

// maxUnread bounds a session's unread keys; past it they are forgotten.
const maxUnread = 1024

// read notes what a read of key gave: its value (found), none, or an error.
func (s *session) read(key []byte, found bool, err error) {
	if found && err == nil {
		delete(s.unread, string(key))
		return
	}
	if s.unread == nil {
		s.unread = map[string]readOutcome{}
	}
	if len(s.unread) >= maxUnread {
		clear(s.unread)
	}
	outcome := readMissing
	if err != nil {
		outcome = readFailed
	}
	s.unread[string(key)] = outcome
}

// accept starts a connection's session.
func (d *Door) accept(c redcon.Conn) bool {
	lc, _ := c.NetConn().(*limitConn)
	if lc == nil {
		return false
	}
	c.SetContext(&session{lc: lc, authed: d.auth == nil, id: d.clients.Add(1)})
	d.conns.Add(1)
	return true
}

// closed ends a connection's session: the last call of its goroutine.
func (d *Door) closed(c redcon.Conn, err error) {
	if d.resume(c) { // a SUBSCRIBE detached it: served on (pubsub.go)
		return
	}
	defer d.conns.Done()
	if s, ok := c.Context().(*session); ok {
		s.lc.settle(false) // answers never written: their deletes undone
	}
	if err != nil {
		d.log.Debug("RESP connection ended", "remote", c.RemoteAddr(), "err", err)
	}
}
