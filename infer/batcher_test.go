package infer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// rec is a one-input record of n rows of width w, every value v.
func rec(n, w int64, v float32) []infer.Tensor {
	data := make([]float32, n*w)
	for i := range data {
		data[i] = v
	}
	return []infer.Tensor{{DType: infer.Float32, Shape: []int64{n, w}, Data: data}}
}

// double is a RunFunc computing y = 2x.
func double(_ int, in []infer.Tensor) ([]infer.Tensor, error) {
	x := in[0].Data.([]float32)
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = 2 * v
	}
	return []infer.Tensor{{DType: infer.Float32, Shape: append([]int64(nil), in[0].Shape...), Data: y}}, nil
}

// batchLog records the batches a Batcher ran.
type batchLog struct {
	mu    sync.Mutex
	items []int
}

func (l *batchLog) add(items, _ int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, items)
}

func (l *batchLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.items...)
}

// gated returns a RunFunc that blocks every run until release is closed,
// signalling started first.
func gated(started chan<- struct{}, release <-chan struct{}) infer.RunFunc {
	return func(r int, in []infer.Tensor) ([]infer.Tensor, error) {
		started <- struct{}{}
		<-release
		return double(r, in)
	}
}

func TestBatcherIdleRunsAtOnce(t *testing.T) {
	var log batchLog
	// A huge MaxWait: an idle runner that waited would hang the test.
	b := infer.NewBatcher(infer.BatcherConfig{MaxWait: time.Hour, OnBatch: log.add}, double)
	t.Cleanup(func() { b.Close() })
	for i := range 3 {
		out, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, float32(i))})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := out[0][0].Data.([]float32)[0], float32(2*i); got != want {
			t.Errorf("call %d: got %v, want %v", i, got, want)
		}
	}
	wantBatches(t, &log, "[1 1 1]")
}

// drain waits for n answers on done and fails on an error.
func drain(t *testing.T, done <-chan error, n int) {
	t.Helper()
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// wantBatches checks the batch sizes log saw, e.g. "[1 4]".
func wantBatches(t *testing.T, log *batchLog, want string) {
	t.Helper()
	if got := fmt.Sprint(log.get()); got != want {
		t.Errorf("batch sizes: got %s, want %s", got, want)
	}
}

// submitAll submits n one-row records at once and waits for them.
func submitAll(t *testing.T, b *infer.Batcher, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, float32(i))}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestBatcherHoldIdle: with HoldIdle (Triton's max_queue_delay), a
// record that finds the runner idle waits for more; the second record
// fills the batch, which then runs at once (MaxWait is an hour).
func TestBatcherHoldIdle(t *testing.T) {
	var log batchLog
	b := infer.NewBatcher(infer.BatcherConfig{MaxBatch: 2, MaxWait: time.Hour, HoldIdle: true, OnBatch: log.add}, double)
	t.Cleanup(func() { b.Close() })
	submitAll(t, b, 2)
	if got, want := fmt.Sprint(log.get()), "[2]"; got != want {
		t.Errorf("batch sizes: got %s, want %s (one batch of both)", got, want)
	}
}

// TestBatcherPreferred: a batch runs as soon as the queue reaches a
// preferred size (no waiting for MaxBatch, MaxWait an hour), and a longer
// queue is cut at the largest preferred size it reaches.
func TestBatcherPreferred(t *testing.T) {
	var log batchLog
	b := infer.NewBatcher(infer.BatcherConfig{MaxBatch: 8, MaxWait: time.Hour, HoldIdle: true, Preferred: []int{2}, OnBatch: log.add}, double)
	t.Cleanup(func() { b.Close() })
	submitAll(t, b, 2)
	wantBatches(t, &log, "[2]")

	var cut batchLog
	started, release := make(chan struct{}, 100), make(chan struct{})
	g := infer.NewBatcher(infer.BatcherConfig{MaxBatch: 8, Preferred: []int{2, 4}, OnBatch: cut.add}, gated(started, release))
	t.Cleanup(func() { g.Close() })
	done := make(chan error, 8)
	go func() { _, err := g.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 0)}); done <- err }()
	<-started // the runner is busy; 5 records queue
	for i := 1; i <= 5; i++ {
		go func() { _, err := g.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, float32(i))}); done <- err }()
		infertest.WaitFor(t, "queued record", func() bool { return g.Len() == i })
	}
	close(release)
	drain(t, done, 6)
	// 1 alone, then 4 (the largest preferred size 5 reach), then 1.
	wantBatches(t, &cut, "[1 4 1]")
}

func TestBatcherBatchesWhileBusy(t *testing.T) {
	var log batchLog
	started, release := make(chan struct{}, 100), make(chan struct{})
	b := infer.NewBatcher(infer.BatcherConfig{MaxBatch: 4, OnBatch: log.add}, gated(started, release))
	t.Cleanup(func() { b.Close() })

	type result struct {
		i   int
		out [][]infer.Tensor
		err error
	}
	results := make(chan result, 10)
	submit := func(i int, r []infer.Tensor) {
		out, err := b.Submit(context.Background(), [][]infer.Tensor{r})
		results <- result{i, out, err}
	}
	go submit(0, rec(1, 2, 0))
	<-started // the runner is busy with record 0
	// Six more records of width 2 and one of width 3 (a different shape).
	for i := 1; i <= 6; i++ {
		go submit(i, rec(1, 2, float32(i)))
		infertest.WaitFor(t, "queued record", func() bool { return b.Len() == i })
	}
	go submit(7, rec(1, 3, 7))
	infertest.WaitFor(t, "queued record", func() bool { return b.Len() == 7 })
	close(release)
	for range 8 {
		r := <-results
		if r.err != nil {
			t.Fatalf("record %d: %v", r.i, r.err)
		}
		y := r.out[0][0]
		if got, want := y.Data.([]float32)[0], float32(2*r.i); got != want {
			t.Errorf("record %d: got %v, want %v", r.i, got, want)
		}
		if got := y.Shape[0]; got != 1 {
			t.Errorf("record %d: got %d rows, want 1", r.i, got)
		}
	}
	// 1 alone, then 4 (MaxBatch), then the 2 left of width 2, then width 3.
	wantBatches(t, &log, "[1 4 2 1]")
}

func TestBatcherAlreadyBatchedSplits(t *testing.T) {
	b := infer.NewBatcher(infer.BatcherConfig{}, double)
	t.Cleanup(func() { b.Close() })
	out, err := b.Submit(context.Background(), [][]infer.Tensor{rec(2, 2, 1), rec(3, 2, 2), rec(1, 2, 3)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		rows int64
		v    float32
	}{{2, 2}, {3, 4}, {1, 6}} {
		y := out[i][0]
		if y.Shape[0] != want.rows || y.Data.([]float32)[0] != want.v || y.Len() != int(want.rows*2) {
			t.Errorf("record %d: got shape %v data %v, want %d rows of %v", i, y.Shape, y.Data, want.rows, want.v)
		}
	}
}

func TestBatcherQueueFull(t *testing.T) {
	started, release := make(chan struct{}, 10), make(chan struct{})
	b := infer.NewBatcher(infer.BatcherConfig{QueueSize: 2}, gated(started, release))
	t.Cleanup(func() { close(release); b.Close() })
	go b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 0)})
	<-started
	go b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 1), rec(1, 2, 2)})
	infertest.WaitFor(t, "full queue", func() bool { return b.Len() == 2 })
	if _, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 3)}); !errors.Is(err, infer.ErrQueueFull) {
		t.Errorf("Submit on a full queue: got %v, want ErrQueueFull", err)
	}
}

func TestBatcherCloseFailsQueued(t *testing.T) {
	started, release := make(chan struct{}, 10), make(chan struct{})
	b := infer.NewBatcher(infer.BatcherConfig{}, gated(started, release))
	first := make(chan error, 1)
	go func() {
		_, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 0)})
		first <- err
	}()
	<-started
	queued := make(chan error, 1)
	go func() {
		_, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 1)})
		queued <- err
	}()
	infertest.WaitFor(t, "queued record", func() bool { return b.Len() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	if err := <-queued; !errors.Is(err, infer.ErrClosed) {
		t.Errorf("queued record: got %v, want ErrClosed", err)
	}
	close(release) // Close waits for the running batch
	if err := <-first; err != nil {
		t.Errorf("running record: got %v, want nil", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: got %v, want nil", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if _, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 0)}); !errors.Is(err, infer.ErrClosed) {
		t.Errorf("Submit after Close: got %v, want ErrClosed", err)
	}
}

func TestBatcherBadRecordDoesNotFailOthers(t *testing.T) {
	var log batchLog
	run := func(r int, in []infer.Tensor) ([]infer.Tensor, error) {
		for _, v := range in[0].Data.([]float32) {
			if v < 0 {
				return nil, errors.New("negative input")
			}
		}
		return double(r, in)
	}
	b := infer.NewBatcher(infer.BatcherConfig{OnBatch: log.add}, run)
	t.Cleanup(func() { b.Close() })
	// One Submit of three records is one batch; the bad one fails alone.
	out, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 1), rec(1, 2, -1), rec(1, 2, 3)})
	if err == nil || out != nil {
		t.Fatalf("Submit with a bad record: got %v, %v; want an error", out, err)
	}
	wantBatches(t, &log, "[3 1 1 1]")
}

func TestBatcherMaxWaitFillsBatch(t *testing.T) {
	var log batchLog
	started, release := make(chan struct{}, 10), make(chan struct{})
	b := infer.NewBatcher(infer.BatcherConfig{MaxBatch: 3, MaxWait: time.Hour, OnBatch: log.add}, gated(started, release))
	t.Cleanup(func() { b.Close() })
	done := make(chan error, 4)
	submit := func(v float32) {
		_, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, v)})
		done <- err
	}
	go submit(0)
	<-started
	go submit(1)
	infertest.WaitFor(t, "queued record", func() bool { return b.Len() == 1 })
	close(release)
	// The busy-then-free runner waits (MaxWait is an hour) until the batch
	// is full: add two more.
	go submit(2)
	go submit(3)
	drain(t, done, 4)
	wantBatches(t, &log, "[1 3]")
}

func TestBatcherDropsExpired(t *testing.T) {
	started, release := make(chan struct{}, 10), make(chan struct{})
	var log batchLog
	b := infer.NewBatcher(infer.BatcherConfig{OnBatch: log.add}, gated(started, release))
	t.Cleanup(func() { b.Close() })
	go b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, 0)})
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Submit(ctx, [][]infer.Tensor{rec(1, 2, 1)})
		errc <- err
	}()
	infertest.WaitFor(t, "queued record", func() bool { return b.Len() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Submit: got %v, want context.Canceled", err)
	}
	close(release)
	infertest.WaitFor(t, "queue drained", func() bool { return b.Len() == 0 })
	if got, want := fmt.Sprint(log.get()), "[1]"; got != want {
		t.Errorf("batch sizes: got %s, want %s (the expired record must not run)", got, want)
	}
}

// TestBatcherNextCallRunsAtOnce: a caller that submits again as soon as
// it has its answer finds the runner free, even when the runner has not
// yet gone back to the queue; with MaxWait an hour, a runner that took the
// call for one queued while it was busy would hang the test.
func TestBatcherNextCallRunsAtOnce(t *testing.T) {
	b := infer.NewBatcher(infer.BatcherConfig{MaxBatch: 4, MaxWait: time.Hour}, double)
	t.Cleanup(func() { b.Close() })
	for i := range 2000 {
		if _, err := b.Submit(context.Background(), [][]infer.Tensor{rec(1, 2, float32(i))}); err != nil {
			t.Fatal(err)
		}
	}
}
