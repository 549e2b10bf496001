package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// waitQueueLen polls job's work queue until it holds want messages.
func waitQueueLen(t *testing.T, js jetstream.JetStream, job string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := queueLen(t, js, job)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("work queue of %s holds %d messages, want %d", job, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAnsweredRecordsPurged: the work queue is a limits stream that the
// workers purge below the ack floor. Many more requests than its MaxMsgs
// pass one after another: a publish that finds it full of answered
// records purges them and goes on. The server applies acks in its own
// time, so now and then one finds the queue full before the acks of the
// records just answered are in; it is refused with ErrQueueFull (a 503)
// and passes when sent again, as a caller would.
func TestAnsweredRecordsPurged(t *testing.T) {
	cfg := mesh.StreamConfig{Job: "purged", MaxMsgs: 32}
	_, nc := startStreams(t, cfg)
	js := newJS(t, nc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: cfg}, newFake())
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refused := 0
	for i := range 200 {
		body := fmt.Sprintf("r%d", i)
		res, err := c.Submit(ctx, "purged", mesh.Request{Body: []byte(body)})
		for errors.Is(err, mesh.ErrQueueFull) && refused < 50 {
			refused++
			time.Sleep(10 * time.Millisecond)
			res, err = c.Submit(ctx, "purged", mesh.Request{Body: []byte(body)})
		}
		if err != nil {
			t.Fatalf("Submit %d of 200 into a queue of 32 (%d refusals so far): %v", i, refused, err)
		}
		if want := fmt.Sprintf("R%d", i); string(res.Body) != want {
			t.Fatalf("Submit %d: got %q, want %q", i, res.Body, want)
		}
	}
	t.Logf("200 requests through a queue of 32: %d refused as full on the way", refused)
	waitQueueLen(t, js, "purged", 0)
	st, err := js.Stream(ctx, mesh.StreamName("purged"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Retention; got != jetstream.LimitsPolicy {
		t.Errorf("work queue retention %v, want limits", got)
	}
}

// TestUnansweredRecordsKept: a purge never removes a record not yet
// answered, nor one queued behind it: the first record held in Predict
// keeps the ack floor below everything after it, answered or not, over
// several purge rounds; once it is answered, all leave.
func TestUnansweredRecordsKept(t *testing.T) {
	cfg := mesh.StreamConfig{Job: "kept"}
	_, nc := startStreams(t, cfg)
	js := newJS(t, nc)
	held := newFake()
	held.block = make(chan struct{})
	held.started = make(chan struct{}, 1)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subj := mesh.ResultsSubject("kept", "purge-test")
	if err := c.Enqueue(ctx, "kept", mesh.Request{Body: []byte("first")}, subj); err != nil {
		t.Fatal(err)
	}
	// MaxInflight 1: it holds "first", and at most one more at its gate.
	_, stop := runWorker(t, nc, mesh.WorkerConfig{Stream: cfg, MaxInflight: 1}, held)
	<-held.started // "first" is held in Predict
	results := collectResults(t, nc, "kept", "purge-test")
	quick := newFake()
	_, stopQuick := runWorker(t, nc, mesh.WorkerConfig{Stream: cfg}, quick)
	for i := range 3 {
		if err := c.Enqueue(ctx, "kept", mesh.Request{Body: []byte(fmt.Sprintf("later%d", i))}, subj); err != nil {
			t.Fatal(err)
		}
	}
	// The quick worker answers at least two of the later records; the
	// floor stays below all four.
	awaitResults(t, ctx, results, 2, "later records not answered")
	time.Sleep(3 * time.Second) // three purge rounds at least
	if n := queueLen(t, js, "kept"); n != 4 {
		t.Fatalf("queue holds %d messages while the first is unanswered, want 4", n)
	}
	close(held.block)
	waitQueueLen(t, js, "kept", 0)
	stopQuick()
	stop()
}

// TestWorkQueueStreamKept: a work partition an older version made with
// work-queue retention stays as it is (nats-server cannot change a
// stream's retention to or from work queue), and the job serves on it.
func TestWorkQueueStreamKept(t *testing.T) {
	s := meshtest.StartServer(t)
	nc := meshtest.Connect(t, s)
	js := newJS(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      mesh.StreamName("old"),
		Subjects:  []string{mesh.PartitionSubject("old", 0)},
		Retention: jetstream.WorkQueuePolicy,
	}); err != nil {
		t.Fatal(err)
	}
	cfg := mesh.StreamConfig{Job: "old"}
	ensure(t, nc, cfg)
	runWorker(t, nc, mesh.WorkerConfig{Stream: cfg}, newFake())
	res, err := newClient(t, nc).Submit(ctx, "old", mesh.Request{Body: []byte("x")})
	if err != nil || string(res.Body) != "X" {
		t.Fatalf("Submit: %q, %v; want \"X\"", res.Body, err)
	}
	st, err := js.Stream(ctx, mesh.StreamName("old"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Retention; got != jetstream.WorkQueuePolicy {
		t.Errorf("retention %v, want the work queue it was made with", got)
	}
	waitQueueLen(t, js, "old", 0) // its ack deleted the record
}

// lowHeld answers at once, but holds the records whose body starts
// with "low" until release closes.
type lowHeld struct{ release chan struct{} }

func (p lowHeld) Predict(ctx context.Context, _ string, body []byte) ([]byte, error) {
	if string(body[:3]) == "low" {
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return body, nil
}

// TestLevelRecordsKeptByPurge: records of a priority level that wait
// below the ack floor of the default level's consumer are not purged
// while unanswered, and once every level answered, the records are
// purged, also when only a level other than the default had any.
func TestLevelRecordsKeptByPurge(t *testing.T) {
	cfg := mesh.StreamConfig{Job: "lvlkept", Levels: 2, DefaultLevel: 1}
	_, nc := startStreams(t, cfg)
	js := newJS(t, nc)
	c, _, subj := enqueued(t, nc, "lvlkept", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 { // stream sequences 1 and 2, at level 2
		if err := c.Enqueue(ctx, "lvlkept", mesh.Request{Body: []byte(fmt.Sprintf("low%d", i)), Schedule: mesh.Schedule{Level: 2}}, subj); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 { // 3 to 5, at the default level
		if err := c.Enqueue(ctx, "lvlkept", mesh.Request{Body: []byte(fmt.Sprintf("high%d", i))}, subj); err != nil {
			t.Fatal(err)
		}
	}
	results := collectResults(t, nc, "lvlkept", "door")
	p := lowHeld{release: make(chan struct{})}
	_, stop := runWorker(t, nc, mesh.WorkerConfig{Stream: cfg}, p)
	awaitResults(t, ctx, results, 3, "the default level's records not answered")
	time.Sleep(3 * time.Second) // three purge rounds at least
	if n := queueLen(t, js, "lvlkept"); n < 2 {
		t.Fatalf("queue holds %d messages while the two level-2 records are unanswered, want them kept", n)
	}
	close(p.release)
	awaitResults(t, ctx, results, 2, "the level-2 records not answered")
	waitQueueLen(t, js, "lvlkept", 0)
	// Traffic at level 2 alone, the default level's consumer idle: its
	// answered records are purged too.
	for i := range 3 {
		if err := c.Enqueue(ctx, "lvlkept", mesh.Request{Body: []byte(fmt.Sprintf("more%d", i)), Schedule: mesh.Schedule{Level: 2}}, subj); err != nil {
			t.Fatal(err)
		}
	}
	awaitResults(t, ctx, results, 3, "the later level-2 records not answered")
	waitQueueLen(t, js, "lvlkept", 0)
	stop()
}

// awaitResults takes n results from results, failing the test with what
// when ctx ends first.
func awaitResults(t *testing.T, ctx context.Context, results <-chan mesh.Result, n int, what string) {
	t.Helper()
	for range n {
		select {
		case <-results:
		case <-ctx.Done():
			t.Fatal(what)
		}
	}
}
