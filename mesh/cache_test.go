package mesh_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// cacheStream is the response cache bucket's stream info, failing the
// test when there is none.
func cacheStream(tb testing.TB, js jetstream.JetStream) *jetstream.StreamInfo {
	tb.Helper()
	s, err := js.Stream(context.Background(), "KV_"+mesh.CacheBucket)
	if err != nil {
		tb.Fatalf("the cache bucket's stream: %v", err)
	}
	return s.CachedInfo()
}

// TestCacheStoreLookup checks a door's cache end to end on a real
// server: the first lookup makes the bucket, with the bounds asked and
// the job's storage, as a cache (oldest entries go first); a store is
// found by another connection's cache, as another process's.
func TestCacheStoreLookup(t *testing.T) {
	s, nc := startStreams(t, mesh.StreamConfig{Job: "cj", Storage: jetstream.MemoryStorage})
	ctx := context.Background()
	door := newCache(t, nc, mesh.CacheConfig{MaxBytes: 1 << 20, TTL: time.Minute})
	if _, hit := door.Lookup(ctx, "cj", "k1"); hit {
		t.Fatal("a lookup in an empty cache hit")
	}
	info := cacheStream(t, newJS(t, nc))
	c := info.Config
	if c.MaxBytes != 1<<20 || c.MaxAge != time.Minute || c.Discard != jetstream.DiscardOld || c.Storage != jetstream.MemoryStorage || c.MaxMsgsPerSubject != 1 {
		t.Errorf("bucket: got max bytes %d, age %v, discard %v, storage %v, history %d; want 1 MiB, 1m, old, memory, 1",
			c.MaxBytes, c.MaxAge, c.Discard, c.Storage, c.MaxMsgsPerSubject)
	}
	worker := newCache(t, meshtest.Connect(t, s), mesh.CacheConfig{OpenOnly: true})
	worker.Job("cj").Store(ctx, "k1", []byte("outputs"))
	if got, hit := door.Job("cj").Lookup(ctx, "k1"); !hit || string(got) != "outputs" {
		t.Errorf("lookup after a store: got %q, %v; want outputs, true", got, hit)
	}
}

// TestCacheWorkerOnlyOpens checks that an OpenOnly cache (a worker's)
// never makes the bucket: its store is dropped until a door made it.
func TestCacheWorkerOnlyOpens(t *testing.T) {
	_, nc := startStreams(t, mesh.StreamConfig{Job: "cj", Storage: jetstream.MemoryStorage})
	worker := newCache(t, nc, mesh.CacheConfig{OpenOnly: true})
	worker.Store(context.Background(), "cj", "k", []byte("v"))
	if _, err := newJS(t, nc).KeyValue(context.Background(), mesh.CacheBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("after a worker's store: got %v, want no bucket", err)
	}
}

// TestCacheBounds checks the bucket's bounds: a value larger than the
// bucket takes is not kept (and the cache goes on), and once the bucket
// is full the oldest entries go, not the new ones.
func TestCacheBounds(t *testing.T) {
	_, nc := startStreams(t, mesh.StreamConfig{Job: "cj", Storage: jetstream.MemoryStorage})
	ctx := context.Background()
	const maxBytes = 64 << 10
	c := newCache(t, nc, mesh.CacheConfig{MaxBytes: maxBytes})
	c.Store(ctx, "cj", "huge", bytes.Repeat([]byte{1}, maxBytes+1))
	if _, hit := c.Lookup(ctx, "cj", "huge"); hit {
		t.Error("a value larger than the bucket was kept")
	}
	value := bytes.Repeat([]byte{2}, 1<<10)
	for i := range 200 {
		c.Store(ctx, "cj", "k"+strconv.Itoa(i), value)
	}
	if _, hit := c.Lookup(ctx, "cj", "k0"); hit {
		t.Error("the oldest entry is still there after 200 KiB went into a 64 KiB bucket")
	}
	if got, hit := c.Lookup(ctx, "cj", "k199"); !hit || !bytes.Equal(got, value) {
		t.Error("the newest entry is not there: a full bucket refused it")
	}
	if st := cacheStream(t, newJS(t, nc)).State; st.Bytes > maxBytes {
		t.Errorf("bucket holds %d bytes, bound %d", st.Bytes, maxBytes)
	}
}

// TestCacheResizes checks that a door whose config bounds the bucket
// otherwise applies its bounds.
func TestCacheResizes(t *testing.T) {
	s, nc := startStreams(t, mesh.StreamConfig{Job: "cj", Storage: jetstream.MemoryStorage})
	ctx := context.Background()
	for i, want := range []int64{1 << 20, 2 << 20} {
		c := newCache(t, meshtest.Connect(t, s), mesh.CacheConfig{MaxBytes: want})
		c.Lookup(ctx, "cj", "k")
		if got := cacheStream(t, newJS(t, nc)).Config.MaxBytes; got != want {
			t.Errorf("door %d: bucket bound %d, want %d", i, got, want)
		}
	}
}

// TestCacheOutageIsAMiss checks that a cache that cannot reach its
// bucket misses and drops stores, never fails or panics: a bucket
// deleted under it (made again by the door once its backoff passed), a
// closed connection, a nil Cache.
func TestCacheOutageIsAMiss(t *testing.T) {
	s, nc := startStreams(t, mesh.StreamConfig{Job: "cj", Storage: jetstream.MemoryStorage})
	ctx := context.Background()
	c := newCache(t, nc, mesh.CacheConfig{})
	c.Store(ctx, "cj", "k", []byte("v"))
	if _, hit := c.Lookup(ctx, "cj", "k"); !hit {
		t.Fatal("no hit before the outage")
	}
	if err := newJS(t, nc).DeleteKeyValue(ctx, mesh.CacheBucket); err != nil {
		t.Fatal(err)
	}
	if _, hit := c.Lookup(ctx, "cj", "k"); hit {
		t.Error("a lookup in a deleted bucket hit")
	}
	c.Store(ctx, "cj", "k", []byte("v")) // dropped
	meshtest.WaitFor(t, "the door's cache to make its bucket again", func() bool {
		c.Store(ctx, "cj", "k2", []byte("v2"))
		got, hit := c.Lookup(ctx, "cj", "k2")
		return hit && string(got) == "v2"
	})

	closed := meshtest.Connect(t, s)
	cc := newCache(t, closed, mesh.CacheConfig{})
	closed.Close()
	cc.Store(ctx, "cj", "k", []byte("v"))
	if _, hit := cc.Lookup(ctx, "cj", "k2"); hit {
		t.Error("a cache on a closed connection hit")
	}

	var none *mesh.Cache
	none.Store(ctx, "cj", "k", nil)
	none.Count("cj", true, time.Millisecond)
	if _, hit := none.Lookup(ctx, "cj", "k2"); hit || len(none.Counts()) != 0 {
		t.Error("a nil Cache hit or counted")
	}
}

// TestCacheCountsInStats checks that the hits and misses counted by the
// caches of two processes (connections) show, summed, in StatsOf, a hit
// also as a success, neither as an inference nor an execution.
func TestCacheCountsInStats(t *testing.T) {
	s, nc := startStreams(t, mesh.StreamConfig{Job: "cj", Storage: jetstream.MemoryStorage})
	for i, counts := range [][2]int{{2, 1}, {3, 4}} { // hits, misses
		c := newCache(t, meshtest.Connect(t, s), mesh.CacheConfig{})
		stop, err := c.ServeCounts()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		for range counts[0] {
			c.Count("cj", true, time.Millisecond)
		}
		for range counts[1] {
			c.Count("cj", false, 2*time.Millisecond)
		}
		c.Count("other", true, time.Millisecond)
		if got := c.Counts()["cj"]; got.CacheHit.Count != uint64(counts[0]) {
			t.Errorf("cache %d: counted %d hits, want %d", i, got.CacheHit.Count, counts[0])
		}
	}
	st, err := newClient(t, nc).Stats(context.Background(), "cj")
	if err != nil {
		t.Fatal(err)
	}
	want := mesh.InferStats{CacheHit: mesh.StatDuration{Count: 5, NS: uint64(5 * time.Millisecond)},
		CacheMiss: mesh.StatDuration{Count: 5, NS: uint64(10 * time.Millisecond)},
		Success:   mesh.StatDuration{Count: 5, NS: uint64(5 * time.Millisecond)}}
	got := st.InferStats
	if got.CacheHit != want.CacheHit || got.CacheMiss != want.CacheMiss || got.Success != want.Success || got.InferenceCount != 0 || got.ExecutionCount != 0 {
		t.Errorf("stats: got hit %+v miss %+v success %+v inferences %d executions %d; want hit %+v miss %+v success %+v and no inference",
			got.CacheHit, got.CacheMiss, got.Success, got.InferenceCount, got.ExecutionCount, want.CacheHit, want.CacheMiss, want.Success)
	}
	if got.LastInference == 0 {
		t.Error("a hit left last_inference 0")
	}
	status, err := mesh.TakeStatus(context.Background(), nc, newJS(t, nc))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range status.Jobs {
		if j.Job == "cj" && (j.CacheHits != 5 || j.CacheMisses != 5) {
			t.Errorf("status of cj: %d hits, %d misses; want 5, 5", j.CacheHits, j.CacheMisses)
		}
	}
}

func TestCacheConfigValidate(t *testing.T) {
	for _, cfg := range []mesh.CacheConfig{{MaxBytes: -1}, {TTL: -time.Second}, {Timeout: -1}} {
		if _, err := mesh.NewCache(nil, cfg); !errors.Is(err, mesh.ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
