// Package doortest runs the mesh behind a door for the HTTP and gRPC
// doors' tests: an embedded NATS server on a random port, a JetStream
// work queue and a Worker per served model, on a real engine of
// infer/testdata (through its wire.Predictor) or a Predictor standing in
// for one, and the mesh.Client a door sends work with.
package doortest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Served is one model behind a door: its name, version ("" = 1) and
// file of infer/testdata, or a Predictor standing in for the engine (then
// Info describes it). Its job is Name, or Name-v<Version> with a version.
type Served struct {
	Name, Version, File string
	Predictor           mesh.Predictor
	Info                infer.ModelInfo
	// Stream configures the job's streams; its Job is filled in, its
	// Storage defaults to memory.
	Stream mesh.StreamConfig
	// NoWorker leaves the job without a worker.
	NoWorker bool
	// Engine configures the engine on File; its ModelPath is filled in,
	// its MaxBatch defaults to 8.
	Engine infer.Config
	// Cached has the engine's worker store its answers in the mesh's
	// response cache, as a worker of a model with response_cache does
	// (a door looks them up for a model whose Config enables it).
	Cached bool
}

// Mesh is the mesh StartMesh runs, until the test ends.
type Mesh struct {
	NC     *nats.Conn
	Client *mesh.Client
	// Models are the served models, as a door's Config takes them.
	Models []door.Model
}

// StartMesh runs the mesh for models until the test ends, and fills in
// cfg, a door's: the served models are appended to its Models, and its
// Logger, when nil, is one that discards.
func StartMesh(tb testing.TB, cfg *door.Config, models ...Served) *Mesh {
	tb.Helper()
	s := meshtest.StartServer(tb)
	nc := meshtest.Connect(tb, s)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	m := &Mesh{NC: nc}
	for _, sv := range models {
		sc := sv.Stream
		sc.Job = sv.Name + "-v" + sv.Version
		if sv.Version == "" {
			sc.Job = sv.Name
		}
		if sc.Storage == 0 {
			sc.Storage = jetstream.MemoryStorage
		}
		if err := mesh.EnsureStreams(ctx, js, sc); err != nil {
			tb.Fatal(err)
		}
		wc := meshtest.Connect(tb, s) // the worker's own, as another process's
		p, info := sv.predictor(tb, wc, sc.Job)
		m.Models = append(m.Models, door.Model{Name: sv.Name, Version: sv.Version, Job: sc.Job, Info: info})
		if sv.NoWorker {
			continue
		}
		w, err := mesh.NewWorker(wc, mesh.WorkerConfig{Stream: sc, ShutdownGrace: time.Second}, p)
		if err != nil {
			tb.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		tb.Cleanup(func() { cancel(); <-done })
	}
	if m.Client, err = mesh.NewClient(nc, mesh.ClientConfig{}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Client.Close() })
	cfg.Models = append(cfg.Models, m.Models...)
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	return m
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// Connect opens another connection to the mesh's NATS server, as each
// process (a door, a worker) has its own; it closes at cleanup.
func (m *Mesh) Connect(tb testing.TB) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(m.NC.ConnectedUrl())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// predictor is sv's Predictor and the info of its model: an engine on
// File unless sv has a Predictor or no File, storing its answers in the
// response cache over nc, as job's, when sv is Cached.
func (sv Served) predictor(tb testing.TB, nc *nats.Conn, job string) (mesh.Predictor, infer.ModelInfo) {
	if sv.Predictor != nil || sv.File == "" {
		return sv.Predictor, sv.Info
	}
	ec := sv.Engine
	ec.ModelPath = infertest.Model(sv.File)
	if ec.MaxBatch == 0 {
		ec.MaxBatch = 8
	}
	e := infertest.NewEngine(tb, ec)
	p := wire.NewPredictor(e, wire.Model{Name: sv.Name, Version: sv.Version})
	if sv.Cached {
		c, err := mesh.NewCache(nc, mesh.CacheConfig{OpenOnly: true, Logger: discard})
		if err != nil {
			tb.Fatal(err)
		}
		p = p.WithCache(c.Job(job))
	}
	return p, e.Info()
}

// WriteFile replaces path's contents with data atomically (a new file
// renamed over it), as a deployer should replace a token file.
func WriteFile(tb testing.TB, path, data string) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// The W3C traceparent a door's trace tests send: the caller's trace
// TraceID and its span ParentID.
const (
	TraceID     = "0af7651916cd43dd8448eb211c80319c"
	ParentID    = "b7ad6b7169203331"
	Traceparent = "00-" + TraceID + "-" + ParentID + "-01"
)

// CheckTraceContinued checks, among the spans ended, that span, the
// door's span of a request that carried Traceparent, is the caller's
// child in its trace, that the JetStream publish is span's child and that
// the worker's span is in the same trace.
func CheckTraceContinued(tb testing.TB, ended meshtest.Ended, span string) {
	tb.Helper()
	d, pub, proc := ended.Find(span), ended.Find(telemetry.SpanPublish), ended.Find(telemetry.SpanProcess)
	if d.SpanContext.TraceID().String() != TraceID || d.Parent.SpanID().String() != ParentID {
		tb.Errorf("%s: got trace %s parent %s, want the caller's %s %s", span, d.SpanContext.TraceID(), d.Parent.SpanID(), TraceID, ParentID)
	}
	if pub == nil || pub.Parent.SpanID() != d.SpanContext.SpanID() {
		tb.Errorf("jetstream publish: want the child of %s, got %+v", span, pub)
	}
	if proc.SpanContext.TraceID().String() != TraceID {
		tb.Errorf("worker span: got trace %s, want %s", proc.SpanContext.TraceID(), TraceID)
	}
}
