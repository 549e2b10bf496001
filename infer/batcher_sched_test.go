package infer_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/status"
)

// valueLog runs one record at a time (Unbatchable), blocking each run
// until release sends, and records the value of each record run.
type valueLog struct {
	release chan struct{}
	mu      sync.Mutex
	ran     []float32
}

func (v *valueLog) run(r int, in []infer.Tensor) ([]infer.Tensor, error) {
	v.mu.Lock()
	v.ran = append(v.ran, in[0].Data.([]float32)[0])
	v.mu.Unlock()
	<-v.release
	return double(r, in)
}

func (v *valueLog) order() []float32 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.ran)
}

// schedTest starts a one-runner Batcher of records run alone, busy with
// record 0, and returns it, its log and a submit that queues a record of
// value x under ctx, sending its error on the channel returned.
func schedTest(t *testing.T) (*infer.Batcher, *valueLog, func(ctx context.Context, x float32) <-chan error) {
	v := &valueLog{release: make(chan struct{}, 16)}
	b := infer.NewBatcher(infer.BatcherConfig{Runners: 1, Unbatchable: true}, v.run)
	t.Cleanup(func() { close(v.release); b.Close() })
	submit := func(ctx context.Context, x float32) <-chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := b.Submit(ctx, [][]infer.Tensor{rec(1, 2, x)})
			errc <- err
		}()
		return errc
	}
	first := submit(context.Background(), 0)
	t.Cleanup(func() { <-first })
	infertest.WaitFor(t, "record 0 running", func() bool { return len(v.order()) == 1 })
	return b, v, submit
}

// TestBatcherPriority: queued records run by priority, then in order.
func TestBatcherPriority(t *testing.T) {
	b, v, submit := schedTest(t)
	var done []<-chan error
	for i, p := range []int{3, 3, 1, 2, 1} {
		done = append(done, submit(infer.WithQueueing(context.Background(), infer.Queueing{Priority: p}), float32(i+1)))
		infertest.WaitFor(t, "queued", func() bool { return b.Len() == i+1 })
	}
	for range 6 {
		v.release <- struct{}{}
	}
	for _, d := range done {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := v.order(), []float32{0, 3, 5, 4, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("ran %v, want %v", got, want)
	}
}

// TestBatcherQueueTimeout: a record still queued at its queue timeout
// fails with ErrQueueTimeout (a 503) unrun; with delay it runs after
// the others, one queued behind it included.
func TestBatcherQueueTimeout(t *testing.T) {
	b, v, submit := schedTest(t)
	due := time.Now().Add(10 * time.Millisecond)
	rejected := submit(infer.WithQueueing(context.Background(), infer.Queueing{Due: due}), 1)
	infertest.WaitFor(t, "queued", func() bool { return b.Len() == 1 })
	delayed := submit(infer.WithQueueing(context.Background(), infer.Queueing{Due: due, Delay: true}), 2)
	infertest.WaitFor(t, "queued", func() bool { return b.Len() == 2 })
	behind := submit(context.Background(), 3)
	infertest.WaitFor(t, "queued", func() bool { return b.Len() == 3 })
	time.Sleep(time.Until(due) + 5*time.Millisecond) // past the timeout while queued
	for range 3 {
		v.release <- struct{}{}
	}
	err := <-rejected
	if !errors.Is(err, infer.ErrQueueTimeout) || status.Of(err) != status.Busy {
		t.Errorf("rejected: got %v (status %d), want ErrQueueTimeout, 503", err, status.Of(err))
	}
	for _, d := range []<-chan error{delayed, behind} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := v.order(), []float32{0, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("ran %v, want %v: the delayed record after the one queued behind it", got, want)
	}
}
