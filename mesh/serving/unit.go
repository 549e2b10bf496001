package serving

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/pipeline"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// UnitConfig configures a Unit. The zero value, with Model.Path and
// Model.Job set, means all defaults.
type UnitConfig struct {
	// Model names the model, where it is loaded from (Path) and the job
	// that serves it (Job). Path and Job are required.
	Model Model
	// Engine configures the model's engine (infer's defaults for zero
	// fields). ModelPath is Model.Path when empty; Hooks are set to feed
	// Metrics.
	Engine infer.Config
	// Stream configures the job's streams and consumer (mesh's defaults
	// for zero fields); its Job is Model.Job.
	Stream mesh.StreamConfig
	// MaxInflight bounds the requests the worker holds at once. Default
	// mesh.DefaultMaxInflight.
	MaxInflight int
	// ShutdownGrace is how long a drain lets in-flight requests finish.
	// Default mesh.DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Version is the SemVer the worker announces in discovery. Default 0.0.0.
	Version string
	// Logger receives the load line and the worker's errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics records the model load, engine stages and worker figures;
	// nil records none.
	Metrics *telemetry.Metrics
	// Steps configures the client an ensemble's worker submits its steps
	// with (the node's coalesce; mesh's defaults for zero fields).
	Steps mesh.ClientConfig
	// ModelConfig is the model's Triton config.pbtxt as written (a model
	// repository's); nil: none. Before the engine loads, it is completed
	// from the graph and checked against it (see configured), and the
	// completed config's settings override Engine's and Model's (see
	// withSettings).
	ModelConfig *kservepb.ModelConfig
}

// Validate reports the first invalid field: ErrInvalidConfig for Model, or
// the engine's or worker's validation error naming its field.
func (c UnitConfig) Validate() error {
	if err := mesh.ValidateJob(c.Model.Job); err != nil {
		return fmt.Errorf("%w: Model.Job: %w", ErrInvalidConfig, err)
	}
	if c.Model.Path == "" && c.Engine.ModelPath == "" {
		return fmt.Errorf("%w: Model.Path is empty", ErrInvalidConfig)
	}
	if err := c.engine().Validate(); err != nil {
		return err
	}
	return c.worker().Validate()
}

func (c UnitConfig) engine() infer.Config {
	e := c.Engine
	e.ModelPath = cmp.Or(e.ModelPath, c.Model.Path)
	e.ExecutionProvider = cmp.Or(c.Model.ExecutionProvider, e.ExecutionProvider)
	e.Batching = cmp.Or(c.Model.Batching, e.Batching)
	if c.Metrics != nil {
		e.Hooks = engineHooks(c.Metrics, c.Model.Job, c.Model.Name)
	}
	return e
}

func (c UnitConfig) worker() mesh.WorkerConfig {
	s := queueStream(c.Stream, c.Model.ServedConfig())
	s.Job = c.Model.Job
	return mesh.WorkerConfig{
		Stream:        s,
		MaxInflight:   c.MaxInflight,
		ShutdownGrace: c.ShutdownGrace,
		Logger:        c.Logger,
		Metrics:       c.Metrics,
		Model:         c.Model.Name,
		ModelVersion:  c.Model.Version,
		Version:       c.Version,
		Batching:      c.Model.Info.DynamicBatch,
		BatchReason:   c.Model.Info.BatchReason,

		ExecutionProvider: cmp.Or(c.Model.ExecutionProvider, c.Engine.ExecutionProvider, infer.ProviderCPU),
	}
}

// engineHooks feeds an engine's stage times and batch sizes to m.
func engineHooks(m *telemetry.Metrics, job, model string) infer.Hooks {
	return infer.Hooks{
		Stage: func(ctx context.Context, stage string, d time.Duration) {
			m.RecordStage(ctx, stage, job, model, d)
		},
		Batch: func(items, rows int) {
			m.RecordBatch(context.Background(), job, model, items)
		},
	}
}

// predictor is what the unit's worker calls: the wire codecs in front of
// the engine, answering under the model's name and version, and storing
// its answers in the response cache over nc when the model enables it.
func predictor(e *infer.Engine, m Model, nc *nats.Conn) mesh.Predictor {
	return cachedPredictor(wire.NewPredictor(e, wire.Model{Name: m.Name, Version: m.Version}), m, nc)
}

// Unit is the life of one served model: its engine (ONNX Runtime
// sessions behind a batcher) and the mesh.Worker that pulls the job's
// requests into it. A Unit owns its engine; Close releases it. Its methods
// are safe for concurrent use; Run it once.
type Unit struct {
	cfg    UnitConfig
	engine *infer.Engine   // nil for an ensemble or a built-in step
	graph  *pipeline.Graph // an ensemble's steps
	step   *prepost.Step   // a built-in pre- or post-processing step
	worker atomic.Pointer[mesh.Worker]
	// running is true while Run serves; stopped once the engine closed.
	running, stopped atomic.Bool
	sessions         int // the engine's ONNX Runtime sessions
}

// NewUnit validates cfg, loads the model and warms it up (infer.New,
// then the config.pbtxt's model_warmup samples, see warmUp), records the
// load in Metrics and logs it. ONNX Runtime must be
// initialised (infer.Init). It returns cfg's validation error, the
// engine's load error (infer.ErrNotInitialized, a bad model file, ...)
// or a failed warmup (wrapping ErrModelConfig, the engine closed).
func NewUnit(cfg UnitConfig) (*Unit, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	began := time.Now()
	completed, ecfg, err := configured(cfg.ModelConfig, cfg.Model, cfg.engine())
	var engine *infer.Engine
	if err == nil {
		engine, err = infer.New(ecfg)
	}
	if err == nil {
		if err = warmUp(engine, completed, cfg.Model, cfg.Logger); err != nil {
			_ = engine.Close()
		}
	}
	outcome := telemetry.OutcomeOK
	if err != nil {
		outcome = telemetry.OutcomeError
	}
	cfg.Metrics.RecordModelLoad(context.Background(), cfg.Model.Name, outcome, time.Since(began))
	if err != nil {
		return nil, err
	}
	u := &Unit{cfg: cfg, engine: engine, sessions: cmp.Or(ecfg.Parallelism, infer.DefaultParallelism)}
	u.cfg.Model.Info = engine.Info()
	if completed == nil {
		completed, _, _ = completeConfig(nil, cfg.Model.Name, u.cfg.Model.Info, ecfg)
	} else {
		u.cfg.Model.Info.BatchReason = batchReason(modelconfig.SettingsOf(completed))
	}
	u.cfg.Model.Config = completed
	info := u.cfg.Model.Info
	cfg.Logger.Info("model loaded", "name", cfg.Model.Name, "version", cfg.Model.Version, "job", cfg.Model.Job, "model", info.Path,
		"inputs", FormatIO(info.Inputs), "outputs", FormatIO(info.Outputs),
		"sessions", u.sessions, "threads", cmp.Or(ecfg.Threads, infer.DefaultThreads),
		"provider", cmp.Or(ecfg.ExecutionProvider, infer.ProviderCPU), "batching", info.DynamicBatch, "batching_reason", info.BatchReason,
		"took", time.Since(began).Round(time.Millisecond))
	return u, nil
}

// Model returns the unit's model, with its description.
func (u *Unit) Model() Model { return u.cfg.Model }

// Sessions is the number of ONNX Runtime sessions the engine loaded
// (modelParallelism, or a config.pbtxt's instance_group count).
func (u *Unit) Sessions() int { return u.sessions }

// Info describes the model's inputs and outputs.
func (u *Unit) Info() infer.ModelInfo { return u.cfg.Model.Info }

// Run serves the job until ctx ends: its worker ensures the job's streams
// and consumer (mesh.EnsureStreams), pulls requests into the engine and,
// once ctx ends, drains: it stops pulling and lets in-flight requests
// finish within ShutdownGrace. StopNow cuts the drain short. Run returns
// nil when ctx ends, or the error that kept the worker from starting.
func (u *Unit) Run(ctx context.Context, nc *nats.Conn) error {
	var p mesh.Predictor
	wcfg := u.cfg.worker()
	if u.graph != nil {
		// An ensemble's steps are requests on the mesh, submitted from
		// the worker's own connection.
		c, err := mesh.NewClient(nc, u.cfg.Steps)
		if err != nil {
			return err
		}
		defer c.Close()
		p = wire.NewRunnerPredictor(pipeline.New(u.graph, c), u.spec(), u.cfg.engine().Hooks, true)
		wcfg.ExecutionProvider = "ensemble"
	} else if u.step != nil {
		p = wire.NewRunnerPredictor(u.step, u.spec(), u.cfg.engine().Hooks, false)
		wcfg.ExecutionProvider = prepost.Backend
	} else {
		p = predictor(u.engine, u.cfg.Model, nc)
	}
	w, err := mesh.NewWorker(nc, wcfg, p)
	if err != nil {
		return err
	}
	if !u.worker.CompareAndSwap(nil, w) {
		return fmt.Errorf("serving: unit %s: Run called twice", u.cfg.Model.Job)
	}
	u.running.Store(true)
	defer u.running.Store(false)
	return w.Run(ctx)
}

// spec is what the codecs of a unit without an engine know of its model.
func (u *Unit) spec() wire.Spec {
	return wire.Spec{Model: wire.Model{Name: u.cfg.Model.Name, Version: u.cfg.Model.Version}, Info: u.cfg.Model.Info}
}

// Ready reports whether Run serves, its worker pulls records and shows
// in discovery, and the engine is open. Discovery first: nats.go's
// micro.AddService still writes the service's start time after its STATS
// handler is subscribed, so a node that answered ready while a worker
// registered could see a stats call race with it (go test -race did).
func (u *Unit) Ready() bool { return u.running.Load() && u.consuming() }

// consuming reports whether the worker pulls records and shows in
// discovery (a model repository's swap waits for it).
func (u *Unit) consuming() bool {
	w := u.worker.Load()
	return w != nil && w.Consuming() && !u.stopped.Load()
}

// Stats returns the worker's counters; zero before Run.
func (u *Unit) Stats() mesh.WorkerStats {
	if w := u.worker.Load(); w != nil {
		return w.Stats()
	}
	return mesh.WorkerStats{}
}

// StopNow closes the engine while Run may still serve: requests queued or
// running in it fail at once, the worker hands them back to the queue
// (nak) and JetStream redelivers them to another worker or the next
// start. Nothing is lost.
func (u *Unit) StopNow() { _ = u.Close() }

// Close closes the engine and destroys its sessions; call it once Run has
// returned (or use StopNow while it runs). It is idempotent and returns the
// engine's close error.
func (u *Unit) Close() error {
	u.stopped.Store(true)
	if u.engine == nil {
		return nil
	}
	return u.engine.Close()
}

// newEnsembleUnit is the Unit of ensemble g: no engine, a worker whose
// Runner is g's Pipeline (see Run).
func newEnsembleUnit(cfg UnitConfig, g *pipeline.Graph) (*Unit, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Model.Info = g.Info()
	cfg.Model.Config = ensembleConfig(cfg.Model.Name, cfg.ModelConfig)
	return &Unit{cfg: cfg, graph: g}, nil
}

// FormatIO lists inputs or outputs as name:dtype[shape], comma-separated,
// as the logs and banners show them.
func FormatIO(ios []infer.IO) string {
	parts := make([]string, len(ios))
	for i, io := range ios {
		parts[i] = fmt.Sprintf("%s:%s%v", io.Name, io.DType, io.Shape)
	}
	return strings.Join(parts, ",")
}
