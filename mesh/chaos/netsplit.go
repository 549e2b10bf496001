package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest/netfault"
)

// routeProxy carries the routes server from dials to server to.
type routeProxy struct {
	from, to int
	*netfault.Proxy
}

// routesOf is the route URLs of server i and what its cluster block adds.
// Without Options.Routes, every server's route port. With it, a proxy of
// its own to each other server: i's routes reach j only through
// proxy (i→j), and j's reach i through (j→i), so that a fault set on
// every proxy to and from a server cuts it off. The servers advertise an
// address nobody listens on, so that none learns another's real route
// port from the gossip and dials it past the proxies.
func (c *Cluster) routesOf(i int) (routes []string, extra string, err error) {
	if !c.opt.Routes {
		for _, n := range c.NATS {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", n.route))
		}
		return routes, "", nil
	}
	for j, n := range c.NATS {
		if j == i {
			continue
		}
		p, err := netfault.Listen("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", n.route))
		if err != nil {
			return nil, "", err
		}
		c.routes = append(c.routes, &routeProxy{from: i, to: j, Proxy: p})
		routes = append(routes, "nats-route://"+p.Addr())
	}
	return routes, `, advertise: "127.0.0.1:1"`, nil
}

// pingLine makes the servers notice a route that passes nothing (a
// partition that drops packets) within seconds: two missed pings 2 s
// apart, where the default is two minutes.
func (c *Cluster) pingLine() string {
	if !c.opt.Routes {
		return ""
	}
	return "ping_interval: \"2s\"\nping_max: 2\n"
}

func (c *Cluster) closeNet() {
	for _, p := range c.routes {
		_ = p.Close()
	}
}

// touching runs f on every route proxy to or from server i (every proxy
// when i < 0).
func (c *Cluster) touching(i int, f func(*netfault.Proxy)) {
	for _, p := range c.routes {
		if i < 0 || p.from == i || p.to == i {
			f(p.Proxy)
		}
	}
}

// Isolate cuts server i off the other two (a partition that drops every
// packet on its routes) until heal; its clients keep their connections.
func (c *Cluster) Isolate(i int) (heal func()) {
	c.touching(i, (*netfault.Proxy).Blackhole)
	return func() { c.touching(i, (*netfault.Proxy).Heal) }
}

// nodeIndex is the index of the server named name, or -1.
func (c *Cluster) nodeIndex(name string) int {
	for i, n := range c.NATS {
		if n.name == name {
			return i
		}
	}
	return -1
}

// errNoRoutes is a network fault's error on a cluster without proxies.
var errNoRoutes = fmt.Errorf("chaos: the cluster's routes have no proxies (Options.Routes)")

// Partition isolates the leader of the job's work queue for hold, then
// heals: the majority elects new leaders and serves (target: a gap under
// 5 s on every door), and nothing the minority acknowledged is lost.
func Partition(hold time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("partition of the leader %v", hold), GapTarget: 5 * time.Second,
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			if len(c.routes) == 0 {
				return "", errNoRoutes
			}
			leader, _ := c.WorkLeader(ctx)
			i := max(c.nodeIndex(leader), 0)
			heal := c.Isolate(i)
			time.Sleep(hold)
			heal()
			return c.NATS[i].name, c.waitRoutes(ctx)
		}}
}

// RouteLatency adds d to every chunk on every route for hold.
func RouteLatency(d, hold time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("route latency %v for %v", d, hold), GapTarget: 5 * time.Second,
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			if len(c.routes) == 0 {
				return "", errNoRoutes
			}
			c.touching(-1, func(p *netfault.Proxy) { p.Latency(d) })
			time.Sleep(hold)
			c.touching(-1, (*netfault.Proxy).Heal)
			return "", c.waitRoutes(ctx)
		}}
}

// RouteFlap cuts every route connection times times, every period: the
// servers dial again at once, and leaders may move at every cut.
func RouteFlap(times int, period time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("routes cut %d× every %v", times, period), GapTarget: 5 * time.Second,
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			if len(c.routes) == 0 {
				return "", errNoRoutes
			}
			for range times {
				c.touching(-1, (*netfault.Proxy).Cut)
				time.Sleep(period)
			}
			return "", c.waitRoutes(ctx)
		}}
}

// waitRoutes waits until every server is healthy again (its routes up,
// JetStream current).
func (c *Cluster) waitRoutes(ctx context.Context) error {
	for _, n := range c.NATS {
		if err := c.waitNATSNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}
