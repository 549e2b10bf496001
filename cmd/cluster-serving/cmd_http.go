package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/http"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// httpAddr is where the HTTP door listens: httpInterface:httpPort.
func httpAddr(cfg *Config) string {
	return net.JoinHostPort(cfg.HTTPInterface, strconv.Itoa(cfg.HTTPPort))
}

// httpConfig maps config.yaml's HTTP keys and the served models to the
// door's Config.
func httpConfig(cfg *Config, served []servedModel, ready func() bool, d doorDeps) httpdoor.Config {
	hc := httpdoor.Config{
		Addr:           httpAddr(cfg),
		RequestTimeout: time.Duration(cfg.HTTPRequestTimeout) * time.Millisecond,
		MaxBodyBytes:   cfg.HTTPMaxBodyBytes,
		Ready:          ready,
		Version:        semver(version),
		ShutdownGrace:  cfg.grace(),
		Logger:         d.log,
		Metrics:        d.metrics,
	}
	if cfg.TokenBucketEnabled {
		hc.TokensPerSecond = cfg.TokensPerSecond
		hc.TokenAcquireTimeout = time.Duration(cfg.TokenAcquireTimeout) * time.Millisecond
	}
	for _, m := range served {
		hc.Models = append(hc.Models, httpdoor.Model{Name: m.name, Version: m.version, Job: m.job, Info: m.info})
	}
	return hc
}

// startHTTPDoor runs the HTTP door in g unless httpPort is -1. It listens
// before returning, so a port in use fails `start` at once.
func startHTTPDoor(ctx context.Context, g *errgroup.Group, d doorDeps) error {
	if d.cfg.HTTPPort < 0 {
		return nil
	}
	door, err := httpdoor.New(d.client, httpConfig(d.cfg, d.served, d.ready, d))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", httpAddr(d.cfg))
	if err != nil {
		return fmt.Errorf("HTTP door (config keys \"httpInterface\", \"httpPort\"): %w", err)
	}
	g.Go(func() error { return door.Serve(ctx, ln) })
	return nil
}

// cmdHTTP runs the HTTP door alone against an external NATS. It reads each
// model's inputs and outputs (for metadata and examples) by opening an ONNX
// Runtime session and closing it again; workers elsewhere run the models.
func cmdHTTP(ctx context.Context, stop <-chan stopKind, args []string, stdout, stderr io.Writer) error {
	f, cfg, err := parseServeFlags("http", args, stderr)
	if err != nil {
		return err
	}
	if cfg.NatsURL == "" {
		return errors.New("http joins an existing NATS: set natsUrl in the config or pass -nats nats://host:4222")
	}
	if cfg.HTTPPort < 0 {
		return errors.New("config key \"httpPort\": -1 disables the HTTP door; set a port to run `http`")
	}
	log := newLogger(cfg, stderr)
	log.Debug("effective config", "config", cfg)
	removePID, err := writePID(cfg.JobName, "http", f.args())
	if err != nil {
		return err
	}
	defer removePID()
	tel, metrics, err := setupTelemetry(ctx, cfg)
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel, log)

	served, err := loadModelInfo(cfg)
	if err != nil {
		return err
	}
	nc, err := connect(cfg.NatsURL, cfg, nil, "http")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The streams exist whichever process comes up first.
	for _, m := range served {
		if err := mesh.EnsureStreams(ctx, js, streamConfigFor(cfg, m.job)); err != nil {
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
	d := doorDeps{cfg: cfg, client: client, nc: nc, log: log, served: served, ready: nc.IsConnected, metrics: metrics}
	door, err := httpdoor.New(client, httpConfig(cfg, served, d.ready, d))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", httpAddr(cfg))
	if err != nil {
		return fmt.Errorf("HTTP door (config keys \"httpInterface\", \"httpPort\"): %w", err)
	}
	fmt.Fprintf(stdout, "HTTP door on http://%s for %d model(s), queues on NATS %s\n", ln.Addr(), len(served), cfg.NatsURL)
	printOtherModels(stdout, cfg, served)

	g, gctx := errgroup.WithContext(ctx)
	serveMetrics(gctx, g, cfg, tel, log)
	g.Go(func() error { return door.Serve(gctx, ln) })
	g.Go(func() error {
		select {
		case <-stop:
			log.Info("stopping: finishing requests in flight", "grace", cfg.grace())
		case <-gctx.Done():
		}
		return nil
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if derr := nc.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
		log.Warn("nats drain", "err", derr)
	}
	return err
}

// loadModelInfo reads each served model's description without keeping a
// session.
func loadModelInfo(cfg *Config) ([]servedModel, error) {
	lib, err := infer.FindLibrary(cfg.OnnxruntimeLib, os.Getenv("ONNXRUNTIME_LIB"))
	if err != nil {
		return nil, err
	}
	if err := infer.Init(lib); err != nil {
		return nil, err
	}
	served := cfg.servedModels()
	for i := range served {
		file, err := infer.ModelFile(served[i].path)
		if err != nil {
			return nil, fmt.Errorf("model %s version %s: %w", served[i].name, served[i].version, err)
		}
		s, err := infer.NewSession(file, 1)
		if err != nil {
			return nil, fmt.Errorf("model %s version %s: %w", served[i].name, served[i].version, err)
		}
		served[i].info = s.Info()
		if err := s.Close(); err != nil {
			return nil, err
		}
	}
	return served, nil
}
