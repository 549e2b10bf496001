package mesh_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// orderPredictor records the bodies it runs, in order, each call waiting
// for a token on release first.
type orderPredictor struct {
	release chan struct{}
	mu      sync.Mutex
	ran     []string
}

func newOrder() *orderPredictor { return &orderPredictor{release: make(chan struct{}, 1024)} }

func (o *orderPredictor) Predict(ctx context.Context, _ string, body []byte) ([]byte, error) {
	o.mu.Lock()
	o.ran = append(o.ran, string(body))
	o.mu.Unlock()
	select {
	case <-o.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return body, nil
}

func (o *orderPredictor) order() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ran...)
}

// submitAsync submits body to job and sends its outcome on the channel
// returned.
func submitAsync(ctx context.Context, c *mesh.Client, job, body string, s mesh.Schedule) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, job, mesh.Request{Body: []byte(body), Schedule: s})
		done <- err
	}()
	return done
}

// waitDelivered waits until the worker holds n records of consumer name.
func waitDelivered(t *testing.T, js jetstream.JetStream, job, name string, n int) {
	t.Helper()
	meshtest.WaitFor(t, name+" delivered", func() bool {
		c, err := js.Consumer(context.Background(), mesh.StreamName(job), name)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending >= n
	})
}

// schedRig is a job whose one worker (MaxInflight 1) runs records
// through o, busy with the request "first" (whose outcome first sends)
// until o is released.
type schedRig struct {
	js    jetstream.JetStream
	o     *orderPredictor
	w     *mesh.Worker
	c     *mesh.Client
	ctx   context.Context
	first <-chan error
}

func busyWorker(t *testing.T, sc mesh.StreamConfig) *schedRig {
	_, nc := startStreams(t, sc)
	r := &schedRig{js: newJS(t, nc), o: newOrder(), c: newClient(t, nc)}
	r.w, _ = runWorker(t, nc, mesh.WorkerConfig{Stream: sc, MaxInflight: 1}, r.o)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.first = submitAsync(ctx, r.c, sc.Job, "first", mesh.Schedule{})
	waitDelivered(t, r.js, sc.Job, mesh.WorkersConsumer, 1)
	return r
}

// TestPriorityOvertakesBacklog queues low-priority requests behind one
// the worker runs, then a high-priority one: it runs next, before the
// backlog, though it came last.
func TestPriorityOvertakesBacklog(t *testing.T) {
	r := busyWorker(t, mesh.StreamConfig{Job: "prio", Levels: 3, DefaultLevel: 2})
	var low []<-chan error
	for i := range 8 {
		low = append(low, submitAsync(r.ctx, r.c, "prio", "low"+string(rune('0'+i)), mesh.Schedule{Level: 3}))
	}
	waitDelivered(t, r.js, "prio", mesh.LevelConsumer(3), 1) // one waits at the gate
	high := submitAsync(r.ctx, r.c, "prio", "high", mesh.Schedule{Level: 1})
	waitDelivered(t, r.js, "prio", mesh.LevelConsumer(1), 1)
	// Delivered is not yet at the gate: released before it got there,
	// the low record waiting would take the slot.
	meshtest.WaitFor(t, "high at the gate", func() bool { return r.w.GateWaiters() >= 2 })
	for range 10 {
		r.o.release <- struct{}{}
	}
	for _, ch := range append(low, high, r.first) {
		if err := <-ch; err != nil {
			t.Fatalf("Submit: %v", err)
		}
	}
	got := r.o.order()
	if i := indexOf(got, "high"); i != 1 {
		t.Errorf("high ran %dth of %v, want right after the running one", i, got)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestMaxQueueSizeRefuses bounds each level's queue: the request past it
// is refused with a 503 naming the queue size, and another level still
// takes requests.
func TestMaxQueueSizeRefuses(t *testing.T) {
	sc := mesh.StreamConfig{Job: "qsize", Levels: 2, DefaultLevel: 1, MaxQueue: 3}
	_, nc := startStreams(t, sc)
	c, ctx, subj := enqueued(t, nc, "qsize", 3)
	err := c.Enqueue(ctx, "qsize", mesh.Request{Body: []byte("x")}, subj)
	if !errors.Is(err, mesh.ErrQueueFull) || !strings.Contains(err.Error(), "Exceeds maximum queue size") || status.Of(err) != status.Busy {
		t.Errorf("Enqueue past max_queue_size: got %v (status %d), want a 503 naming the queue size", err, status.Of(err))
	}
	if err := c.Enqueue(ctx, "qsize", mesh.Request{Body: []byte("x"), Schedule: mesh.Schedule{Level: 2}}, subj); err != nil {
		t.Errorf("Enqueue at level 2: %v", err)
	}
	// The queue depth counts every level.
	if info, err := mesh.WorkersInfo(ctx, newJS(t, nc), "qsize"); err != nil || info.NumPending != 4 {
		t.Errorf("WorkersInfo: got %+v %v, want 4 pending", info, err)
	}
}

// TestQueueTimeout: a request still queued past its timeout is rejected
// unrun with Triton's 503 "Request timeout expired"; with DELAY it runs,
// after a request queued behind it.
func TestQueueTimeout(t *testing.T) {
	r := busyWorker(t, mesh.StreamConfig{Job: "qtime"})
	js, o, w, c, ctx, first := r.js, r.o, r.w, r.c, r.ctx, r.first
	rejected := submitAsync(ctx, c, "qtime", "rejected", mesh.Schedule{Timeout: 20 * time.Millisecond})
	delayed := submitAsync(ctx, c, "qtime", "delayed", mesh.Schedule{Timeout: 20 * time.Millisecond, Delay: true})
	waitDelivered(t, js, "qtime", mesh.WorkersConsumer, 2)
	after := submitAsync(ctx, c, "qtime", "after", mesh.Schedule{})
	time.Sleep(50 * time.Millisecond) // past both timeouts
	for range 3 {
		o.release <- struct{}{}
	}
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	err := <-rejected
	var se *status.Error
	if !errors.As(err, &se) || se.Status != status.Busy || se.Message != "Request timeout expired" {
		t.Errorf("rejected: got %v, want 503 Request timeout expired", err)
	}
	for name, ch := range map[string]<-chan error{"delayed": delayed, "after": after} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	got := o.order()
	if indexOf(got, "rejected") >= 0 || indexOf(got, "delayed") < indexOf(got, "after") {
		t.Errorf("ran %v: want rejected never, delayed after the request queued behind it", got)
	}
	if w.Stats().Expired != 1 {
		t.Errorf("Expired = %d, want 1", w.Stats().Expired)
	}
}

// TestCancelledNotRun: a caller that goes away while its request waits
// leaves it unrun, counted as cancelled.
func TestCancelledNotRun(t *testing.T) {
	r := busyWorker(t, mesh.StreamConfig{Job: "cancel"})
	js, o, w, c, ctx, first := r.js, r.o, r.w, r.c, r.ctx, r.first
	gone, goneAway := context.WithCancel(ctx)
	cancelled := submitAsync(gone, c, "cancel", "cancelled", mesh.Schedule{})
	waitDelivered(t, js, "cancel", mesh.WorkersConsumer, 2)
	goneAway()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Submit: got %v, want context.Canceled", err)
	}
	time.Sleep(200 * time.Millisecond) // the notice crosses NATS
	o.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	meshtest.WaitFor(t, "cancelled counted", func() bool { return w.Stats().Cancelled == 1 })
	if got := o.order(); indexOf(got, "cancelled") >= 0 {
		t.Errorf("ran %v: the cancelled request ran", got)
	}
}

// enqueued enqueues n requests to job, whose streams nc has, and returns
// the client, a context bounding the test and the results subject used.
func enqueued(t *testing.T, nc *nats.Conn, job string, n int) (*mesh.Client, context.Context, string) {
	t.Helper()
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	subj := mesh.ResultsSubject(job, "door")
	for i := range n {
		if err := c.Enqueue(ctx, job, mesh.Request{Body: []byte("x")}, subj); err != nil {
			t.Fatalf("Enqueue %d: %v", i, err)
		}
	}
	return c, ctx, subj
}
