package serving

import (
	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// The response cache on a node: a door's cache looks answers up, makes
// the bucket with the config's bounds (File.CacheConfig) and answers its
// counts on the mesh; a worker's only stores, in the bucket as a door
// made it (mesh.CacheConfig.OpenOnly).

// ResponseCache is a door's response cache over the node's connection,
// sized by cfg, its counts answered on the mesh (mesh.Cache.ServeCounts)
// for as long as the connection lives: what cmd gives each HTTP and gRPC
// door (door.Config.Cache). A cache whose counts cannot be served still
// looks up; one that cannot be made at all (an invalid cfg, which
// ParseFile refuses first) is nil, which misses. Either is logged.
func (n *Node) ResponseCache(cfg mesh.CacheConfig) *mesh.Cache {
	cfg.Logger = n.log
	c, err := mesh.NewCache(n.nc, cfg)
	if err != nil {
		n.log.Error("response cache off", "err", err)
		return nil
	}
	if _, err := c.ServeCounts(); err != nil {
		n.log.Warn("response cache: its hits will not show in the statistics", "err", err)
	}
	return c
}

// cachedPredictor is p storing its answers in the response cache over
// nc when m enables it (Model.CacheEnabled), as the doors look them up.
func cachedPredictor(p *wire.Predictor, m Model, nc *nats.Conn) mesh.Predictor {
	if !m.CacheEnabled() || nc == nil {
		return p
	}
	c, err := mesh.NewCache(nc, mesh.CacheConfig{OpenOnly: true})
	if err != nil {
		return p // a zero config is valid
	}
	return p.WithCache(c.Job(m.Job))
}
