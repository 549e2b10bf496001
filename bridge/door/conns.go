package door

import (
	"cmp"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// Connection defaults both doors apply for zero Conns fields.
const (
	// DefaultIdleTimeout closes a keep-alive connection (an HTTP/2
	// connection with no RPC) that sat quiet this long.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultReadTimeout bounds reading one whole HTTP request, body
	// included, so that a client trickling a body cannot hold a
	// connection.
	DefaultReadTimeout = 60 * time.Second
	// HeaderTimeout bounds reading an HTTP request's header and a gRPC
	// connection's TLS handshake and HTTP/2 preface.
	HeaderTimeout = 10 * time.Second
	// DefaultMaxConnections caps a door's open connections, or a quarter
	// of the process's open-file limit when that is lower (see
	// MaxConnections).
	DefaultMaxConnections = 4096
	// writeSlack is what a default WriteTimeout leaves for writing the
	// answer once the request's own bounds have run out.
	writeSlack = 10 * time.Second
)

// Conns bounds a door's connections (config keys httpIdleTimeout,
// httpReadTimeout, httpWriteTimeout and httpMaxConnections, shared by
// the HTTP and gRPC doors). The zero value means all defaults.
type Conns struct {
	// IdleTimeout closes a connection with no request in flight after
	// this long (HTTP keep-alive; gRPC keepalive MaxConnectionIdle).
	// Default 60s.
	IdleTimeout time.Duration
	// ReadTimeout bounds reading one HTTP request, header and body.
	// Default 60s. The gRPC door bounds only its handshake (HeaderTimeout).
	ReadTimeout time.Duration
	// WriteTimeout bounds an HTTP request from the end of its header to
	// the end of its answer, so it must outlast reading the body, waiting
	// for a token and the request timeout. Default ReadTimeout +
	// TokenAcquireTimeout + RequestTimeout + 10s.
	WriteTimeout time.Duration
	// MaxConnections caps the connections open at once; past it the door
	// sheds (see Listener). Default min(4096, RLIMIT_NOFILE/4).
	MaxConnections int
}

// Validate reports the first negative field, wrapping invalid, and a
// WriteTimeout that would cut a request still within requestTimeout.
func (c Conns) Validate(invalid error, requestTimeout time.Duration) error {
	if err := mesh.CheckLimits(invalid, mesh.Limit{Name: "IdleTimeout", Value: c.IdleTimeout},
		mesh.Limit{Name: "ReadTimeout", Value: c.ReadTimeout}, mesh.Limit{Name: "WriteTimeout", Value: c.WriteTimeout},
		mesh.Limit{Name: "MaxConnections", Value: int64(c.MaxConnections)}); err != nil {
		return err
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= requestTimeout {
		return fmt.Errorf("%w: WriteTimeout %v must be longer than RequestTimeout %v, or a slow inference is cut off", invalid, c.WriteTimeout, requestTimeout)
	}
	return nil
}

// WithDefaults fills the zero fields; requestTimeout and acquireTimeout
// are the door's, already defaulted.
func (c Conns) WithDefaults(requestTimeout, acquireTimeout time.Duration) Conns {
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, c.ReadTimeout+acquireTimeout+requestTimeout+writeSlack)
	c.MaxConnections = cmp.Or(c.MaxConnections, MaxConnections())
	return c
}

// MaxConnections is a door's default connection cap: 4096, or a quarter
// of the soft open-file limit when that is lower (at least 16), so that
// the doors together cannot exhaust the descriptors that NATS, the model
// files and the repository scans need.
func MaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur/4 >= DefaultMaxConnections {
		return DefaultMaxConnections
	}
	return max(int(rl.Cur/4), 16)
}

// Listener caps the connections a door holds open. When a new connection
// would pass the cap it sheds: it closes the connection idle the longest
// (one with no request in flight, as Begin and End report) to admit the new
// one, and when none is idle it closes the new one. So idle keep-alive
// connections cannot exhaust the process's file descriptors, and a real
// client is served at once. It is safe for concurrent use.
type Listener struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[*conn]struct{}

	shed, refused atomic.Int64
}

// NewListener wraps ln with a cap of max open connections (> 0).
func NewListener(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, max: max, conns: map[*conn]struct{}{}}
}

// conn is one accepted connection: active requests in flight, idle since
// when it has none. Both are guarded by the listener's mu.
type conn struct {
	net.Conn
	l      *Listener
	active int
	since  time.Time
	once   sync.Once
}

// Close forgets c and closes it; it is idempotent.
func (c *conn) Close() error {
	c.l.forget(c)
	return c.Conn.Close()
}

func (l *Listener) forget(c *conn) {
	c.once.Do(func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
	})
}

// Accept returns the next connection, shedding as Listener says. A new
// connection is idle until Begin: it holds no request yet.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: nc, l: l, since: time.Now()}
		l.mu.Lock()
		var victim *conn
		if len(l.conns) >= l.max {
			victim = l.longestIdle()
		}
		full := len(l.conns) >= l.max && victim == nil
		if !full {
			l.conns[c] = struct{}{}
		}
		l.mu.Unlock()
		if full {
			l.refused.Add(1)
			_ = nc.Close()
			continue
		}
		if victim != nil {
			l.shed.Add(1)
			_ = victim.Close()
		}
		return c, nil
	}
}

// longestIdle is the idle connection idle the longest, nil when none is
// idle. l.mu is held.
func (l *Listener) longestIdle() *conn {
	var victim *conn
	for c := range l.conns {
		if c.active == 0 && (victim == nil || c.since.Before(victim.since)) {
			victim = c
		}
	}
	return victim
}

// Begin records that a request started on nc, a connection Accept
// returned (or a TLS connection over one), and End that one ended: a
// connection with none in flight is idle. Other connections are ignored.
func (l *Listener) Begin(nc net.Conn) { l.add(nc, 1) }

// End: see Begin.
func (l *Listener) End(nc net.Conn) { l.add(nc, -1) }

func (l *Listener) add(nc net.Conn, n int) {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		nc = u.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	c.active = max(c.active+n, 0)
	if c.active == 0 {
		c.since = time.Now()
	}
	l.mu.Unlock()
}

// Lookup is the open connection whose remote address is remote, nil when
// none is (a gRPC stats handler knows a connection only by its addresses).
func (l *Listener) Lookup(remote net.Addr) net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if c.RemoteAddr().String() == remote.String() {
			return c
		}
	}
	return nil
}

// Open is the number of connections open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Shed is how many idle connections were closed to admit new ones, and
// Refused how many new connections were closed because none was idle.
func (l *Listener) Shed() int64    { return l.shed.Load() }
func (l *Listener) Refused() int64 { return l.refused.Load() }
