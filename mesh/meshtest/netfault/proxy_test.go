package netfault_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest/netfault"
)

// patience bounds every wait for bytes or a close that must come: long
// enough never to fail a correct proxy on a loaded machine.
const patience = 10 * time.Second

// quiet is how long a test listens for bytes that must not come.
const quiet = 300 * time.Millisecond

// echoServer starts a TCP server that writes back what it reads, closed
// (its connections too) at cleanup.
func echoServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c); c.Close() })
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dial connects to addr, closed at cleanup.
func dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg to c and reads it back.
func roundTrip(tb testing.TB, c net.Conn, msg []byte) {
	tb.Helper()
	write(tb, c, msg)
	expect(tb, c, msg)
}

func write(tb testing.TB, c net.Conn, msg []byte) {
	tb.Helper()
	if _, err := c.Write(msg); err != nil {
		tb.Fatalf("write: %v", err)
	}
}

// expect reads len(want) bytes from c and compares them with want.
func expect(tb testing.TB, c net.Conn, want []byte) {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		tb.Fatalf("read %d bytes: %v", len(want), err)
	}
	if !bytes.Equal(got, want) {
		tb.Fatalf("got %d bytes %.40q, want %d bytes %.40q", len(got), got, len(want), want)
	}
}

// silent checks that nothing arrives on c for a while.
func silent(tb testing.TB, c net.Conn) {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		tb.Fatalf("read: got %d bytes, err %v; want nothing until the deadline", n, err)
	}
}

// closed checks that c's peer closes it.
func closed(tb testing.TB, c net.Conn) {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		tb.Fatalf("read: got %d bytes, err %v; want the connection closed", n, err)
	}
}

// waitFor polls cond every 10ms, failing tb when it does not hold within
// patience.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// echoThrough starts a proxy to an echo server and opens a connection
// through it that has carried msg both ways.
func echoThrough(tb testing.TB, msg string) (*netfault.Proxy, net.Conn) {
	tb.Helper()
	p := netfault.ListenForTest(tb, echoServer(tb))
	c := dial(tb, p.Addr())
	roundTrip(tb, c, []byte(msg))
	return p, c
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

func TestProxyPipesBothWays(t *testing.T) {
	p := netfault.ListenForTest(t, echoServer(t))
	for _, n := range []int{1, 4 << 10, 1 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := dial(t, p.Addr())
			msg := payload(n)
			// Write while reading: a MiB is more than the sockets and the
			// proxy hold, so a write that waits for its echo to be read
			// would block.
			errc := make(chan error, 1)
			go func() { _, err := c.Write(msg); errc <- err }()
			expect(t, c, msg)
			if err := <-errc; err != nil {
				t.Fatalf("write: %v", err)
			}
		})
	}
}

func TestBlackholeHoldsUntilHeal(t *testing.T) {
	p, c := echoThrough(t, "before")
	p.Blackhole()
	write(t, c, []byte("held"))
	silent(t, c)
	p.Heal()
	expect(t, c, []byte("held"))
	roundTrip(t, c, []byte("after"))
}

func TestBlackholeDropsNewConnectionsAtHeal(t *testing.T) {
	p := netfault.ListenForTest(t, echoServer(t))
	p.Blackhole()
	c := dial(t, p.Addr())
	write(t, c, []byte("never"))
	silent(t, c)
	if got := p.Conns(); got != 1 {
		t.Errorf("Conns while blackholed: got %d, want 1", got)
	}
	p.Heal()
	closed(t, c)
	roundTrip(t, dial(t, p.Addr()), []byte("dialled again"))
}

func TestLatencyDelaysEachWay(t *testing.T) {
	p, c := echoThrough(t, "warm")
	const d = 100 * time.Millisecond
	p.Latency(d)
	begin := time.Now()
	roundTrip(t, c, []byte("slow"))
	if rtt := time.Since(begin); rtt < 2*d {
		t.Errorf("round trip with latency %v: got %v, want at least %v", d, rtt, 2*d)
	}

	// Chunks written apart keep their order.
	p.Latency(5 * time.Millisecond)
	var want []byte
	for i := range 50 {
		piece := fmt.Appendf(nil, "<%d>", i)
		want = append(want, piece...)
		write(t, c, piece)
		if i%10 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	expect(t, c, want)

	p.Latency(0)
	roundTrip(t, c, []byte("fast again"))
}

func TestRefuseClosesAndRejects(t *testing.T) {
	p, old := echoThrough(t, "before")
	p.Refuse()
	closed(t, old)
	closed(t, dial(t, p.Addr()))
	waitFor(t, "no connection through the proxy", func() bool { return p.Conns() == 0 })
	p.Heal()
	roundTrip(t, dial(t, p.Addr()), []byte("after"))
}

func TestCutClosesOnce(t *testing.T) {
	p, old := echoThrough(t, "before")
	p.Cut()
	closed(t, old)
	roundTrip(t, dial(t, p.Addr()), []byte("a new one passes"))
}

func TestTargetSetLater(t *testing.T) {
	p := netfault.ListenForTest(t, "")
	closed(t, dial(t, p.Addr()))
	p.SetTarget(echoServer(t))
	roundTrip(t, dial(t, p.Addr()), []byte("now"))
}

func TestConnsEndWithTheirParties(t *testing.T) {
	p, c := echoThrough(t, "x")
	if got := p.Conns(); got != 1 {
		t.Errorf("Conns: got %d, want 1", got)
	}
	c.Close()
	waitFor(t, "no connection through the proxy", func() bool { return p.Conns() == 0 })
}

func TestCloseIsIdempotentAndEndsHeldConnections(t *testing.T) {
	p, err := netfault.Listen("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	open := dial(t, p.Addr())
	roundTrip(t, open, []byte("x"))
	p.Blackhole()
	write(t, open, []byte("held"))
	waiting := dial(t, p.Addr()) // waits for Heal to reach the target
	if err := p.Close(); err != nil {
		t.Errorf("Close: got %v, want nil", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	closed(t, open)
	closed(t, waiting)
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Error("dial after Close: got a connection, want an error")
	}
	p.Heal() // does nothing once closed
	p.Cut()
}

// TestFaultsWhileTrafficFlows switches faults under traffic (run with
// -race): once healed, every open connection has carried its bytes
// intact.
func TestFaultsWhileTrafficFlows(t *testing.T) {
	p := netfault.ListenForTest(t, echoServer(t))
	// The connections open first: one opened into a blackhole would be
	// closed at the next heal.
	cs := make([]net.Conn, 4)
	for w := range cs {
		cs[w] = dial(t, p.Addr())
		roundTrip(t, cs[w], []byte("open"))
	}
	stop := make(chan struct{})
	var flips sync.WaitGroup
	flips.Go(func() { flip(p, stop) })
	var conns sync.WaitGroup
	for w, c := range cs {
		conns.Go(func() {
			if err := echoes(c, uint64(w)); err != nil {
				t.Errorf("connection %d: %v", w, err)
			}
		})
	}
	time.Sleep(250 * time.Millisecond)
	close(stop)
	flips.Wait()
	p.Heal()
	conns.Wait()
}

// flip cycles p through its faults every few milliseconds until stop.
func flip(p *netfault.Proxy, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(3 * time.Millisecond):
		}
		switch i % 4 {
		case 0:
			p.Blackhole()
		case 1:
			p.Latency(time.Millisecond)
		case 2:
			p.Heal()
		case 3:
			p.Conns()
		}
	}
}

// echoes sends 20 random messages through c, each written while its echo
// is read, and checks that each comes back intact.
func echoes(c net.Conn, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 20 {
		msg := make([]byte, 1+rng.IntN(64<<10))
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		var wg sync.WaitGroup
		var werr error
		wg.Go(func() { _, werr = c.Write(msg) })
		_ = c.SetReadDeadline(time.Now().Add(patience))
		got := make([]byte, len(msg))
		_, err := io.ReadFull(c, got)
		wg.Wait()
		switch {
		case werr != nil:
			return fmt.Errorf("write: %w", werr)
		case err != nil:
			return fmt.Errorf("read %d bytes: %w", len(msg), err)
		case !bytes.Equal(got, msg):
			return fmt.Errorf("got %d bytes unlike the %d written", len(got), len(msg))
		}
	}
	return nil
}
