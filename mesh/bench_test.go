package mesh_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	natsserver "github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// echoPredictor is the cheapest Predictor: it returns the body.
type echoPredictor struct{}

func (echoPredictor) Predict(_ context.Context, _ string, body []byte) ([]byte, error) {
	return body, nil
}

// benchStorages are the stores the benchmarks compare.
var benchStorages = []struct {
	name    string
	storage jetstream.StorageType
}{
	{"file", jetstream.FileStorage},
	{"memory", jetstream.MemoryStorage},
}

// echoMesh starts a server with job "bench"'s streams on storage and a
// Worker answering with echoPredictor on a connection of its own, and
// returns the server and another connection.
func echoMesh(b *testing.B, storage jetstream.StorageType) (*natsserver.Server, *nats.Conn) {
	s := meshtest.StartServer(b)
	nc := meshtest.Connect(b, s)
	sc := mesh.StreamConfig{Job: "bench", Storage: storage}
	ensure(b, nc, sc)
	runWorker(b, meshtest.Connect(b, s), mesh.WorkerConfig{Stream: sc}, echoPredictor{})
	return s, nc
}

// BenchmarkSubmit measures one request's round trip through the work queue
// and a Worker (publish, PubAck, pull, Predict, reply, ack). Compare its
// ns/op with BenchmarkCoreRequest; the target is within about 3x.
func BenchmarkSubmit(b *testing.B) {
	for _, tc := range benchStorages {
		b.Run(tc.name, func(b *testing.B) {
			_, nc := echoMesh(b, tc.storage)
			c := newClient(b, nc)
			body := make([]byte, 256)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for b.Loop() {
				if _, err := c.Submit(ctx, "bench", mesh.Request{Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNATSDoor measures one request-reply of a NATS caller through
// the NATS door (Service), the work queue and a Worker that answers the
// caller directly (Client.Forward), one caller, each on its own
// connection as in a deployment. Compare its ns/op with
// BenchmarkCoreRequest (a trivial responder) and BenchmarkSubmit (the
// door's inbox in the middle, as HTTP has it).
func BenchmarkNATSDoor(b *testing.B) {
	s, nc := echoMesh(b, jetstream.FileStorage)
	svc := startService(b, nc, nc, mesh.ServiceConfig{Jobs: []string{"bench"}})
	caller := meshtest.Connect(b, s)
	meshtest.WaitFor(b, "the door", func() bool { return svc.ID() != "" })
	body := make([]byte, 256)
	for b.Loop() {
		m, err := caller.Request(mesh.PredictSubject("bench"), body, 10*time.Second)
		if err != nil || len(m.Data) != len(body) {
			b.Fatalf("request: %v, %v", m, err)
		}
	}
}

// BenchmarkNATSDoorParallel is BenchmarkNATSDoor with 32 callers per
// core on one connection: the door coalesces what arrives while its
// stores are in flight (coalesce.go), so its allocs/op are the batch
// path's, server and worker included.
func BenchmarkNATSDoorParallel(b *testing.B) {
	s, nc := echoMesh(b, jetstream.FileStorage)
	svc := startService(b, meshtest.Connect(b, s), nc, mesh.ServiceConfig{Jobs: []string{"bench"}})
	caller := meshtest.Connect(b, s)
	meshtest.WaitFor(b, "the door", func() bool { return svc.ID() != "" })
	body := make([]byte, 256)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m, err := caller.Request(mesh.PredictSubject("bench"), body, 10*time.Second)
			if err != nil || len(m.Data) != len(body) {
				b.Errorf("request: %v, %v", m, err)
				return
			}
		}
	})
}

// BenchmarkSubmitParallel is BenchmarkSubmit with concurrent callers.
func BenchmarkSubmitParallel(b *testing.B) {
	_, nc := echoMesh(b, jetstream.FileStorage)
	c := newClient(b, nc)
	body := make([]byte, 256)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for pb.Next() {
			if _, err := c.Submit(ctx, "bench", mesh.Request{Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCoreRequest is the baseline: a trivial core NATS responder on
// its own connection, the least any NATS round trip costs.
func BenchmarkCoreRequest(b *testing.B) {
	s := meshtest.StartServer(b)
	nc := meshtest.Connect(b, s)
	responder := meshtest.Connect(b, s)
	sub, err := responder.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := responder.Flush(); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 256)
	b.ResetTimer()
	for b.Loop() {
		if _, err := nc.Request("bench.echo", body, 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJetStreamPublish is the other floor under BenchmarkSubmit: one
// publish to a work-queue partition and its PubAck, nothing consuming (the
// stream is purged as it fills), file and memory store. A request through
// the mesh pays this, a delivery to a worker, an ack and the reply.
func BenchmarkJetStreamPublish(b *testing.B) {
	for _, tc := range benchStorages {
		b.Run(tc.name, func(b *testing.B) {
			s := meshtest.StartServer(b)
			nc := meshtest.Connect(b, s)
			sc := mesh.StreamConfig{Job: "bench", Storage: tc.storage, MaxMsgs: -1, MaxBytes: -1}
			ensure(b, nc, sc)
			js := newJS(b, nc)
			st, err := js.Stream(context.Background(), mesh.StreamName("bench"))
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 256)
			ctx := context.Background()
			n := 0
			for b.Loop() {
				if _, err := js.Publish(ctx, mesh.PartitionSubject("bench", 0), body); err != nil {
					b.Fatal(err)
				}
				if n++; n%10_000 == 0 {
					b.StopTimer()
					_ = st.Purge(ctx)
					b.StartTimer()
				}
			}
		})
	}
}

// switchProvider is a TracerProvider whose tracers start spans from
// whichever provider cur holds at the time. OTel's global provider binds
// package tracers to the first provider set and never again, so one
// process can compare tracing off and on only through such a switch.
type switchProvider struct {
	embedded.TracerProvider
	cur atomic.Pointer[trace.TracerProvider]
}

func (p *switchProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &switchTracer{p: p, name: name, opts: opts}
}

type switchTracer struct {
	embedded.Tracer
	p    *switchProvider
	name string
	opts []trace.TracerOption
	last atomic.Pointer[boundTracer]
}

// boundTracer is a tracer of one provider: the SDK's Tracer takes a lock,
// so each switchTracer keeps the one of the current provider.
type boundTracer struct {
	tp *trace.TracerProvider
	t  trace.Tracer
}

func (t *switchTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cur := t.p.cur.Load()
	bt := t.last.Load()
	if bt == nil || bt.tp != cur {
		bt = &boundTracer{tp: cur, t: (*cur).Tracer(t.name, t.opts...)}
		t.last.Store(bt)
	}
	return bt.t.Start(ctx, name, opts...)
}

var tracerSwitch = sync.OnceValue(func() *switchProvider {
	p := &switchProvider{}
	var off trace.TracerProvider = tracenoop.NewTracerProvider()
	p.cur.Store(&off)
	otel.SetTracerProvider(p)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return p
})

// cpuTime is the CPU time this process has used, user and system: the
// whole mesh of BenchmarkTracing runs in it, so CPU per request compares
// settings even on a machine shared with other work, where ns/op drifts.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTracing measures the NATS door on the tiny model (add_f32 on
// the real engine, file store, 32 concurrent callers) with tracing off
// (the no-op provider, traceparent still propagated) and on at
// parent-based ratios 0.01 and 1.0 (the SDK with a batching processor
// over a discarding exporter: span cost without the export's), at the
// default trace detail (request) and, at 1.0, at detail stages. Compare
// the settings' cpu-ns/op (CPU time of the whole process per request) and
// ns/op (wall). Run each setting in a process of its own, in turn
// (-bench 'BenchmarkTracing/off$', then ratio=0.01$, ...): in one process
// a later setting serves a stream and a heap that the earlier ones grew,
// and measures several percent slower whatever its tracing.
func BenchmarkTracing(b *testing.B) {
	infertest.RequireLibrary(b)
	sw := tracerSwitch()
	s := meshtest.StartServer(b)
	job := "tracing"
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}}
	ensure(b, meshtest.Connect(b, s), cfg.Stream)
	runWorker(b, meshtest.Connect(b, s), cfg, newPredictor(b, "add_f32"))
	callers := []*nats.Conn{serveNATS(b, s, job), meshtest.Connect(b, s), meshtest.Connect(b, s), meshtest.Connect(b, s)}
	body := []byte(`{"instances":[{"x":[1.5,2.5,3.5,4.5]}]}`)
	for _, tc := range []struct {
		name   string
		ratio  float64 // 0: off
		detail string  // telemetry.WithTraceDetail's; "": the default
	}{{"off", 0, ""}, {"ratio=0.01", 0.01, ""}, {"ratio=1.0", 1, ""}, {"ratio=1.0-stages", 1, telemetry.TraceDetailStages}} {
		b.Run(tc.name, func(b *testing.B) {
			var tp trace.TracerProvider = tracenoop.NewTracerProvider()
			if tc.ratio > 0 {
				sdk := sdktrace.NewTracerProvider(
					sdktrace.WithBatcher(tracetest.NewNoopExporter()),
					sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.ratio))),
				)
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = telemetry.WithTraceDetail(sdk, tc.detail) // as Setup installs it
			}
			sw.cur.Store(&tp)
			var n atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(16) // 32 callers on 2 cores
			cpu0 := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				nc := callers[n.Add(1)%uint64(len(callers))]
				for pb.Next() {
					msg := nats.NewMsg(mesh.PredictSubject(job))
					msg.Data = body
					if _, err := requestResult(nc, msg, 10*time.Second); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
