package door

import (
	"context"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// Cache is the mesh's response cache as the doors use it; *mesh.Cache
// implements it. It must be safe for concurrent use and never fail a
// request: a lookup it cannot answer is a miss.
type Cache interface {
	// Lookup returns the value stored under key (see
	// wire.CacheRequest), for a request of job; false for a miss.
	Lookup(ctx context.Context, job, key string) ([]byte, bool)
	// Count counts one lookup of job's, a hit or a miss, which took
	// took, where the mesh's statistics find it (mesh.Client.StatsOf).
	Count(job string, hit bool, took time.Duration)
}

// CacheEnabled reports whether the answers of m come from the response
// cache: its config says response_cache { enable: true } (its
// config.pbtxt, or config.yaml's responseCache key), and its workers
// store what they run. An ensemble's or a built-in step's do not (yet):
// for them the door would only ever miss.
func CacheEnabled(m Model) bool {
	c := m.Config
	return c.GetResponseCache().GetEnable() && c.GetPlatform() != "ensemble" && c.GetEnsembleScheduling() == nil && c.GetBackend() != prepost.Backend
}

// Submit is the one inference step of both doors: it sends req to m's
// job through sub and returns the worker's result, unless the response
// cache answers it. When c.Cache is set and m enables the cache
// (CacheEnabled), the door decodes req with m's codecs (wire), looks the
// request's key up and, on a hit, answers the stored outputs encoded for
// this very request (its id, its binary or raw outputs) without a trip to
// a worker; the worker that answers a miss stores its outputs. A body
// the door cannot decode, and a cache that cannot answer, go to the
// worker as any request does. Every lookup is counted (Cache.Count, the
// cache metrics). A model that does not enable the cache costs nothing:
// no decode, no hash. Its errors are sub's.
func (c *Config) Submit(ctx context.Context, sub Submitter, m Model, req mesh.Request) (mesh.Result, error) {
	if c.Cache != nil && CacheEnabled(m) {
		if body, ok := c.cached(ctx, m, req); ok {
			return mesh.Result{Body: body, Status: status.OK}, nil
		}
	}
	return sub.Submit(ctx, m.Job, req)
}

// cached answers req from the cache: its answer and true on a hit. A
// request of a format the cache does not keep, or whose body does not
// decode, is no lookup and is not counted.
func (c *Config) cached(ctx context.Context, m Model, req mesh.Request) ([]byte, bool) {
	start := time.Now()
	spec := wire.Spec{Model: wire.Model{Name: m.Name, Version: m.Version}, Info: m.Info}
	cr, err := wire.NewCacheRequest(ctx, req.ContentType, req.Body, spec)
	if err != nil {
		return nil, false
	}
	var answer []byte
	value, hit := c.Cache.Lookup(ctx, m.Job, cr.Key)
	if hit {
		// A value that cannot be read is a miss: the worker answers and
		// stores it again.
		answer, err = cr.Answer(value)
		hit = err == nil
	}
	took := time.Since(start)
	c.Cache.Count(m.Job, hit, took)
	c.Metrics.RecordCache(ctx, m.Job, m.Name, hit, took)
	return answer, hit
}
