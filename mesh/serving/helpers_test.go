package serving_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// These tests run the real parts: an embedded nats-server with JetStream
// and ONNX Runtime on add_f32 (y = 2x + 1, infer/testdata).

const (
	addModel = "../../infer/testdata/add_f32.onnx"
	addBody  = `{"instances":[{"x":[1,2,3,4]}]}`
	addData  = `[3,5,7,9]` // 2x+1, inside the prediction string
)

// requestAdd connects to url with opts, asks job's NATS door for addBody
// and fails the test unless the answer holds addData.
func requestAdd(tb testing.TB, url, job string, opts ...nats.Option) {
	tb.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	reply, err := nc.Request(mesh.PredictSubject(job), []byte(addBody), 10*time.Second)
	if err != nil || !strings.Contains(string(reply.Data), addData) {
		tb.Fatalf("NATS door: got %v, %v; want %s", reply, err, addData)
	}
}

// addConfig is a Node config for the add model as job, on url (empty: an
// embedded server on a random port).
func addConfig(tb testing.TB, job, url string) serving.Config {
	tb.Helper()
	infertest.RequireLibrary(tb)
	return serving.Config{
		URL:      url,
		Embedded: embedded.Config{Port: embedded.RandomPort},
		Models:   []serving.Model{{Name: job, Version: "1", Path: addModel, Job: job}},
		Unit:     serving.UnitConfig{Engine: infertestEngine(), Stream: memoryStream()},
	}
}

// running is a Node whose Run goroutine the test owns.
type running struct {
	*serving.Node
	stop func(cause error)
	done chan error
}

// runNode starts cfg's node and runs it until the test stops it (or ends,
// draining).
func runNode(tb testing.TB, cfg serving.Config) *running {
	tb.Helper()
	n, err := serving.NewNode(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("NewNode: %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &running{Node: n, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- n.Run(ctx) }()
	tb.Cleanup(func() {
		cancel(serving.ErrShutdown)
		<-r.done
		_ = n.Close()
	})
	return r
}

// runReady is runNode, then waits (30 s at most) until the node is ready.
func runReady(tb testing.TB, cfg serving.Config) *running {
	tb.Helper()
	r := runNode(tb, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	return r
}

// wait stops r with cause and returns Run's error.
func (r *running) wait(tb testing.TB, cause error) error {
	tb.Helper()
	r.stop(cause)
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		tb.Fatal("Run did not return")
		return nil
	}
}

func submitAdd(ctx context.Context, c *mesh.Client, job string) error {
	res, err := c.Submit(ctx, job, mesh.Request{Body: []byte(addBody)})
	if err != nil {
		return err
	}
	if !strings.Contains(string(res.Body), addData) {
		return errors.New("answer " + string(res.Body) + " lacks " + addData)
	}
	return nil
}

func infertestEngine() infer.Config { return infer.Config{Threads: 1} }

func memoryStream() mesh.StreamConfig { return mesh.StreamConfig{Storage: jetstream.MemoryStorage} }

// connectEmbedded runs an embedded server for the test and connects to it.
func connectEmbedded(tb testing.TB) *nats.Conn {
	tb.Helper()
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	nc, err := nats.Connect("", srv.ConnectOption())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// waitFor polls cond until it holds (see infertest.WaitFor).
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	infertest.WaitFor(tb, what, cond)
}
