package meshtest

import (
	"testing"
	"time"
)

// routeCounts returns how many route connections the servers hold, each
// counted at both ends, and how many connections the route proxies carry.
func (c *Cluster) routeCounts() (routes, proxied int) {
	for _, s := range c.servers {
		routes += s.NumRoutes()
	}
	for _, row := range c.routes {
		for _, p := range row {
			if p != nil {
				proxied += p.Conns()
			}
		}
	}
	return routes, proxied
}

// TestClusterRoutesRunThroughProxies checks that every route connection
// runs through a route proxy (none dialled from gossip to a real cluster
// port), before a partition and after it heals.
func TestClusterRoutesRunThroughProxies(t *testing.T) {
	c := StartClusterWith(t, ClusterConfig{RoutePing: time.Second})
	// Full mesh: each server holds a route pool to both peers.
	whole := func() bool {
		for _, s := range c.servers {
			rz, err := s.Routez(nil)
			if err != nil {
				return false
			}
			peers := map[string]bool{}
			for _, r := range rz.Routes {
				peers[r.RemoteName] = true
			}
			if len(peers) != len(c.servers)-1 {
				return false
			}
		}
		return true
	}
	throughProxies := func() bool {
		routes, proxied := c.routeCounts()
		return whole() && routes == 2*proxied
	}
	WaitFor(t, "every route through a proxy", throughProxies)
	routes, proxied := c.routeCounts()
	t.Logf("%d route connections at their ends, %d through proxies", routes, proxied)

	heal := c.Isolate(0)
	WaitFor(t, "server 0 without routes", func() bool { return c.servers[0].NumRoutes() == 0 })
	heal()
	before := routes
	WaitFor(t, "every route back, through a proxy", func() bool {
		routes, _ := c.routeCounts()
		return routes == before && throughProxies()
	})
	routes, proxied = c.routeCounts()
	t.Logf("after the heal: %d route connections at their ends, %d through proxies", routes, proxied)
}

// TestRouteLatencyDelaysRoutes checks that the servers measure, on every
// route, a round trip of at least twice the latency set.
func TestRouteLatencyDelaysRoutes(t *testing.T) {
	c := StartClusterWith(t, ClusterConfig{RoutePing: 500 * time.Millisecond})
	const d = 50 * time.Millisecond
	c.RouteLatency(d)
	WaitFor(t, "every route's round trip at least 2×latency", func() bool {
		for _, s := range c.servers {
			rz, err := s.Routez(nil)
			if err != nil || len(rz.Routes) == 0 {
				return false
			}
			for _, r := range rz.Routes {
				if rtt, err := time.ParseDuration(r.RTT); err != nil || rtt < 2*d {
					return false
				}
			}
		}
		return true
	})
	c.RouteLatency(0)
}
