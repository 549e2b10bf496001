package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// runDoorProcess is the life of a process that runs one door alone against
// an external NATS (`http`, `bridge`): pid file, telemetry, NATS, the jobs'
// streams (whichever process comes up first creates them) and a mesh
// client; then open starts the door in g. It returns when ctx ends (a
// signal), after the door finished what it had in flight.
func runDoorProcess(ctx context.Context, stop <-chan stopKind, role string, f *serveFlags, cfg *Config, jobs []string,
	stderr io.Writer, open func(ctx context.Context, g *errgroup.Group, d doorDeps) error) error {
	if cfg.NatsURL == "" {
		return fmt.Errorf("%s joins an existing NATS: set natsUrl in the config or pass -nats nats://host:4222", role)
	}
	log := newLogger(cfg, stderr)
	log.Debug("effective config", "config", cfg)
	removePID, err := writePID(cfg.JobName, role, f.args())
	if err != nil {
		return err
	}
	defer removePID()
	tel, metrics, err := setupTelemetry(ctx, cfg)
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel, log)

	nc, err := connect(cfg.NatsURL, cfg, nil, role)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for _, job := range jobs {
		if err := mesh.EnsureStreams(ctx, js, streamConfigFor(cfg, job)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	client, err := mesh.NewClient(nc, mesh.ClientConfig{})
	if err != nil {
		return err
	}
	defer client.Close()

	g, gctx := errgroup.WithContext(ctx)
	serveMetrics(gctx, g, cfg, tel, log)
	if err := open(gctx, g, doorDeps{cfg: cfg, client: client, nc: nc, log: log, ready: nc.IsConnected, metrics: metrics}); err != nil {
		return err
	}
	g.Go(func() error {
		select {
		case <-stop:
			log.Info("stopping: finishing the work in flight", "grace", cfg.grace())
		case <-gctx.Done():
		}
		return nil
	})
	err = waitAndDrain(g, nc, log)
	log.Info("stopped")
	return err
}

// waitAndDrain waits for a process's parts to stop, then drains its NATS
// connection so that acks and results still buffered reach the server. A
// ctx cancelled by a signal is not an error.
func waitAndDrain(g *errgroup.Group, nc *nats.Conn, log *slog.Logger) error {
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if derr := nc.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
		log.Warn("nats drain", "err", derr)
	}
	return err
}
