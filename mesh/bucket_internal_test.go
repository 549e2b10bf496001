package mesh

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// watchedBucket opens job's result bucket on a fresh server and runs its
// Watch until the index serves.
func watchedBucket(t *testing.T) *ResultBucket {
	t.Helper()
	b, _, _ := watchedBucketOn(t, meshtest.StartServer(t))
	return b
}

// watchedBucketOn is watchedBucket on s; it also returns the connection
// and the stop of Watch.
func watchedBucketOn(t *testing.T, s *embedded.Server) (*ResultBucket, *nats.Conn, func()) {
	t.Helper()
	nc := meshtest.Connect(t, s)
	c, err := NewClient(nc, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := c.ResultBucket(context.Background(), "job", StreamConfig{Storage: jetstream.MemoryStorage}, 0)
	if err != nil {
		t.Fatal(err)
	}
	stop := meshtest.Run(t, b.Watch)
	meshtest.WaitFor(t, "the index", func() bool { _, ok := b.indexed(); return ok })
	return b, nc, stop
}

// putBare puts value under uri, then leaves the index's entry of it as
// the watcher's event of the put does (no value) when bare, and returns
// the key and the put's revision.
func putBare(t *testing.T, b *ResultBucket, uri, value string, bare bool) (string, uint64) {
	t.Helper()
	if err := b.Put(context.Background(), uri, []byte(value), "id-"+uri); err != nil {
		t.Fatal(err)
	}
	key, _ := BucketKey(uri)
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.keys[key]
	if bare {
		b.cached -= len(st.value)
		b.keys[key] = keyState{rev: st.rev}
	}
	return key, st.rev
}

// TestBucketIndexKeepsDeletes: the watcher's event of a put, or the put's
// acknowledgement, may reach the index after the client read and deleted
// the result (the delete's marker acknowledged first). Neither brings the
// key back: the index keeps a tombstone of the delete. Without it the
// door listed the key again and clients read the result twice.
func TestBucketIndexKeepsDeletes(t *testing.T) {
	b := watchedBucket(t)
	ctx := context.Background()
	key, rev := putBare(t, b, "u", "v", false)
	if ok, err := b.Delete(ctx, "u"); !ok || err != nil {
		t.Fatalf("Delete: got %v, %v, want true, nil", ok, err)
	}
	b.note(key, rev, true, nil, "")         // the watcher's event of the put, late
	b.note(key, rev, true, []byte("v"), "") // a duplicate put's acknowledgement
	if uris, err := b.URIs(ctx); err != nil || len(uris) != 0 {
		t.Errorf("URIs after the delete and a late put event: got %q, %v, want none", uris, err)
	}
	if v, ok, err := b.Get(ctx, "u"); ok || err != nil {
		t.Errorf("Get after the delete: got %q, %v, %v, want nothing", v, ok, err)
	}
	// The marker lands (Watch settles it): the bucket has no result.
	meshtest.WaitFor(t, "the delete marker", func() bool {
		m, err := b.last(ctx, key)
		return err == nil && m != nil && m.Header.Get(kvOperationHeader) == "DEL"
	})
}

// TestBucketIndexLearnsLateValues: the watcher may list a put before its
// acknowledgement reaches this process; the acknowledgement (same
// revision) still gives the index the value, so that the client's HGET
// is answered from memory. A key the index has no value of is read from
// the stream's leader, never from a replica's direct get that may lag
// the acknowledged put: an HGET that missed was followed by the DEL of
// the client's pipeline, which deleted the unread result.
func TestBucketIndexLearnsLateValues(t *testing.T) {
	b := watchedBucket(t)
	ctx := context.Background()
	key, rev := putBare(t, b, "late", "v1", true)
	b.note(key, rev, true, []byte("v1"), "") // the put's acknowledgement
	if got, _, _ := b.lookup(key); string(got.value) != "v1" {
		t.Errorf("value after the acknowledgement of a put the watcher listed: got %q, want v1", got.value)
	}

	key, _ = putBare(t, b, "other", "v2", true)
	if v, ok, err := b.Get(ctx, "other"); !ok || err != nil || string(v) != "v2" {
		t.Fatalf("Get of a key the index has no value of: got %q, %v, %v, want v2", v, ok, err)
	}
	if got, _, _ := b.lookup(key); string(got.value) != "v2" {
		t.Errorf("value kept after reading the leader: got %q, want v2", got.value)
	}
	if uris, _ := b.URIs(ctx); !slices.Equal(uris, []string{"late", "other"}) {
		t.Errorf("URIs: got %q, want late and other", uris)
	}
}

// TestResultBucketDeleteInElection kills the leader of a replicated
// bucket's stream: a DEL during the election that follows answers at
// once, the key is no longer listed nor read, and its marker lands once
// a new leader is elected. A DEL that failed there left the key listed,
// and clients polling KEYS read the result again. A result put during
// the election is listed and read from memory all the same (clients
// waited out the election), and once read and deleted, putting it again
// (its result delivered again) does not bring it back. The watcher goes
// on after the election.
func TestResultBucketDeleteInElection(t *testing.T) {
	cl := meshtest.StartCluster(t, 3)
	ctx := context.Background()
	open := func() *ResultBucket {
		c, err := NewClient(cl.Connect(t), ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		b, err := c.ResultBucket(ctx, "job", StreamConfig{Replicas: 3, Storage: jetstream.MemoryStorage}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b, other := open(), open()
	meshtest.Run(t, b.Watch)
	meshtest.WaitFor(t, "the index", func() bool { _, ok := b.indexed(); return ok })
	if err := b.Put(ctx, "u", []byte("v"), "m1"); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(cl.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "KV_"+BucketName("job"))
	if err != nil || s.CachedInfo().Cluster == nil {
		t.Fatalf("bucket stream: %v", err)
	}
	cl.Kill(cl.Index(s.CachedInfo().Cluster.Leader))
	if ok, err := b.Delete(ctx, "u"); !ok || err != nil {
		t.Fatalf("Delete in the election: got %v, %v, want true, nil", ok, err)
	}
	if uris, err := b.URIs(ctx); err != nil || len(uris) != 0 {
		t.Errorf("URIs after the delete: got %q, %v, want none", uris, err)
	}
	if v, ok, err := b.Get(ctx, "u"); ok || err != nil {
		t.Errorf("Get after the delete: got %q, %v, %v, want nothing", v, ok, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = b.Put(short, "w", []byte("v2"), "m2") // fails or is slow: listed anyway
	if uris, err := b.URIs(ctx); err != nil || !slices.Equal(uris, []string{"w"}) {
		t.Errorf("URIs after a put in the election: got %q, %v, want w", uris, err)
	}
	if v, ok, err := b.Get(ctx, "w"); !ok || err != nil || string(v) != "v2" {
		t.Errorf("Get of a put in the election: got %q, %v, %v, want v2", v, ok, err)
	}
	if ok, err := b.Delete(ctx, "w"); !ok || err != nil {
		t.Fatalf("Delete of a put in the election: got %v, %v, want true, nil", ok, err)
	}
	meshtest.WaitFor(t, "the put again and the delete markers after the election", func() bool {
		if b.Put(ctx, "w", []byte("v2"), "m2") != nil {
			return false
		}
		_, okU, errU := other.Get(ctx, "u")
		_, okW, errW := other.Get(ctx, "w")
		return errU == nil && errW == nil && !okU && !okW
	})
	if uris, err := b.URIs(ctx); err != nil || len(uris) != 0 {
		t.Errorf("URIs at the end: got %q, %v, want none", uris, err)
	}
	// The watcher goes on past the election: another process's put is
	// listed.
	if err := other.Put(ctx, "x", []byte("v3"), "m3"); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "another process's put after the election", func() bool {
		keys, ok := b.indexed()
		return ok && slices.Equal(keys, []string{"x"})
	})
}

// TestBucketGetWhileReconnecting: a key the index has no value of is
// read from the stream's leader; while the connection to NATS is down
// that read fails at once. It waited for its timeout (5s then), and the
// client's whole poll (KEYS, HGET, DEL) with it.
func TestBucketGetWhileReconnecting(t *testing.T) {
	s := meshtest.StartServer(t)
	b, nc, stop := watchedBucketOn(t, s)
	putBare(t, b, "u", "v", true)
	stop()
	s.Shutdown()
	meshtest.WaitFor(t, "the disconnect", func() bool { return !nc.IsConnected() })
	if v, ok, err := b.Get(context.Background(), "u"); !errors.Is(err, errDisconnected) {
		t.Errorf("Get while disconnected: got %q, %v, %v, want %v", v, ok, err, errDisconnected)
	}
}

// TestBucketIndexKeepsOfferedValue: a result whose put was slow is
// served from memory (offer); the watcher's event of that put, landed
// after all, keeps the value, so that HGET needs no read from a stream
// that may be electing a leader. Once the result is read and deleted,
// putting it again does nothing.
func TestBucketIndexKeepsOfferedValue(t *testing.T) {
	b := watchedBucket(t)
	ctx := context.Background()
	key, _ := BucketKey("slow")
	if !b.offer(key, []byte("v"), "m1") {
		t.Fatal("offer of a new key: got false, want true")
	}
	if uris, _ := b.URIs(ctx); !slices.Equal(uris, []string{"slow"}) {
		t.Errorf("URIs of an offered result: got %q, want slow", uris)
	}
	b.note(key, 7, true, nil, "") // the watcher's event of the put
	if st, _, _ := b.lookup(key); string(st.value) != "v" || st.rev != 7 {
		t.Errorf("index after the put's event: got %+v, want value v at revision 7", st)
	}
	if ok, err := b.Delete(ctx, "slow"); !ok || err != nil {
		t.Fatalf("Delete: got %v, %v, want true, nil", ok, err)
	}
	if err := b.Put(ctx, "slow", []byte("v"), "m1"); err != nil {
		t.Fatal(err)
	}
	if uris, _ := b.URIs(ctx); len(uris) != 0 {
		t.Errorf("URIs after the result was read, deleted and put again: got %q, want none", uris)
	}
}

// TestBucketDeleteLater: a delete held for its commit hides the key at
// once; committed unsent, the key and its value are back as they were
// and no marker is stored; committed sent, the marker lands.
func TestBucketDeleteLater(t *testing.T) {
	b := watchedBucket(t)
	ctx := context.Background()
	if err := b.Put(ctx, "u", []byte("v"), "m1"); err != nil {
		t.Fatal(err)
	}
	deleted, commit, err := b.DeleteLater(ctx, "u")
	if !deleted || err != nil {
		t.Fatalf("DeleteLater: got %v, %v, want true", deleted, err)
	}
	if uris, _ := b.URIs(ctx); len(uris) != 0 {
		t.Errorf("URIs while the delete is held: got %q, want none", uris)
	}
	time.Sleep(2 * markerPause) // settleDeletes leaves a held delete alone
	commit(false)
	if v, ok, err := b.Get(ctx, "u"); !ok || err != nil || string(v) != "v" {
		t.Errorf("Get after the answer was not sent: got %q, %v, %v, want v", v, ok, err)
	}
	if m, err := b.last(ctx, mustKey(t, "u")); err != nil || m == nil || m.Header.Get(kvOperationHeader) != "" {
		t.Errorf("the bucket after an unsent delete: got %+v, %v, want the put", m, err)
	}
	deleted, commit, err = b.DeleteLater(ctx, "u")
	if !deleted || err != nil {
		t.Fatalf("DeleteLater again: got %v, %v, want true", deleted, err)
	}
	commit(true)
	meshtest.WaitFor(t, "the marker", func() bool {
		m, err := b.last(ctx, mustKey(t, "u"))
		return err == nil && m != nil && m.Header.Get(kvOperationHeader) == "DEL"
	})
	if v, ok, _ := b.Get(ctx, "u"); ok {
		t.Errorf("Get after the delete: got %q", v)
	}
}

func mustKey(t *testing.T, uri string) string {
	t.Helper()
	k, err := BucketKey(uri)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
