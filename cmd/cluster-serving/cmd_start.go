package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// ortVersion is the ONNX Runtime release the Makefile pins (the C API that
// onnxruntime_go v1.27.0 is built against).
const ortVersion = "1.24.1"

type serveFlags struct {
	config      string // absolute, for the pid file and restart
	shownConfig string // as the user gave it, for messages
	nats        string
}

func parseServeFlags(name string, args []string, stderr io.Writer) (*serveFlags, *Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &serveFlags{}
	fs.StringVar(&f.config, "c", "config.yaml", "config file")
	fs.StringVar(&f.nats, "nats", "", "NATS URL; overrides natsUrl of the config")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return nil, nil, err
	}
	if f.nats != "" {
		cfg.NatsURL = f.nats
	}
	f.shownConfig = f.config
	if abs, err := filepath.Abs(f.config); err == nil {
		f.config = abs
	}
	return f, cfg, nil
}

func (f *serveFlags) args() []string {
	a := []string{"-c", f.config}
	if f.nats != "" {
		a = append(a, "-nats", f.nats)
	}
	return a
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel)) // validated with the config
	opts := &slog.HandlerOptions{Level: lvl}
	// Lines logged with a request's ctx carry its trace_id and span_id.
	if cfg.LogFormat == "json" {
		return slog.New(telemetry.NewTraceHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(telemetry.NewTraceHandler(slog.NewTextHandler(w, opts)))
}

// cmdStart runs everything one machine needs: the embedded NATS server
// (unless natsUrl names an external one), and for each model its job's
// streams, engine and worker; then the NATS request-reply door, the Redis
// door (when redisUrl is set) and the HTTP door (unless httpPort is -1).
func cmdStart(ctx context.Context, stop <-chan stopKind, args []string, stdout, stderr io.Writer) error {
	f, cfg, err := parseServeFlags("start", args, stderr)
	if err != nil {
		return err
	}
	return serve(ctx, stop, f, cfg, "start", stdout, stderr)
}

// cmdWorker joins an existing NATS (natsUrl or -nats) as one more worker.
func cmdWorker(ctx context.Context, stop <-chan stopKind, args []string, stdout, stderr io.Writer) error {
	f, cfg, err := parseServeFlags("worker", args, stderr)
	if err != nil {
		return err
	}
	if cfg.NatsURL == "" {
		return errors.New("worker joins an existing NATS: set natsUrl in the config or pass -nats nats://host:4222")
	}
	return serve(ctx, stop, f, cfg, "worker", stdout, stderr)
}

func serve(ctx context.Context, stop <-chan stopKind, f *serveFlags, cfg *Config, role string, stdout, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	log.Debug("effective config", "config", cfg)
	tel, metrics, err := setupTelemetry(ctx, cfg)
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel, log)
	removePID, err := writePID(cfg.JobName, role, f.args())
	if err != nil {
		return err
	}
	defer removePID()

	// The model first: a bad model directory is the commonest mistake and
	// should fail before anything listens.
	lib, err := infer.FindLibrary(cfg.OnnxruntimeLib, os.Getenv("ONNXRUNTIME_LIB"))
	if err != nil {
		return err
	}
	if err := infer.Init(lib); err != nil {
		return err
	}
	served := cfg.servedModels()
	var engines []*infer.Engine
	defer func() {
		for _, e := range engines {
			e.Close()
		}
	}()
	for i := range served {
		m := &served[i]
		loadStart := time.Now()
		ecfg := engineConfig(cfg, m.path)
		ecfg.Hooks = engineHooks(metrics, m.job, m.name)
		engine, err := infer.New(ecfg)
		outcome := telemetry.OutcomeOK
		if err != nil {
			outcome = telemetry.OutcomeError
		}
		metrics.RecordModelLoad(ctx, m.name, outcome, time.Since(loadStart))
		if err != nil {
			if len(served) > 1 {
				return fmt.Errorf("model %s version %s: %w", m.name, m.version, err)
			}
			return err
		}
		engines = append(engines, engine)
		m.info = engine.Info()
		log.Info("model loaded", "name", m.name, "version", m.version, "job", m.job, "model", m.info.Path,
			"inputs", ioString(m.info.Inputs), "outputs", ioString(m.info.Outputs),
			"sessions", cfg.ModelParallelism, "threads", cfg.ThreadPerModel, "took", time.Since(loadStart).Round(time.Millisecond))
	}
	info := served[0].info

	natsURL := cfg.NatsURL
	var srv *embedded.Server
	if natsURL == "" && role == "start" {
		srv, err = startEmbedded(cfg)
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		natsURL = srv.ClientURL()
		log.Info("embedded NATS server started", "url", natsURL, "store", storeDir(cfg))
	}
	nc, err := connect(natsURL, cfg, srv, role)
	if err != nil {
		return err
	}
	defer nc.Close()

	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// Streams exist before the door opens, so its first publish lands.
	var workers []*mesh.Worker
	jobs := make([]string, len(served))
	for i, m := range served {
		jobs[i] = m.job
		sc := streamConfigFor(cfg, m.job)
		if err := mesh.EnsureStreams(ctx, js, sc); err != nil {
			return err
		}
		worker, err := mesh.NewWorker(nc, mesh.WorkerConfig{
			Stream:        sc,
			MaxInflight:   cfg.WorkerInflight,
			ShutdownGrace: cfg.grace(),
			Logger:        log,
			Metrics:       metrics,
			Model:         m.name,
			Version:       semver(version),
		}, wire.NewPredictor(engines[i], wire.Model{Name: m.name, Version: m.version}))
		if err != nil {
			return err
		}
		workers = append(workers, worker)
	}

	if err := observeQueues(metrics, js, jobs); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	serveMetrics(gctx, g, cfg, tel, log)
	for _, w := range workers {
		g.Go(func() error { return w.Run(gctx) })
	}
	if role == "start" {
		client, err := mesh.NewClient(nc, mesh.ClientConfig{})
		if err != nil {
			return err
		}
		defer client.Close()
		svc, err := mesh.NewService(nc, client, mesh.ServiceConfig{Jobs: jobs, Version: semver(version), Metrics: metrics})
		if err != nil {
			return err
		}
		g.Go(func() error { return svc.Run(gctx) })
		var ready atomic.Bool
		infos := make([]infer.ModelInfo, len(served))
		for i, m := range served {
			infos[i] = m.info
		}
		doors := doorDeps{cfg: cfg, client: client, nc: nc, log: log, models: infos, served: served, ready: ready.Load, metrics: metrics}
		if err := startRedisDoor(gctx, g, doors); err != nil {
			return err
		}
		if err := startHTTPDoor(gctx, g, doors); err != nil {
			return err
		}
		g.Go(func() error {
			// Say how to call it once the endpoint answers, not before.
			for gctx.Err() == nil {
				if _, err := nc.Request("$SRV.PING."+mesh.ServiceName, nil, time.Second); err == nil {
					ready.Store(true)
					printHowToCall(stdout, cfg, f.shownConfig, natsURL, info)
					printOtherModels(stdout, cfg, served)
					return nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return nil
		})
	} else {
		fmt.Fprintf(stdout, "worker of job %q joined %s\n", cfg.JobName, natsURL)
	}

	// Ctrl-C or `stop`: close the engine at once so that in-flight requests
	// fail over to the queue (the worker naks them; JetStream redelivers).
	// `shutdown` (SIGTERM) lets the worker drain within shutdownGrace.
	g.Go(func() error {
		select {
		case kind := <-stop:
			if kind == stopNow {
				log.Info("stopping now: in-flight requests go back to the queue")
				for _, e := range engines {
					e.Close()
				}
			} else {
				log.Info("shutting down: finishing in-flight requests", "grace", cfg.grace())
			}
		case <-gctx.Done():
		}
		return nil
	})
	err = waitAndDrain(g, nc, log)
	var processed uint64
	for _, w := range workers {
		processed += w.Stats().Processed
	}
	log.Info("stopped", "processed", processed)
	return err
}

var semverRE = regexp.MustCompile(`^v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`)

// semver turns the build version into the SemVer the micro service requires:
// "v1.2.3" -> "1.2.3"; a git hash or "dev" -> "0.0.0-<it>".
func semver(v string) string {
	if m := semverRE.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	clean := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(v, "-")
	return "0.0.0-" + strings.Trim(clean, "-")
}

// doorDeps is what a door started by `start` gets.
type doorDeps struct {
	cfg    *Config
	client *mesh.Client
	nc     *nats.Conn
	log    *slog.Logger
	// models describes the served models, the default (job cfg.JobName) first.
	models []infer.ModelInfo
	// served lists the same models with their names, versions and jobs.
	served []servedModel
	// ready reports whether every model is loaded and the NATS door answers.
	ready func() bool
	// metrics records requests at the door; nil records none.
	metrics *telemetry.Metrics
}

func engineConfig(cfg *Config, path string) infer.Config {
	var resize [2]int
	if cfg.ImageResize != "" {
		resize[0], resize[1], _ = parseResize(cfg.ImageResize) // validated with the config
	}
	mean, _ := parseTriple(cfg.ImageMean)
	std, _ := parseTriple(cfg.ImageStd)
	return infer.Config{
		ModelPath:           path,
		Parallelism:         cfg.ModelParallelism,
		Threads:             cfg.ThreadPerModel,
		MaxBatch:            cfg.MaxBatch,
		MaxWait:             cfg.maxWait(),
		PostProcessing:      cfg.PostProcessing,
		InputAlreadyBatched: cfg.InputAlreadyBatched,
		ImageResize:         resize,
		ImageLayout:         cfg.ImageLayout,
		ImageChannels:       cfg.ImageChannels,
		ImageScale:          float32(cfg.ImageScale),
		ImageMean:           mean,
		ImageStd:            std,
	}
}

// streamConfig is the stream of the default model's job, cfg.JobName.
func streamConfig(cfg *Config) mesh.StreamConfig { return streamConfigFor(cfg, cfg.JobName) }

// streamConfigFor is the work queue and results stream of job.
func streamConfigFor(cfg *Config, job string) mesh.StreamConfig {
	storage := jetstream.FileStorage
	if cfg.QueueStorage == "memory" {
		storage = jetstream.MemoryStorage
	}
	return mesh.StreamConfig{
		Job:        job,
		Replicas:   cfg.QueueReplicas,
		Storage:    storage,
		MaxMsgs:    cfg.QueueMaxMsgs,
		MaxBytes:   cfg.QueueMaxBytes,
		AckWait:    cfg.ackWait(),
		MaxDeliver: cfg.MaxDeliver,
		ResultTTL:  time.Duration(cfg.ResultTTL) * time.Second,
	}
}

func storeDir(cfg *Config) string {
	if cfg.NatsStoreDir != "" {
		return cfg.NatsStoreDir
	}
	return filepath.Join("data", "jetstream")
}

func startEmbedded(cfg *Config) (*embedded.Server, error) {
	host, port, err := splitHostPort(cfg.NatsListen)
	if err != nil {
		return nil, fmt.Errorf("config key \"natsListen\": %w", err)
	}
	return embedded.Start(embedded.Config{
		Host:       host,
		Port:       port,
		StoreDir:   storeDir(cfg),
		MaxPayload: int32(cfg.NatsMaxPayload),
	})
}

func connect(url string, cfg *Config, srv *embedded.Server, role string) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("cluster-serving " + role + " " + cfg.JobName),
		nats.MaxReconnects(-1),
	}
	if srv != nil {
		opts = append(opts, srv.ConnectOption())
	}
	if cfg.NatsCredentials != "" {
		opts = append(opts, nats.UserCredentials(cfg.NatsCredentials))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
}

func ioString(ios []infer.IO) string {
	parts := make([]string, len(ios))
	for i, io := range ios {
		parts[i] = fmt.Sprintf("%s:%s%v", io.Name, io.DType, io.Shape)
	}
	return strings.Join(parts, ",")
}

func printHowToCall(w io.Writer, cfg *Config, cfgPath, url string, info infer.ModelInfo) {
	subject := mesh.PredictSubject(cfg.JobName)
	fmt.Fprintf(w, `
cluster-serving is serving job %q
  model:   %s
  inputs:  %s
  outputs: %s
  NATS:    %s   request-reply subject: %s

Call it from another terminal:
  bin/cluster-serving predict -c %s -fill 0.5%s   # one request, every value 0.5
  bin/cluster-serving predict -c %s -d '{"instances":[{...}]}'
  nats req %s '{"instances":[{...}]}'    # with the nats CLI
  bin/cluster-serving status -c %s       # throughput, queue depth, latency, workers
Stop with Ctrl-C (in-flight work goes back to the queue) or: bin/cluster-serving shutdown -c %s

`, cfg.JobName, info.Path, ioString(info.Inputs), ioString(info.Outputs), url, subject,
		cfgPath, shapeHint(info), cfgPath, subject, cfgPath, cfgPath)
}

// shapeHint suggests -shape when an input has dynamic dimensions besides
// the batch: -fill alone would set them to 1.
func shapeHint(info infer.ModelInfo) string {
	for _, in := range info.Inputs {
		if len(in.Shape) < 2 || !slices.Contains(in.Shape[1:], -1) {
			continue
		}
		dims := make([]string, len(in.Shape)-1)
		for i, d := range in.Shape[1:] {
			dims[i] = strconv.FormatInt(d, 10)
			if d < 0 {
				dims[i] = "N"
			}
		}
		return " -shape " + strings.Join(dims, ",")
	}
	return ""
}

// printOtherModels says where the HTTP door listens and, when there are
// several models, each model's NATS subject and HTTP route.
func printOtherModels(w io.Writer, cfg *Config, served []servedModel) {
	if cfg.HTTPPort > 0 {
		fmt.Fprintf(w, "  HTTP:    http://%s   POST /predict, /v2/models/%s/infer; GET /models, /metrics, /v2/health/ready\n",
			httpAddr(cfg), served[0].name)
	}
	if len(served) > 1 {
		for _, m := range served {
			fmt.Fprintf(w, "  model %s version %s: NATS subject %s", m.name, m.version, mesh.PredictSubject(m.job))
			if cfg.HTTPPort > 0 {
				fmt.Fprintf(w, ", HTTP /v2/models/%s/versions/%s/infer", m.name, m.version)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}
