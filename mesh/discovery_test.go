package mesh_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/nats-io/nats.go"
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

// TestStatusDocument takes the status document of a mesh with a worker,
// a NATS door and a process service sharing one telemetry.Metrics, as a
// serving process has them: the job's row sums the door's outcomes and
// the workers' counts, the door and the forced 400 appear, and so do the
// process's models.
func TestStatusDocument(t *testing.T) {
	s := meshtest.StartServer(t)
	job := "doc"
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}, Model: "fake", ModelVersion: "3", ExecutionProvider: "cpu", Metrics: m}
	ensure(t, meshtest.Connect(t, s), cfg.Stream)
	runWorker(t, meshtest.Connect(t, s), cfg, newFake())
	startService(t, meshtest.Connect(t, s), meshtest.Connect(t, s), mesh.ServiceConfig{Jobs: []string{job}, Metrics: m})
	stop, err := mesh.RegisterProcess(meshtest.Connect(t, s), mesh.ProcessConfig{Name: "cluster-serving start doc", Tally: m.Tally(),
		Models: func() []mesh.ModelState { return []mesh.ModelState{{Name: "fake", Version: "3", State: "READY"}} }})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	nc := meshtest.Connect(t, s)
	for _, body := range []string{"a", "b", "c", "bad one"} {
		_, _ = requestResult(nc, &nats.Msg{Subject: mesh.PredictSubject(job), Data: []byte(body)}, 5*time.Second)
	}
	js := newJS(t, nc)
	var st *mesh.Status
	meshtest.WaitFor(t, "the job's rate over the last full seconds", func() bool {
		st, err = mesh.TakeStatus(context.Background(), nc, js)
		return err == nil && len(st.Jobs) == 1 && st.Jobs[0].Rate > 0
	})
	j := st.Jobs[0]
	if j.Outcomes["ok"] != 3 || j.Outcomes["bad_input"] != 1 || j.Processed != 3 || j.Failed != 1 || j.Workers != 1 || j.Models[0] != "fake" {
		t.Errorf("job row %+v: want 3 ok and 1 bad_input at the door, 3 processed and 1 failed by 1 worker of model fake", j)
	}
	if len(st.Workers) != 1 || st.Workers[0].ExecutionProvider != "cpu" || st.Workers[0].Started.IsZero() {
		t.Errorf("workers %+v: want one, on cpu, with its start time", st.Workers)
	}
	if len(st.Doors) != 1 || st.Doors[0].Door != "nats" || st.Doors[0].Listen != mesh.PredictSubject(job) || st.Doors[0].Requests != 4 ||
		st.Doors[0].Process != "cluster-serving start doc" || st.Doors[0].PID == "" {
		t.Errorf("doors %+v: want the NATS door on %s with 4 requests, named by its process", st.Doors, mesh.PredictSubject(job))
	}
	if len(st.Errors) != 1 || st.Errors[0].Status != 400 || !strings.Contains(st.Errors[0].Message, "bad payload") || st.Errors[0].Job != job {
		t.Errorf("errors %+v: want the one 400 with its message", st.Errors)
	}
	if len(st.Models) != 1 || st.Models[0].State != "READY" {
		t.Errorf("models %+v: want fake READY", st.Models)
	}
}
