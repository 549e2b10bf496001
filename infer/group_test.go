package infer_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// These tests give the batcher a GroupWait of an hour: a runner whose
// wait for a group ran out would hang the test, so what ends each wait
// here is the group's members (arriving, leaving) or a full batch,
// never the clock.

// submitMembers submits, from a goroutine each, one one-row record for
// each member of ms, and waits for them.
func submitMembers(t *testing.T, b *infer.Batcher, ctxs []context.Context) {
	t.Helper()
	var wg sync.WaitGroup
	for i, ctx := range ctxs {
		wg.Go(func() {
			out, err := b.Submit(ctx, [][]infer.Tensor{rec(1, 2, float32(i))})
			if err != nil {
				t.Error(err)
				return
			}
			if got, want := out[0][0].Data.([]float32)[0], float32(2*i); got != want {
				t.Errorf("member %d: got %v, want %v", i, got, want)
			}
		})
	}
	wg.Wait()
}

// members returns the contexts of n members of g, and the members.
func members(g *infer.Group, n int) ([]context.Context, []*infer.Member) {
	ctxs, ms := make([]context.Context, n), make([]*infer.Member, n)
	for i := range n {
		ctxs[i], ms[i] = g.Member(context.Background())
	}
	return ctxs, ms
}

func TestGroupRunsAsOneBatch(t *testing.T) {
	tests := []struct {
		name string
		cfg  infer.BatcherConfig
		n    int
		want string // batch sizes, sorted
	}{
		{"whole group in one run", infer.BatcherConfig{Runners: 2, MaxBatch: 16}, 16, "[16]"},
		// A full batch runs at once; the rest wait for the others.
		{"MaxBatch cuts it", infer.BatcherConfig{Runners: 2, MaxBatch: 4}, 10, "[2 4 4]"},
		// A preferred size reached runs at once, as without groups.
		{"preferred size", infer.BatcherConfig{Runners: 1, MaxBatch: 8, Preferred: []int{4}}, 8, "[4 4]"},
		// HoldIdle's MaxWait still holds a group that arrived whole
		// until its batch is full.
		{"HoldIdle", infer.BatcherConfig{Runners: 1, MaxBatch: 3, MaxWait: time.Hour, HoldIdle: true}, 3, "[3]"},
		{"unbatchable runs each alone", infer.BatcherConfig{Runners: 2, Unbatchable: true}, 3, "[1 1 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log batchLog
			tt.cfg.GroupWait, tt.cfg.OnBatch = time.Hour, log.add
			b := infer.NewBatcher(tt.cfg, double)
			t.Cleanup(func() { b.Close() })
			ctxs, _ := members(infer.NewGroup(tt.n), tt.n)
			submitMembers(t, b, ctxs)
			got := log.get()
			sort.Ints(got)
			if fmt.Sprint(got) != tt.want {
				t.Errorf("batch sizes: got %v, want %s", got, tt.want)
			}
		})
	}
}

// TestGroupWaitsForNoneThatLeft: the others of a group stop waiting for
// a member that leaves, before or after they arrive, and a member that
// left waits for nobody when it arrives after all.
func TestGroupWaitsForNoneThatLeft(t *testing.T) {
	var log batchLog
	b := infer.NewBatcher(infer.BatcherConfig{Runners: 2, GroupWait: time.Hour, OnBatch: log.add}, double)
	t.Cleanup(func() { b.Close() })

	ctxs, ms := members(infer.NewGroup(4), 4)
	ms[3].Leave()
	submitMembers(t, b, ctxs[:3])
	wantBatches(t, &log, "[3]")

	ctxs, ms = members(infer.NewGroup(3), 3)
	done := make(chan struct{})
	go func() { submitMembers(t, b, ctxs[:2]); close(done) }()
	infertest.WaitFor(t, "two members queued", func() bool { return b.Len() == 2 })
	ms[2].Leave()
	<-done
	wantBatches(t, &log, "[3 2]")

	// Left, then came anyway (a worker's gate held it back): it runs
	// without waiting for the member still coming.
	ctxs, ms = members(infer.NewGroup(2), 2)
	ms[0].Leave()
	submitMembers(t, b, ctxs[:1])
	wantBatches(t, &log, "[3 2 1]")
}

// TestGroupOfOneIsNone: a lone request has no group, so it takes the
// fast path of a record that finds a runner idle.
func TestGroupOfOneIsNone(t *testing.T) {
	for _, n := range []int{-1, 0, 1} {
		g := infer.NewGroup(n)
		if g != nil {
			t.Fatalf("NewGroup(%d): got %v, want nil", n, g)
		}
		ctx, m := g.Member(context.Background())
		if m != nil || ctx != context.Background() {
			t.Errorf("nil group's Member: got %v and a new ctx, want nil and ctx as it was", m)
		}
		m.Leave() // the nil Member does nothing
	}
	var log batchLog
	b := infer.NewBatcher(infer.BatcherConfig{GroupWait: time.Hour, OnBatch: log.add}, double)
	t.Cleanup(func() { b.Close() })
	ctx, _ := infer.NewGroup(1).Member(context.Background())
	submitMembers(t, b, []context.Context{ctx})
	wantBatches(t, &log, "[1]")
}

// TestGroupMemberRefusedLeaves: a member whose records the batcher
// refuses (queue full) counts as gone; the others do not wait for it.
func TestGroupMemberRefusedLeaves(t *testing.T) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	b := infer.NewBatcher(infer.BatcherConfig{Runners: 1, QueueSize: 2, GroupWait: time.Hour}, gated(started, release))
	t.Cleanup(func() { b.Close() })
	busy := make(chan error, 1)
	go func() { _, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 0)}); busy <- err }()
	<-started // the runner is busy until release

	ctxs, _ := members(infer.NewGroup(2), 2)
	first := make(chan error, 1)
	go func() { _, err := b.Submit(ctxs[0], [][]infer.Tensor{rec(1, 2, 1)}); first <- err }()
	infertest.WaitFor(t, "the first member queued", func() bool { return b.Len() == 1 })
	if _, err := b.Submit(ctxs[1], [][]infer.Tensor{rec(1, 2, 2), rec(1, 2, 3)}); !errors.Is(err, infer.ErrQueueFull) {
		t.Fatalf("second member: got %v, want ErrQueueFull", err)
	}
	close(release)
	for _, c := range []chan error{busy, first} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupWaitRunsOut: a member that never comes and never leaves
// holds the others only GroupWait after the group's last news.
func TestGroupWaitRunsOut(t *testing.T) {
	var log batchLog
	b := infer.NewBatcher(infer.BatcherConfig{GroupWait: time.Millisecond, OnBatch: log.add}, double)
	t.Cleanup(func() { b.Close() })
	ctxs, _ := members(infer.NewGroup(3), 3)
	submitMembers(t, b, ctxs[:2])
	if got := log.get(); len(got) == 0 || len(got) > 2 {
		t.Errorf("batch sizes: got %v, want the two records in one or two runs", got)
	}
}

// TestEngineRunsGroupAsOne runs a group through the real engine (ONNX
// Runtime, add_f32, two sessions): its records run in one or two model
// runs, not one each. The engine's GroupWait is the default, so a run
// may start before a slow member arrives: far fewer than 16 runs is what
// is checked, not one.
func TestEngineRunsGroupAsOne(t *testing.T) {
	var log batchLog
	e := infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("add_f32"), Threads: 1, Parallelism: 2, MaxBatch: 16,
		Hooks: infer.Hooks{Batch: log.add}})
	const n = 16
	runs := len(log.get()) // the warm-up's, if it reports
	ctxs, _ := members(infer.NewGroup(n), n)
	var wg sync.WaitGroup
	for i, ctx := range ctxs {
		wg.Go(func() {
			x := []float32{float32(i), 1, 2, 3}
			out, err := e.Infer(ctx, [][]infer.Tensor{{{DType: infer.Float32, Shape: []int64{4}, Data: x}}})
			if err != nil {
				t.Error(err)
				return
			}
			if got := out[0][0].Shape; fmt.Sprint(got) != "[4]" {
				t.Errorf("member %d: output shape %v, want [4]", i, got)
			}
		})
	}
	wg.Wait()
	got := log.get()[runs:]
	t.Logf("batch sizes: %v", got)
	if len(got) > 4 {
		t.Errorf("got %d runs (%v) for a group of %d, want at most 4", len(got), got, n)
	}
}
