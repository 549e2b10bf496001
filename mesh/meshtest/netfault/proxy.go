package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

const (
	// chunkSize is the most one read takes from a connection; a chunk is
	// what Latency delays and Blackhole holds.
	chunkSize = 32 << 10
	// queueLen bounds the chunks held per direction of a connection
	// (queueLen × chunkSize = 512 KiB): past it the proxy stops reading,
	// and the sender's writes stall as they would behind a dead link.
	queueLen = 16
	// dialTimeout bounds the dial to the target, and so how long Close
	// can wait on a connection being set up.
	dialTimeout = 5 * time.Second
	// acceptBackoff is the pause after an accept error other than Close
	// (too many open files), so that the accept loop does not spin.
	acceptBackoff = 10 * time.Millisecond
)

// mode is the fault a Proxy applies to its connections, besides latency.
type mode int

const (
	pass      mode = iota // bytes flow
	blackhole             // connections stay open, bytes are held
	refuse                // connections are closed at once
)

// Proxy accepts TCP connections on its address and pipes each one, both
// ways, to a new connection to its target, applying the fault that is set
// at the time each chunk of bytes would pass. Its methods are safe for
// concurrent use; once Close has run, the fault methods do nothing.
//
// A connection ends as a whole when either side ends it (no half-close),
// after the bytes read before the end have passed.
type Proxy struct {
	ln       net.Listener
	wg       sync.WaitGroup // the accept loop and every connection's goroutines
	once     sync.Once
	closeErr error

	mu     sync.Mutex
	target string
	mode   mode
	delay  time.Duration
	wake   chan struct{} // closed and replaced at every change of mode or delay
	links  map[*link]struct{}
	closed bool
}

// Listen starts a Proxy on addr (host:port; port 0 picks a free one) to
// target (host:port). With an empty target it refuses connections until
// SetTarget names one. It returns the listener's error, wrapped.
func Listen(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("netfault: listen on %s: %w", addr, err)
	}
	p := &Proxy{ln: ln, target: target, wake: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the address the proxy listens on, where parties connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets the address new connections are piped to, for a target
// that learns its port only once the proxy exists (a server whose route
// dials the proxy while it starts). Established connections keep theirs.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Blackhole holds every byte from now on: connections stay open but
// nothing passes either way, as in a partition that drops packets.
// Nothing is lost: Heal lets the held bytes through, and then the close
// of a party that gave up meanwhile, as TCP would retransmit them. A
// connection opened during the blackhole never reaches the target: the
// proxy accepts it, but it stays silent and is closed at Heal, as a
// connect whose packets were dropped fails, so that its party dials
// again.
func (p *Proxy) Blackhole() { p.update(func() { p.mode = blackhole }) }

// Refuse closes every connection through the proxy and, from now on,
// every new one as soon as it is accepted, as a host whose server is down.
func (p *Proxy) Refuse() {
	p.update(func() {
		p.mode = refuse
		p.cutLocked()
	})
}

// Latency delays every chunk of bytes, either way, by d after the proxy
// read it, keeping their order: a round trip through the proxy takes at
// least 2d more. It leaves Blackhole or Refuse as they are; d <= 0
// removes the delay.
func (p *Proxy) Latency(d time.Duration) { p.update(func() { p.delay = max(d, 0) }) }

// Heal lifts every fault: no blackhole, no refusal, no latency.
func (p *Proxy) Heal() { p.update(func() { p.mode, p.delay = pass, 0 }) }

// update applies change under the lock, unless the proxy is closed, and
// wakes the connections waiting on the mode or the delay.
func (p *Proxy) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	change()
	close(p.wake)
	p.wake = make(chan struct{})
}

// Cut closes every connection the proxy carries now, once; new ones are
// accepted as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutLocked()
}

func (p *Proxy) cutLocked() {
	for l := range p.links {
		l.close()
	}
	clear(p.links)
}

// Conns returns how many connections the proxy carries, those held by a
// blackhole included.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops the listener, closes every connection and waits for the
// proxy's goroutines. It is idempotent: every call waits, and returns the
// error from closing the listener.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.closeErr = p.ln.Close()
		p.cutLocked()
		p.mu.Unlock()
	})
	p.wg.Wait()
	return p.closeErr
}

// accept runs until Close, handing each connection to a goroutine.
func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(acceptBackoff)
			continue
		}
		if l := p.open(in); l != nil {
			p.wg.Go(func() { p.serve(l) })
		}
	}
}

// open registers a new connection, or closes it (nil) when the proxy
// refuses, has no target or is closed.
func (p *Proxy) open(in net.Conn) *link {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == refuse || p.target == "" {
		in.Close()
		return nil
	}
	l := &link{in: in, dark: p.mode == blackhole, done: make(chan struct{})}
	p.links[l] = struct{}{}
	return l
}

// serve dials the target and pipes both ways until either side ends; it
// closes l. A connection opened into a blackhole waits for Heal and is
// closed then without reaching the target: had it been let through, the
// target would get, at once, whatever its party wrote and the close by
// which it gave up, long after the fact, on a connection that a real
// network never opened.
func (p *Proxy) serve(l *link) {
	defer p.drop(l)
	if l.dark {
		p.hold(l, time.Time{})
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	out, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil || !l.attach(out) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(l, out, l.in) })
	p.pipe(l, l.in, out)
	wg.Wait()
}

// drop unregisters l and closes it.
func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

// chunk is bytes read from one side, or its end (no bytes), and when.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe writes to dst what read takes from src, each chunk once hold lets
// it pass, and closes l at src's end or at dst's first error.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	defer l.close()
	chunks := make(chan chunk, queueLen)
	p.wg.Go(func() { read(l, src, chunks) })
	for c := range chunks {
		if !p.hold(l, c.at) || len(c.b) == 0 {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// read sends src's bytes to chunks, then a chunk with none for its end;
// it stops early when l closes.
func read(l *link, src net.Conn, chunks chan<- chunk) {
	defer close(chunks)
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.send(chunks, chunk{b: bytes.Clone(buf[:n]), at: time.Now()}) {
			return
		}
		if err != nil {
			l.send(chunks, chunk{at: time.Now()})
			return
		}
	}
}

// hold blocks until a chunk read at `at` may pass: the proxy is not
// blackholed and the delay since `at` has run. It returns false once l is
// closed.
func (p *Proxy) hold(l *link, at time.Time) bool {
	for {
		p.mu.Lock()
		wake, m, delay := p.wake, p.mode, p.delay
		p.mu.Unlock()
		var fire <-chan time.Time
		var timer *time.Timer
		if m != blackhole {
			wait := time.Until(at.Add(delay))
			if wait <= 0 {
				return true
			}
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-fire:
		case <-wake:
		case <-l.done:
			return false
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// link is one proxied connection: in from the party that dialled the
// proxy, out to the target once dialled.
type link struct {
	in   net.Conn
	dark bool          // opened into a blackhole: never reaches the target
	done chan struct{} // closed by close
	once sync.Once
	mu   sync.Mutex
	out  net.Conn
}

// attach sets out, or closes it (false) when l is already closed.
func (l *link) attach(out net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		out.Close()
		return false
	default:
	}
	l.out = out
	return true
}

// send queues c, or gives up (false) once l is closed.
func (l *link) send(chunks chan<- chunk, c chunk) bool {
	select {
	case chunks <- c:
		return true
	case <-l.done:
		return false
	}
}

// close closes both connections once; the pipes then end.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.in.Close()
		l.mu.Lock()
		if l.out != nil {
			l.out.Close()
		}
		l.mu.Unlock()
	})
}
