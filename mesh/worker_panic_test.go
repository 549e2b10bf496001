package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// panicPredictor panics on a body starting with "panic" and echoes the
// others upper-cased.
type panicPredictor struct{}

func (panicPredictor) Predict(_ context.Context, _ string, body []byte) ([]byte, error) {
	if strings.HasPrefix(string(body), "panic") {
		panic("predictor bug")
	}
	return []byte(strings.ToUpper(string(body))), nil
}

// TestWorkerRecoversPanic checks that a Predictor panic fails that one
// record with status 500 and the worker serves the next.
func TestWorkerRecoversPanic(t *testing.T) {
	sc := mesh.StreamConfig{Job: "panics", MaxDeliver: 2, Backoff: 10 * time.Millisecond}
	_, nc := startStreams(t, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, panicPredictor{})
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err := c.Submit(ctx, "panics", mesh.Request{URI: "r1", Body: []byte("panic-1")})
	var me *status.Error
	if !errors.As(err, &me) || me.Status != 500 || !strings.Contains(me.Message, "predictor bug") {
		t.Fatalf("got error %v, want a 500 *status.Error naming the panic", err)
	}
	res, err := c.Submit(ctx, "panics", mesh.Request{URI: "r2", Body: []byte("next")})
	if err != nil {
		t.Fatalf("next request: %v", err)
	}
	if got, want := string(res.Body), "NEXT"; got != want {
		t.Errorf("got body %q, want %q", got, want)
	}
}

// unanswerablePredictor counts its calls and fails each one as a codec
// does that cannot write the outputs (status.ErrUnanswerable).
type unanswerablePredictor struct{ calls chan struct{} }

func (p unanswerablePredictor) Predict(context.Context, string, []byte) ([]byte, error) {
	p.calls <- struct{}{}
	return nil, fmt.Errorf("output %q: %w", "y", status.ErrUnanswerable)
}

// TestWorkerAnswersUnanswerableAtOnce checks that outputs no try can
// write are a 500 at the first delivery, not after MaxDeliver retries.
func TestWorkerAnswersUnanswerableAtOnce(t *testing.T) {
	sc := mesh.StreamConfig{Job: "unanswerable", MaxDeliver: 5, Backoff: 10 * time.Millisecond}
	_, nc := startStreams(t, sc)
	p := unanswerablePredictor{calls: make(chan struct{}, 10)}
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, p)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Submit(ctx, "unanswerable", mesh.Request{URI: "r1", Body: []byte("x")})
	var me *status.Error
	if !errors.As(err, &me) || me.Status != 500 || strings.Contains(me.Message, "gave up") {
		t.Fatalf("got error %v, want a 500 *status.Error at the first delivery", err)
	}
	if n := len(p.calls); n != 1 {
		t.Errorf("Predict ran %d times, want 1", n)
	}
}
