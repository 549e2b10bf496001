package mesh_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// collectBatches runs ConsumeResultBatches for the door "door" of job,
// sending each result it hands over on got.
func collectBatches(t *testing.T, nc *nats.Conn, job string, got chan<- mesh.Result) {
	t.Helper()
	js := newJS(t, nc)
	meshtest.Run(t, func(ctx context.Context) error {
		return mesh.ConsumeResultBatches(ctx, js, job, "door", mesh.ResultsSubject(job, "door"), 64, func(_ context.Context, rs []mesh.Result) error {
			for _, r := range rs {
				got <- r
			}
			return nil
		})
	})
}

// TestEnqueueBatchStoresTogether: durable records handed over together
// (a Redis door's block) are stored in one work message, a bad one among
// them is answered with its error and blocks none of the others, and the
// worker stores their results together: fewer results messages than
// results, each result handed on with its own uri and Nats-Msg-Id.
func TestEnqueueBatchStoresTogether(t *testing.T) {
	sc := mesh.StreamConfig{Job: "durbatch"}
	_, nc := startStreams(t, sc)
	js := newJS(t, nc)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const n = 10
	reqs := make([]mesh.Request, n)
	for i := range reqs {
		body := fmt.Sprint("rec", i)
		if i == 3 {
			body = "bad3" // answered 400 by the fake
		}
		reqs[i] = mesh.Request{URI: fmt.Sprint("u", i), Body: []byte(body), MsgID: fmt.Sprint("durbatch:", i)}
	}
	reqs = append(reqs, mesh.Request{Body: []byte("long uri"), URI: string(make([]byte, mesh.MaxURIBytes+1))})
	errs := c.EnqueueBatch(ctx, "durbatch", reqs, mesh.ResultsSubject("durbatch", "door"))
	for i, err := range errs[:n] {
		if err != nil {
			t.Errorf("request %d: got %v, want it stored", i, err)
		}
	}
	if errs[n] == nil {
		t.Errorf("request with a uri over MaxURIBytes: got stored, want an error")
	}
	if got := queueLen(t, js, "durbatch"); got != 1 {
		t.Errorf("got %d work messages for %d records handed over together, want 1", got, n)
	}

	got := make(chan mesh.Result, 2*n)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	collectBatches(t, nc, "durbatch", got)
	seen := map[string]mesh.Result{}
	for len(seen) < n {
		select {
		case r := <-got:
			seen[r.URI] = r
		case <-ctx.Done():
			t.Fatalf("got %d results, want %d", len(seen), n)
		}
	}
	for i := range n {
		r := seen[fmt.Sprint("u", i)]
		want, st := fmt.Sprint("REC", i), 200
		if i == 3 {
			want, st = "", 400
		}
		if r.Status != st || string(r.Body) != want || r.Header.Get(mesh.HeaderMsgID) != fmt.Sprint("durbatch:", i) {
			t.Errorf("u%d: got status %d, body %q, id %q; want %d, %q, durbatch:%d", i, r.Status, r.Body, r.Header.Get(mesh.HeaderMsgID), st, want, i)
		}
	}
	st, err := js.Stream(ctx, mesh.ResultsPartitionStreamName("durbatch", 0))
	if err != nil {
		t.Fatal(err)
	}
	if msgs := st.CachedInfo().State.Msgs; msgs >= n {
		t.Errorf("got %d results messages for %d results of one batch, want fewer", msgs, n)
	}
}

// TestDurableCopyRunsOnce: records handed over again in another batch
// (a Redis door killed after its store, before its XACK, serves its
// pending entries again when it restarts) are acked unrun by a worker
// that stored their results already, and counted as answered already:
// each record runs once and its result is handed on once.
func TestDurableCopyRunsOnce(t *testing.T) {
	sc := mesh.StreamConfig{Job: "durcopy"}
	_, nc := startStreams(t, sc)
	fake := newFake()
	w, _ := runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, fake)
	got := make(chan mesh.Result, 16)
	collectBatches(t, nc, "durcopy", got)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reqs := func(ids ...int) []mesh.Request {
		var out []mesh.Request
		for _, i := range ids {
			out = append(out, mesh.Request{URI: fmt.Sprint("u", i), Body: []byte(fmt.Sprint("rec", i)), MsgID: fmt.Sprint("durcopy:", i)})
		}
		return out
	}
	results := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-got:
			case <-ctx.Done():
				t.Fatal("results did not come")
			}
		}
	}
	for _, err := range c.EnqueueBatch(ctx, "durcopy", reqs(0, 1, 2, 3), mesh.ResultsSubject("durcopy", "door")) {
		if err != nil {
			t.Fatal(err)
		}
	}
	results(4)
	// Again, grouped otherwise and with a new record among them.
	for _, err := range c.EnqueueBatch(ctx, "durcopy", reqs(2, 3, 4), mesh.ResultsSubject("durcopy", "door")) {
		if err != nil {
			t.Fatal(err)
		}
	}
	results(1)
	meshtest.WaitFor(t, "the copies acked", func() bool { return w.Stats().AnsweredAlready == 2 })
	for i := range 5 {
		if n := fake.count(fmt.Sprint("rec", i)); n != 1 {
			t.Errorf("rec%d ran %d times, want once", i, n)
		}
	}
	select {
	case r := <-got:
		t.Errorf("a copy's result was handed on again: %s", r.URI)
	case <-time.After(200 * time.Millisecond):
	}
}
