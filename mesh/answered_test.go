package mesh_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// callerRequest is a NATS caller's request stored as the NATS door
// stores it (Client.Forward), the work message as it was stored, and the
// answers to its caller as they come.
type callerRequest struct {
	stored  *nats.Msg
	answers chan *nats.Msg
}

// forwardCaller stores body for job with its answer going to a caller's
// reply subject on caller, and waits for the first answer.
func forwardCaller(t *testing.T, nc, caller *nats.Conn, job, body string) *callerRequest {
	t.Helper()
	work, err := nc.SubscribeSync(mesh.WorkSubject(job))
	if err != nil {
		t.Fatal(err)
	}
	defer work.Unsubscribe()
	r := &callerRequest{answers: make(chan *nats.Msg, 8)}
	reply := caller.NewRespInbox()
	if _, err := caller.ChanSubscribe(reply, r.answers); err != nil {
		t.Fatal(err)
	}
	c, err := mesh.NewClient(nc, mesh.ClientConfig{Coalesce: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Forward(ctx, job, mesh.Request{Body: []byte(body)}, reply, time.Now()); err != nil {
		t.Fatalf("Forward: %v", err)
	}
	if r.stored, err = work.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the stored work message: %v", err)
	}
	select {
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	case a := <-r.answers:
		r.answers <- a // counted by answered
	}
	return r
}

// storeAgain stores a copy of r's work message with another Nats-Msg-Id
// (JetStream drops one with the same id within its duplicate window), as
// a record delivered again after its ack was lost comes back, and waits
// until the job's workers settled it.
func (r *callerRequest) storeAgain(t *testing.T, nc *nats.Conn, job string) {
	t.Helper()
	js := newJS(t, nc)
	m := nats.NewMsg(r.stored.Subject)
	for k, v := range r.stored.Header {
		m.Header[k] = v
	}
	m.Header.Set(mesh.HeaderMsgID, "again-"+r.stored.Header.Get(mesh.HeaderMsgID))
	m.Data = r.stored.Data
	ctx := context.Background()
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "the copy settled", func() bool {
		cons, err := js.Consumer(ctx, mesh.StreamName(job), mesh.WorkersConsumer)
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream >= ack.Sequence
	})
}

// answered counts the answers r's caller got, once a second one had time
// to come (it leaves before the ack the test waited for).
func (r *callerRequest) answered() int {
	time.Sleep(200 * time.Millisecond)
	return len(r.answers)
}

// TestAnsweredAlready: a worker that gets again the record of a NATS
// caller it answered (its ack lost with a NATS server's unsynced state)
// acks it unrun and counts it. It ran it and answered the caller twice.
func TestAnsweredAlready(t *testing.T) {
	sc := mesh.StreamConfig{Job: "again"}
	s, nc := startStreams(t, sc)
	fake := newFake()
	w, _ := runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc}, fake)
	r := forwardCaller(t, nc, meshtest.Connect(t, s), "again", "x")
	r.storeAgain(t, nc, "again")
	if got := r.answered(); got != 1 {
		t.Errorf("caller answered %d times, want once", got)
	}
	if got, st := fake.count("x"), w.Stats(); got != 1 || st.AnsweredAlready != 1 || st.Processed != 1 {
		t.Errorf("ran %d times, AnsweredAlready %d, Processed %d; want 1, 1, 1", got, st.AnsweredAlready, st.Processed)
	}
}

// TestAnsweredHeardFromAnotherWorker: a worker that gets the record of a
// NATS caller another worker answered, which told so on the job's
// answered subject, acks it unrun. It ran it and answered the caller
// twice: nothing of the first worker's answer reached it.
func TestAnsweredHeardFromAnotherWorker(t *testing.T) {
	sc := mesh.StreamConfig{Job: "heard"}
	s, nc := startStreams(t, sc)
	type worker struct {
		w    *mesh.Worker
		fake *fakePredictor
		stop func()
	}
	var ws [2]worker
	for i := range ws {
		ws[i].fake = newFake()
		ws[i].w, ws[i].stop = runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc, ShutdownGrace: 100 * time.Millisecond}, ws[i].fake)
	}
	told, err := nc.SubscribeSync(mesh.AnsweredSubject("heard"))
	if err != nil {
		t.Fatal(err)
	}
	r := forwardCaller(t, nc, meshtest.Connect(t, s), "heard", "x")
	if _, err := told.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("no worker told its answer on %s: %v", mesh.AnsweredSubject("heard"), err)
	}
	first, other := ws[0], ws[1]
	if other.fake.count("x") == 1 {
		first, other = other, first
	}
	first.stop() // the copy goes to the other worker
	r.storeAgain(t, nc, "heard")
	if got := r.answered(); got != 1 {
		t.Errorf("caller answered %d times, want once", got)
	}
	if got, st := other.fake.count("x"), other.w.Stats(); got != 0 || st.AnsweredAlready != 1 {
		t.Errorf("the other worker ran it %d times, AnsweredAlready %d; want 0, 1", got, st.AnsweredAlready)
	}
}
