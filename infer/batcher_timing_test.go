package infer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/timing"
)

// runs is a timing.Sink that keeps the model runs reported to it.
type runs struct {
	mu   sync.Mutex
	rows []int64
	took []time.Duration
}

func (r *runs) Execution(rows int64, _, infer, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, rows)
	r.took = append(r.took, infer)
}

// TestBatcherTiming: a run that stacks two requests is one execution of
// their rows for their sink, and each request counts that run once, with
// its rows and a queue wait.
func TestBatcherTiming(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	first := true
	b := infer.NewBatcher(infer.BatcherConfig{Runners: 1, MaxBatch: 16}, func(r int, in []infer.Tensor) ([]infer.Tensor, error) {
		if first {
			first = false
			close(started)
			<-release // hold the runner while the others queue
		}
		return double(r, in)
	})
	t.Cleanup(func() { _ = b.Close() })
	sink := &runs{}
	submit := func(records ...[]infer.Tensor) (*timing.Request, chan error) {
		ctx, tr := timing.New(context.Background(), sink)
		done := make(chan error, 1)
		go func() { _, err := b.Submit(ctx, records); done <- err }()
		return tr, done
	}
	_, held := submit(rec(1, 2, 1))
	<-started
	tr2, done2 := submit(rec(2, 2, 1), rec(1, 2, 1)) // two records of one request
	for b.Len() < 2 {
		time.Sleep(time.Millisecond)
	}
	tr3, done3 := submit(rec(3, 2, 1))
	for b.Len() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for _, done := range []chan error{held, done2, done3} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if len(sink.rows) != 2 || sink.rows[0] != 1 || sink.rows[1] != 6 {
		t.Fatalf("runs: got rows %v, want [1 6]", sink.rows)
	}
	for i, tc := range []struct {
		tr   *timing.Request
		rows int64
	}{{tr2, 3}, {tr3, 3}} {
		got := tc.tr.Times()
		if got.Rows != tc.rows || got.Infer != sink.took[1] || got.Queue <= 0 {
			t.Errorf("request %d: got %+v, want rows %d, infer %v (the shared run, once), queue > 0", i+2, got, tc.rows, sink.took[1])
		}
	}
}
