package serving_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

func TestNodeServesTheNATSDoorAndDrains(t *testing.T) {
	cfg := addConfig(t, "node", "")
	cfg.Serve, cfg.Service = true, true
	n := runNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if !n.Ready() {
		t.Error("Ready: got false after WaitReady, want true")
	}
	if got := n.Models()[0].Info.InputNames(); len(got) != 1 || got[0] != "x" {
		t.Errorf("model inputs: got %v, want [x]", got)
	}
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reply, err := nc.Request(mesh.PredictSubject("node"), []byte(addBody), 10*time.Second)
	if err != nil || !strings.Contains(string(reply.Data), addData) {
		t.Fatalf("NATS door: got %v, %v; want %s", reply, err, addData)
	}
	if got := n.Units()[0].Stats().Processed; got != 1 {
		t.Errorf("processed: got %d, want 1", got)
	}
	if err := n.wait(t, serving.ErrShutdown); err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n.Ready() {
		t.Error("Ready: got true after Close, want false")
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if nc2, err := nats.Connect(n.URL(), nats.Timeout(time.Second)); err == nil {
		nc2.Close()
		t.Error("the embedded server still accepts connections after Close")
	}
}

// TestStopNowHandsWorkBack stops a worker node at once while it holds a
// request, then starts another: the request is answered by the second,
// through a door-only node on the same external NATS.
func TestStopNowHandsWorkBack(t *testing.T) {
	infertest.RequireLibrary(t)
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	workerCfg := addConfig(t, "handback", srv.ClientURL())
	workerCfg.Serve = true
	doorCfg := addConfig(t, "handback", srv.ClientURL())
	doorCfg.Describe = true

	first := runNode(t, workerCfg)
	first.StopNow() // every request it takes fails over
	door := runNode(t, doorCfg)
	if got := door.Models()[0].Info.InputNames(); len(got) != 1 || got[0] != "x" {
		t.Errorf("described inputs: got %v, want [x]", got)
	}
	answered := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		answered <- submitAdd(ctx, door.Client(), "handback")
	}()
	waitFor(t, "the first worker to hand the request back", func() bool { return first.Units()[0].Stats().Retried > 0 })
	if err := first.wait(t, serving.ErrStopNow); err != nil {
		t.Errorf("Run after stop-now: got %v, want nil", err)
	}
	second := runNode(t, workerCfg)
	if err := <-answered; err != nil {
		t.Fatalf("request handed back: %v", err)
	}
	if a, b := first.Units()[0].Stats().Processed, second.Units()[0].Stats().Processed; a != 0 || b != 1 {
		t.Errorf("processed: got first %d, second %d; want 0 and 1", a, b)
	}
}

func TestNewNodeErrors(t *testing.T) {
	infertest.RequireLibrary(t)
	two := addConfig(t, "two", "")
	two.Serve = true
	two.Models = append(two.Models, serving.Model{Name: "missing", Version: "2", Path: "no/such/model", Job: "two-missing-v2"})
	described := addConfig(t, "described", "")
	described.Describe = true
	described.Models[0].Path = "no/such/model"
	tests := []struct {
		name string
		cfg  serving.Config
		want string
	}{
		{"no models", serving.Config{}, "Models is empty"},
		{"bad job", serving.Config{Models: []serving.Model{{Name: "m", Job: "a.b"}}}, "Models: m"},
		{"missing second model", two, "model missing version 2: "},
		{"describe a missing model", described, "model described version 1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := serving.NewNode(context.Background(), tt.cfg)
			if err == nil {
				_ = n.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
