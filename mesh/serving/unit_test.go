package serving_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

func TestUnitServesItsJob(t *testing.T) {
	infertest.RequireLibrary(t)
	nc := connectEmbedded(t)
	u, err := serving.NewUnit(serving.UnitConfig{
		Model:  serving.Model{Name: "add", Version: "1", Path: addModel, Job: "unit"},
		Engine: infertestEngine(),
		Stream: memoryStream(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	if got := u.Info().InputNames(); len(got) != 1 || got[0] != "x" {
		t.Errorf("inputs: got %v, want [x]", got)
	}
	if u.Ready() {
		t.Error("Ready before Run: got true, want false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx, nc) }()
	waitFor(t, "the unit to run", u.Ready)

	client, err := mesh.NewClient(nc, mesh.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := submitAdd(sctx, client, "unit"); err != nil {
		t.Fatal(err)
	}
	if got := u.Stats().Processed; got != 1 {
		t.Errorf("processed: got %d, want 1", got)
	}
	if err := u.Run(ctx, nc); err == nil {
		t.Error("second Run: got nil, want an error")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
	if u.Ready() {
		t.Error("Ready after Run: got true, want false")
	}
	if err := errors.Join(u.Close(), u.Close()); err != nil {
		t.Errorf("Close twice: %v", err)
	}
}

func TestUnitConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  serving.UnitConfig
		want error
	}{
		{"no job", serving.UnitConfig{Model: serving.Model{Path: "m"}}, serving.ErrInvalidConfig},
		{"no path", serving.UnitConfig{Model: serving.Model{Job: "j"}}, serving.ErrInvalidConfig},
		{"engine", serving.UnitConfig{Model: serving.Model{Path: "m", Job: "j"}, Engine: infer.Config{MaxBatch: -1}}, infer.ErrConfigValidation},
		{"worker", serving.UnitConfig{Model: serving.Model{Path: "m", Job: "j"}, MaxInflight: -1}, mesh.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}
