package meshtest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest/netfault"
)

// Cluster is an in-process NATS cluster with JetStream, every server on
// its own store, for failover and partition tests. Every connection to or
// between its servers runs through a TCP proxy, so that Kill can cut a
// server off at once, as kill -9 does to a process: its peers see its
// routes close and must elect new stream leaders (4-9 s), where a
// graceful Shutdown would hand leadership over first. The routes' proxies
// are netfault proxies, one per ordered pair of servers, so that Isolate
// and RouteLatency can break the network between servers while both ends
// keep running. Its methods are safe for concurrent use.
type Cluster struct {
	servers []*server.Server
	clients []*proxy            // clients' way into server i
	routes  [][]*netfault.Proxy // routes[i][j]: server i's route to server j

	mu       sync.Mutex
	faults   [][]routeFault // faults[i][j]: what routes[i][j] is set to
	killed   map[int]bool
	isolated map[int]int // server → Isolate calls not yet healed
	latency  time.Duration
}

// ClusterConfig sets up StartClusterWith; its zero value is a cluster of
// 3 with nats-server's route defaults.
type ClusterConfig struct {
	// Servers is how many servers the cluster has; default 3.
	Servers int
	// RoutePing is how often a server pings each of its routes. A route
	// whose two pings go unanswered is closed as stale at the third, so a
	// blackholed route is closed within about 3×RoutePing (6 s at 2 s)
	// and the server dials it again through its proxy. Default:
	// nats-server's, 2 minutes.
	RoutePing time.Duration
}

// StartCluster starts n servers named n0, n1, ... in one cluster, waits
// until JetStream has a meta leader, and shuts them down at cleanup.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return StartClusterWith(tb, ClusterConfig{Servers: n})
}

// StartClusterWith is StartCluster as cfg sets it up.
//
// Server i is given a route URL per peer j, routes[i][j], a proxy that
// forwards to j's cluster port. A route connection carries both ways
// whichever end dialled it, so the link between i and j runs through
// routes[i][j] or routes[j][i] (both, across a route pool); a fault
// between them is set on both. Each server advertises a cluster address
// that refuses connections (see startServer), so that gossip never opens
// a route around the proxies.
func StartClusterWith(tb testing.TB, cfg ClusterConfig) *Cluster {
	tb.Helper()
	n := cmp.Or(cfg.Servers, 3)
	c := &Cluster{routes: make([][]*netfault.Proxy, n), killed: map[int]bool{}, isolated: map[int]int{}}
	// The route proxies exist before the servers, which learn their ports
	// only once started: a route dialled before then is refused and
	// retried by the server.
	for i := range n {
		c.routes[i] = make([]*netfault.Proxy, n)
		c.faults = append(c.faults, make([]routeFault, n))
		for j := range n {
			if j != i {
				c.routes[i][j] = netfault.ListenForTest(tb, "")
			}
		}
	}
	for i := range n {
		s := c.startServer(tb, cfg, i)
		c.servers = append(c.servers, s)
		client := newProxy(tb)
		client.to(strings.TrimPrefix(s.ClientURL(), "nats://"))
		c.clients = append(c.clients, client)
		for j := range n {
			if j != i {
				c.routes[j][i].SetTarget(s.ClusterAddr().String())
			}
		}
	}
	c.waitMeta(tb)
	return c
}

// startServer starts server i, its routes to the others through their
// proxies, and shuts it down at cleanup.
func (c *Cluster) startServer(tb testing.TB, cfg ClusterConfig, i int) *server.Server {
	tb.Helper()
	var urls []*url.URL
	for j, p := range c.routes[i] {
		if j != i {
			urls = append(urls, &url.URL{Scheme: "nats-route", Host: p.Addr()})
		}
	}
	// A peer that hears of this server by gossip before its own route to
	// it is up dials the advertised address, and the real cluster port
	// would give it a route around the proxies: advertise one that
	// refuses instead, so that only the configured route connects.
	dead := netfault.ListenForTest(tb, "")
	s, err := server.NewServer(&server.Options{
		ServerName: fmt.Sprintf("n%d", i),
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   tb.TempDir(),
		NoLog:      true,
		NoSigs:     true,
		Cluster: server.ClusterOpts{Name: "meshtest", Host: "127.0.0.1", Port: -1, NoAdvertise: true,
			Advertise: dead.Addr(), PingInterval: cfg.RoutePing},
		Routes: urls,
	})
	if err != nil {
		tb.Fatalf("cluster server %d: %v", i, err)
	}
	s.Start()
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatalf("cluster server %d not ready", i)
	}
	return s
}

// waitMeta waits until JetStream answers on the cluster.
func (c *Cluster) waitMeta(tb testing.TB) {
	tb.Helper()
	nc := c.Connect(tb)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	WaitFor(tb, "JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
}

// URL lists every server's client URL, comma-separated, for nats.Connect.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.clients))
	for i, p := range c.clients {
		urls[i] = "nats://" + p.addr()
	}
	return strings.Join(urls, ",")
}

// Connect opens a connection to the cluster, closed at cleanup, with
// short reconnect waits so that a test does not wait on the defaults.
func (c *Cluster) Connect(tb testing.TB, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	return dial(tb, c.URL(), opts...)
}

// ConnectTo is Connect with server i tried first, and the others (in
// order) after it: a test that kills server i knows the connection moves.
func (c *Cluster) ConnectTo(tb testing.TB, i int, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	urls := []string{"nats://" + c.clients[i].addr()}
	for j, p := range c.clients {
		if j != i {
			urls = append(urls, "nats://"+p.addr())
		}
	}
	return dial(tb, strings.Join(urls, ","), append([]nats.Option{nats.DontRandomize()}, opts...)...)
}

// dial connects to urls with short reconnect waits, closed at cleanup.
func dial(tb testing.TB, urls string, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond)}, opts...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		tb.Fatalf("nats.Connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Index returns the index of the server named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, s := range c.servers {
		if s.Name() == name {
			return i
		}
	}
	return -1
}

// Kill cuts server i off from clients and peers at once (every proxied
// connection closes, none opens), then shuts it down.
func (c *Cluster) Kill(i int) {
	c.clients[i].cut()
	c.mu.Lock()
	c.killed[i] = true
	c.applyLocked()
	c.mu.Unlock()
	c.servers[i].Shutdown()
}

// Isolate partitions server i from the other servers: every route proxy
// to and from it holds all bytes (netfault's Blackhole), so its routes
// stay open but silent until their pings time out (see RoutePing), and
// the routes it or its peers dial again meanwhile connect to a proxy
// that never answers. Its clients still reach it. heal ends this
// partition: the held bytes pass, the routes dialled during it are
// closed and dialled again. Partitions of other servers stay, as does
// RouteLatency. heal may be called more than once.
func (c *Cluster) Isolate(i int) (heal func()) {
	c.mu.Lock()
	c.isolated[i]++
	c.applyLocked()
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.isolated[i]--; c.isolated[i] == 0 {
				delete(c.isolated, i)
			}
			c.applyLocked()
			c.mu.Unlock()
		})
	}
}

// RouteLatency delays every chunk of bytes on every route by d each way,
// so that a round trip between two servers takes at least 2d more; d <= 0
// removes the delay. It outlasts Isolate and its heal.
func (c *Cluster) RouteLatency(d time.Duration) {
	c.mu.Lock()
	c.latency = d
	c.applyLocked()
	c.mu.Unlock()
}

// routeFault is the fault a route proxy is set to, besides latency.
type routeFault int

const (
	routeUp routeFault = iota
	routeBlackholed
	routeRefused
)

// applyLocked sets every route proxy to the faults the cluster is in:
// refused to and from a killed server, blackholed to and from an isolated
// one, and delayed by the route latency. A proxy's fault changes only
// when it must, since Heal also clears its latency. c.mu is held.
func (c *Cluster) applyLocked() {
	for i, row := range c.routes {
		for j, p := range row {
			if p == nil {
				continue
			}
			want := routeUp
			switch {
			case c.killed[i] || c.killed[j]:
				want = routeRefused
			case c.isolated[i] > 0 || c.isolated[j] > 0:
				want = routeBlackholed
			}
			if want != c.faults[i][j] {
				c.faults[i][j] = want
				switch want {
				case routeUp:
					p.Heal()
				case routeBlackholed:
					p.Blackhole()
				case routeRefused:
					p.Refuse()
				}
			}
			p.Latency(c.latency)
		}
	}
}

// proxy forwards TCP connections to its target until cut; it refuses
// them while it has none.
type proxy struct {
	ln     net.Listener
	drop   atomic.Bool // clients' bytes are read and thrown away
	mu     sync.Mutex
	target string
	conns  map[net.Conn]bool
	cutOff bool
}

func newProxy(tb testing.TB) *proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxy{ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	tb.Cleanup(p.cut)
	return p
}

// to sets the address the proxy forwards to.
func (p *proxy) to(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		if target == "" {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			continue
		}
		go p.pipe(in, out, false)
		go p.pipe(out, in, true)
	}
}

// track registers a proxied pair; false (both closed) once cut.
func (p *proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutOff {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a], p.conns[b] = true, true
	return true
}

// pipe copies src to dst; from a client (up), nothing while drop is set.
func (p *proxy) pipe(dst, src net.Conn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !(up && p.drop.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

// cut closes the listener and every connection through it.
func (p *proxy) cut() {
	p.mu.Lock()
	p.cutOff = true
	p.ln.Close()
	p.mu.Unlock()
	p.closeConns()
}

// closeConns closes every connection through p.
func (p *proxy) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Proxy forwards TCP connections to one address, for tests that break a
// client's connection the way a dying server does.
type Proxy struct{ p *proxy }

// NewProxy starts a Proxy to target (host:port), closed at cleanup.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p := newProxy(tb)
	p.to(target)
	return &Proxy{p}
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.p.addr() }

// Drop makes the proxy read and throw away what clients write (on) or
// forward it again: written, never read, as by a server about to die.
func (p *Proxy) Drop(on bool) { p.p.drop.Store(on) }

// Break closes the connections the proxy carries; it accepts new ones.
func (p *Proxy) Break() { p.p.closeConns() }
