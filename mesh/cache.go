package mesh

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// The response cache (Triton's response_cache) of the whole mesh: one
// JetStream key-value bucket, CacheBucket, that every door looks answers
// up in and every worker stores them in (keys and values are
// infer/wire's: see wire.Cache). It is bounded in bytes and each entry
// expires TTL after it was stored; once full, the oldest entries go
// first (unlike a plain key-value bucket, which refuses new ones). Its
// storage and replicas are those of the first job whose door made it
// (its work streams'), as the CS_BODIES bucket's.
//
// Hits are counted where they happen, at the doors, and each process
// answers its counts on the micro service CacheServiceName; StatsOf sums
// them with the workers', so the statistics extension shows the hits of
// every door of the mesh. The counts go with the process, as a worker's
// go with the worker. Counting at the doors keeps a hit off the mesh
// altogether: sending each hit to a worker's counters would cost the
// trip the cache saves.
const (
	// CacheBucket is the response cache's key-value bucket (its stream
	// is KV_CS_CACHE).
	CacheBucket = "CS_CACHE"
	// CacheServiceName is the micro service of each process whose doors
	// look answers up; its stats endpoint data is the process's counts by
	// job (CacheCounts).
	CacheServiceName = "cluster-serving-cache"
	// CacheCountsSubject is the subject of that service's counts endpoint
	// (a request reaches one process; $SRV.STATS.cluster-serving-cache
	// hears from all).
	CacheCountsSubject = SubjectPrefix + ".cache.counts"

	// DefaultCacheMaxBytes, DefaultCacheTTL and DefaultCacheTimeout are
	// CacheConfig's defaults.
	DefaultCacheMaxBytes = 256 << 20
	DefaultCacheTTL      = 10 * time.Minute
	DefaultCacheTimeout  = 250 * time.Millisecond

	// cacheBackoff is how long a Cache misses without asking after the
	// bucket failed it: an outage costs one timeout a second, not one a
	// request.
	cacheBackoff = time.Second
	// cacheHeadroom is what a value leaves of max_payload for the
	// message's subject and headers.
	cacheHeadroom = 1 << 10
	// cacheOpenTimeout bounds opening (or making) the bucket, which the
	// request that finds it unopened waits for: once at start, and after
	// the bucket was deleted.
	cacheOpenTimeout = 2 * time.Second
)

// CacheConfig configures a Cache. The zero value means all defaults.
type CacheConfig struct {
	// MaxBytes bounds the bucket: past it the oldest entries go. Default
	// 256 MiB. It applies when a door makes the bucket, or finds it made
	// with other bounds.
	MaxBytes int64
	// TTL is how long an entry lives. Default 10 minutes.
	TTL time.Duration
	// Timeout bounds one lookup or store: a slower one is a miss, and
	// the cache is left alone for a second. Default 250 ms.
	Timeout time.Duration
	// OpenOnly uses the bucket as it is and never makes or resizes it:
	// a worker's, which stores only what a door (that made the bucket)
	// missed.
	OpenOnly bool
	// Logger receives the outage lines, at most one per cause every 10 s.
	// Default slog.Default().
	Logger *slog.Logger
}

// Validate reports a negative bound, wrapping ErrInvalidConfig.
func (c CacheConfig) Validate() error {
	return CheckLimits(ErrInvalidConfig, Limit{Name: "MaxBytes", Value: c.MaxBytes}, Limit{Name: "TTL", Value: c.TTL},
		Limit{Name: "Timeout", Value: c.Timeout})
}

// Cache is the mesh's response cache as one connection reaches it. Its
// methods are safe for concurrent use, and a nil *Cache misses and
// counts nothing. It never fails a request: an error of the bucket is a
// miss (Lookup) or a dropped value (Store), logged, and the cache is left
// alone for a second.
type Cache struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg CacheConfig
	log *telemetry.LogLimit

	mu       sync.Mutex
	kv       jetstream.KeyValue // nil until opened
	maxValue int                // the bucket's largest value
	opening  bool
	downTill atomic.Int64 // unix ns until which the cache is left alone

	cmu    sync.Mutex
	counts map[string]*InferStats
}

// errOpening is a lookup's while another opens the bucket: a miss, no
// outage.
var errOpening = errors.New("mesh: response cache bucket being opened")

// NewCache returns the response cache over nc. It validates cfg and
// does no I/O: the bucket is opened (by a door, made) at first use.
func NewCache(nc *nats.Conn, cfg CacheConfig) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultCacheMaxBytes)
	cfg.TTL = cmp.Or(cfg.TTL, DefaultCacheTTL)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultCacheTimeout)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Cache{nc: nc, js: js, cfg: cfg, log: telemetry.NewLogLimit(cfg.Logger, 0), counts: map[string]*InferStats{}}, nil
}

// Lookup returns the value stored under key, looked up for a request of
// job; false when there is none, the bucket is being opened or cannot
// answer within Timeout.
func (c *Cache) Lookup(ctx context.Context, job, key string) ([]byte, bool) {
	if c == nil || c.down() {
		return nil, false
	}
	kv, _, err := c.bucket(ctx, job)
	if err != nil {
		c.fail(ctx, "open", err)
		return nil, false
	}
	tctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	e, err := kv.Get(tctx, key)
	switch {
	case err == nil:
		return e.Value(), true
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, false
	}
	c.fail(ctx, "lookup", err)
	return nil, false
}

// Store keeps value under key, for a request of job, best effort: a
// value larger than the bucket takes is not cached, and an error of the
// bucket drops it.
func (c *Cache) Store(ctx context.Context, job, key string, value []byte) {
	if c == nil || c.down() {
		return
	}
	kv, maxValue, err := c.bucket(ctx, job)
	if err != nil {
		c.fail(ctx, "open", err)
		return
	}
	if len(value) > maxValue {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if _, err := kv.Put(tctx, key, value); err != nil {
		c.fail(ctx, "store", err)
	}
}

// JobCache is a Cache bound to one job: the wire.Cache of that job's
// Predictor.
type JobCache struct {
	c   *Cache
	job string
}

// Job returns c bound to job.
func (c *Cache) Job(job string) JobCache { return JobCache{c: c, job: job} }

// Lookup is Cache.Lookup for the bound job.
func (j JobCache) Lookup(ctx context.Context, key string) ([]byte, bool) {
	return j.c.Lookup(ctx, j.job, key)
}

// Store is Cache.Store for the bound job.
func (j JobCache) Store(ctx context.Context, key string, value []byte) {
	j.c.Store(ctx, j.job, key, value)
}

func (c *Cache) down() bool { return time.Now().UnixNano() < c.downTill.Load() }

// fail handles an error of the bucket met by a request whose ctx is
// ctx: it leaves the cache alone for cacheBackoff and logs the outage
// (LogLimit); a bucket gone is opened (by a door, made) again next time.
// errOpening, and the error of a request that ended (its caller went
// away), are no outage.
func (c *Cache) fail(ctx context.Context, op string, err error) {
	if errors.Is(err, errOpening) || ctx.Err() != nil {
		return
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		c.mu.Lock()
		c.kv = nil
		c.mu.Unlock()
	}
	c.downTill.Store(time.Now().Add(cacheBackoff).UnixNano())
	level := slog.LevelWarn
	if c.cfg.OpenOnly && errors.Is(err, jetstream.ErrBucketNotFound) {
		level = slog.LevelDebug // no door has looked anything up yet
	}
	c.log.Log(ctx, level, "response cache unavailable: its lookups miss and its stores are dropped for a second", err,
		"op", op, "bucket", CacheBucket)
}

// bucket returns the bucket and its largest value, opening it once; a
// door's Cache makes it with job's storage and replicas when it does not
// exist, and resizes it to MaxBytes and TTL when it has other bounds.
// While one caller opens it, the others get errOpening.
func (c *Cache) bucket(ctx context.Context, job string) (jetstream.KeyValue, int, error) {
	c.mu.Lock()
	if c.kv != nil || c.opening {
		kv, maxValue := c.kv, c.maxValue
		c.mu.Unlock()
		if kv == nil {
			return nil, 0, errOpening
		}
		return kv, maxValue, nil
	}
	c.opening = true
	c.mu.Unlock()
	kv, maxValue, err := c.open(ctx, job)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opening = false
	if err != nil {
		return nil, 0, fmt.Errorf("mesh: response cache bucket %s: %w", CacheBucket, err)
	}
	c.kv, c.maxValue = kv, maxValue
	return kv, maxValue, nil
}

// open opens the bucket (see bucket) and reads its largest value.
func (c *Cache) open(ctx context.Context, job string) (jetstream.KeyValue, int, error) {
	ctx, cancel := context.WithTimeout(ctx, cacheOpenTimeout)
	defer cancel()
	kv, err := c.js.KeyValue(ctx, CacheBucket)
	if !c.cfg.OpenOnly && (errors.Is(err, jetstream.ErrBucketNotFound) || err == nil && c.resize(ctx, kv)) {
		if _, err = c.js.CreateOrUpdateStream(ctx, c.streamConfig(ctx, job)); err == nil {
			kv, err = c.js.KeyValue(ctx, CacheBucket)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, err
	}
	maxValue := int(c.nc.MaxPayload()) - cacheHeadroom
	if s, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		if m := s.StreamInfo().Config.MaxMsgSize; m > 0 {
			maxValue = min(maxValue, int(m))
		}
	}
	return kv, maxValue, nil
}

// resize reports whether kv's bounds differ from the config's, or it
// refuses new entries when full (a bucket made as a plain one).
func (c *Cache) resize(ctx context.Context, kv jetstream.KeyValue) bool {
	st, err := kv.Status(ctx)
	if err != nil {
		return false
	}
	s, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return false
	}
	have := s.StreamInfo().Config
	return have.MaxBytes != c.cfg.MaxBytes || have.MaxAge != c.cfg.TTL || have.Discard != jetstream.DiscardOld
}

// streamConfig is the bucket's stream: a key-value bucket's (one value a
// key, direct gets) but for Discard, which drops the oldest entries when
// full, as a cache should; job's work stream gives its storage and
// replicas.
func (c *Cache) streamConfig(ctx context.Context, job string) jetstream.StreamConfig {
	maxValue := min(int64(c.nc.MaxPayload())-cacheHeadroom, c.cfg.MaxBytes)
	cfg := jetstream.StreamConfig{
		Name:              "KV_" + CacheBucket,
		Description:       "cluster-serving response cache (Triton's response_cache)",
		Subjects:          []string{"$KV." + CacheBucket + ".>"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          c.cfg.MaxBytes,
		MaxAge:            c.cfg.TTL,
		MaxMsgSize:        int32(min(maxValue, 1<<31-1)),
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Discard:           jetstream.DiscardOld,
		AllowRollup:       true,
		DenyDelete:        true,
		AllowDirect:       true,
		Duplicates:        min(2*time.Minute, c.cfg.TTL),
		Replicas:          1,
	}
	if s, err := c.js.Stream(ctx, PartitionStreamName(job, 0)); err == nil {
		cfg.Storage, cfg.Replicas = s.CachedInfo().Config.Storage, s.CachedInfo().Config.Replicas
	}
	return cfg
}

// Count counts one lookup of job's at a door: a hit (answered from the
// cache, a successful request as Triton counts it) or a miss, which took
// took.
func (c *Cache) Count(job string, hit bool, took time.Duration) {
	if c == nil {
		return
	}
	d := StatDuration{Count: 1, NS: uint64(took)}
	c.cmu.Lock()
	defer c.cmu.Unlock()
	st := c.counts[job]
	if st == nil {
		st = &InferStats{}
		c.counts[job] = st
	}
	if !hit {
		st.CacheMiss.add(d)
		return
	}
	st.CacheHit.add(d)
	st.Success.add(d)
	st.LastInference = uint64(time.Now().UnixMilli())
}

// Counts returns the lookups counted so far, by job: CacheHit, CacheMiss,
// and the hits in Success and LastInference.
func (c *Cache) Counts() map[string]InferStats {
	out := map[string]InferStats{}
	if c == nil {
		return out
	}
	c.cmu.Lock()
	defer c.cmu.Unlock()
	for job, st := range c.counts {
		out[job] = *st
	}
	return out
}

// ServeCounts answers c's Counts on the mesh (CacheServiceName), so that
// StatsOf sums them, until stop is called or the connection closes. It
// returns once the server knows the service.
func (c *Cache) ServeCounts() (stop func(), err error) {
	svc, err := micro.AddService(c.nc, micro.Config{
		Name:         CacheServiceName,
		Version:      "1.0.0",
		Description:  "cluster-serving response cache: a process's lookups by job",
		Metadata:     processMetadata(map[string]string{}),
		StatsHandler: func(*micro.Endpoint) any { return c.Counts() },
	})
	if err != nil {
		return nil, fmt.Errorf("mesh: register cache service: %w", err)
	}
	if err := svc.AddEndpoint("counts", micro.HandlerFunc(func(r micro.Request) {
		_ = r.RespondJSON(c.Counts())
	}), micro.WithEndpointSubject(CacheCountsSubject)); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("mesh: register cache counts endpoint: %w", err)
	}
	// The server has the service's subscriptions once this returns, so a
	// StatsOf right after hears from it.
	if err := c.nc.Flush(); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("mesh: register cache service: %w", err)
	}
	return func() { _ = svc.Stop() }, nil
}

// cacheCounts sums the counts of every process that answers them (see
// ServeCounts), waiting as StatsOf does.
func cacheCounts(ctx context.Context, nc *nats.Conn) (map[string]InferStats, error) {
	out := map[string]InferStats{}
	err := gather(ctx, nc, CacheServiceName, StatsWait, StatsQuiet, func(st micro.Stats) {
		for _, e := range st.Endpoints {
			var byJob map[string]InferStats
			if json.Unmarshal(e.Data, &byJob) != nil {
				continue
			}
			for job, s := range byJob {
				sum := out[job]
				sum.add(s)
				out[job] = sum
			}
		}
	})
	return out, err
}
