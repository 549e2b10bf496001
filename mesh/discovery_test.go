package mesh_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

func TestDiscoverWorkers(t *testing.T) {
	s := meshtest.StartServer(t)
	job := "disc"
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}, Model: "fake", ModelVersion: "7"}
	ensure(t, meshtest.Connect(t, s), cfg.Stream)
	runWorker(t, meshtest.Connect(t, s), cfg, newFake())
	_, stop2 := runWorker(t, meshtest.Connect(t, s), cfg, newFake())
	client := newClient(t, meshtest.Connect(t, s))
	for i := range 20 {
		if _, err := client.Submit(context.Background(), job, mesh.Request{Body: []byte(fmt.Sprint("x", i))}); err != nil {
			t.Fatal(err)
		}
	}
	nc := meshtest.Connect(t, s)
	var ws []mesh.WorkerInfo
	meshtest.WaitFor(t, "two workers", func() bool {
		var err error
		ws, err = mesh.DiscoverWorkers(context.Background(), nc, 200*time.Millisecond)
		return err == nil && len(ws) == 2
	})
	// (Processed is counted before each reply leaves, so all 20 show.)
	var total uint64
	for _, w := range ws {
		if w.Job != job || w.Model != "fake" || w.ModelVersion != "7" || w.PID == "" {
			t.Errorf("got worker %+v, want job %q model fake version 7 and a pid", w, job)
		}
		total += w.Stats.Processed
	}
	if total != 20 {
		t.Errorf("got %d processed across workers, want 20", total)
	}
	// A stopped worker leaves discovery.
	stop2()
	meshtest.WaitFor(t, "one worker", func() bool {
		ws, _ = mesh.DiscoverWorkers(context.Background(), nc, 200*time.Millisecond)
		return len(ws) == 1
	})
}
