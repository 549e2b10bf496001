package mesh_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/embedded/fdtest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestWorkQueueServesAgainAfterFDExhaustion runs a job's worker and
// client, runs the process out of file descriptors while the work queue
// and results streams sync their files (every 500 ms here, 2 min by
// default), gives them back and wants requests answered again within
// 10 s, through the same streams, consumer and connections, with no
// restart. Without the embedded server's recovery, both streams keep the
// EMFILE their sync met and never ack a publish again.
func TestWorkQueueServesAgainAfterFDExhaustion(t *testing.T) {
	if !fdtest.InChild() {
		fdtest.RunInChild(t)
		return
	}
	s := meshtest.StartServerWith(t, `jetstream { sync_interval: "500ms" }`+"\n")
	nc := meshtest.Connect(t, s)
	sc := mesh.StreamConfig{Job: "fd"}
	ensure(t, nc, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	c := newClient(t, nc)
	submit := func(body string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := c.Submit(ctx, "fd", mesh.Request{Body: []byte(body)})
		if err == nil && string(res.Body) != "ANSWER-"+body[len("answer-"):] {
			t.Errorf("got %q for %q", res.Body, body)
		}
		return err
	}
	if err := submit("answer-0"); err != nil {
		t.Fatalf("Submit before: %v", err)
	}

	release := fdtest.Exhaust(t, 256)
	time.Sleep(2 * time.Second) // the streams' syncs run several times
	release()

	start := time.Now()
	for i := 1; ; i++ {
		err := submit("answer-" + strconv.Itoa(i))
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no answer within 10 s of the descriptors coming back: %v", err)
		}
	}
	t.Logf("answered again %v after the descriptors came back", time.Since(start).Round(time.Millisecond))
}
