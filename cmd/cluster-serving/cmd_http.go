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

	"golang.org/x/sync/errgroup"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/http"
	"github.com/cluster-serving/cluster-serving/infer"
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
	if cfg.HTTPPort < 0 {
		return errors.New("config key \"httpPort\": -1 disables the HTTP door; set a port to run `http`")
	}
	served, err := loadModelInfo(cfg)
	if err != nil {
		return err
	}
	jobs := make([]string, len(served))
	for i, m := range served {
		jobs[i] = m.job
	}
	return runDoorProcess(ctx, stop, "http", f, cfg, jobs, stderr, func(ctx context.Context, g *errgroup.Group, d doorDeps) error {
		d.served = served
		if err := startHTTPDoor(ctx, g, d); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "HTTP door on http://%s for %d model(s), queues on NATS %s\n", httpAddr(cfg), len(served), cfg.NatsURL)
		printOtherModels(stdout, cfg, served)
		return nil
	})
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
