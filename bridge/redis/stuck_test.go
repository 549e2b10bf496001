package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/redis"
	"github.com/cluster-serving/cluster-serving/bridge/redis/redistest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// flakyMesh fails the Enqueue of every request that fails() picks with a
// transient error (503), until heal is called; it stores the others.
type flakyMesh struct {
	*fakeMesh
	mu     sync.Mutex
	fails  func(mesh.Request) bool
	tries  map[string]int
	healed bool
}

func newFlakyMesh(fails func(mesh.Request) bool) *flakyMesh {
	return &flakyMesh{fakeMesh: newFakeMesh(0), fails: fails, tries: map[string]int{}}
}

func (f *flakyMesh) Enqueue(ctx context.Context, job string, req mesh.Request, subject string) error {
	f.mu.Lock()
	f.tries[req.URI]++
	failing := !f.healed && f.fails(req)
	f.mu.Unlock()
	if failing {
		return fmt.Errorf("mesh: enqueue to %s: no response from stream: %w", job, wire.ErrBusy)
	}
	return f.fakeMesh.Enqueue(ctx, job, req, subject)
}

func (f *flakyMesh) heal() {
	f.mu.Lock()
	f.healed = true
	f.mu.Unlock()
}

func (f *flakyMesh) triesOf(uri string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries[uri]
}

// One entry that keeps failing for a transient reason holds the rest of
// its block no longer than its own retry (Timeout): they are acked and
// deleted while it stays pending and is tried again.
func TestFailingEntryDoesNotHoldItsBlock(t *testing.T) {
	addr, rdb := redistest.Start(t)
	f := newFlakyMesh(func(r mesh.Request) bool { return r.URI == "slow" })
	d, err := redis.New(redis.Config{Addr: addr, Job: "slow", Timeout: 300 * time.Millisecond,
		RetryInterval: 10 * time.Millisecond, Rescan: 50 * time.Millisecond}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, d.Run)
	ctx := context.Background()
	for _, uri := range []string{"a", "slow", "b", "c"} {
		enqueue(t, rdb, "slow", uri, "data", false)
	}
	meshtest.WaitFor(t, "the others acked while slow fails", func() bool { return rdb.XLen(ctx, "slow").Val() == 1 })
	meshtest.WaitFor(t, "slow retried after its block", func() bool { return f.triesOf("slow") > 2*300/10 })
	// New entries go on while it still fails.
	enqueue(t, rdb, "slow", "d", "data", false)
	meshtest.WaitFor(t, "d served while slow fails", func() bool { return len(f.requests()) == 4 && rdb.XLen(ctx, "slow").Val() == 1 })
	if p := rdb.XPending(ctx, "slow", "serving").Val(); p.Count != 1 {
		t.Errorf("got %d pending, want 1 (slow)", p.Count)
	}
	f.heal()
	waitEmpty(t, rdb, "slow")
	if got := len(f.requests()); got != 5 {
		t.Errorf("got %d requests stored, want 5", got)
	}
}

// While the mesh takes nothing (NATS away), the door retries the entries
// it holds instead of reading more: two blocks stay pending, not the stream.
// Once the mesh is back every entry is served.
func TestMeshAwayHoldsOneBlock(t *testing.T) {
	addr, rdb := redistest.Start(t)
	f := newFlakyMesh(func(mesh.Request) bool { return true })
	logs := &logBuffer{}
	d, err := redis.New(redis.Config{Addr: addr, Job: "away", Batch: 4, Timeout: 100 * time.Millisecond,
		RetryInterval: 10 * time.Millisecond, Rescan: 50 * time.Millisecond}, f, newTextLogger(logs))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, d.Run)
	ctx := context.Background()
	for i := range 20 {
		enqueue(t, rdb, "away", fmt.Sprint("u", i), "data", false)
	}
	meshtest.WaitFor(t, "several retries of the first block", func() bool { return f.triesOf("u0") > 50 })
	if p := rdb.XPending(ctx, "away", "serving").Val(); p.Count != 8 {
		t.Errorf("got %d pending while the mesh is away, want two blocks (8)", p.Count)
	}
	f.heal()
	waitEmpty(t, rdb, "away")
	if got := len(f.requests()); got != 20 {
		t.Errorf("got %d requests stored, want 20", got)
	}
	if n := logs.count("entries stay pending and are retried"); n != 1 {
		t.Errorf("got %d lines for the retries, want 1:\n%v", n, logs.lines())
	}
}
