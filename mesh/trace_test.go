package mesh_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/infertest"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// traceInMemory installs, through the package's switch provider (OTel
// binds package tracers to the first provider a process installs, so the
// tests of one binary cannot each run telemetry.Setup), an SDK provider
// that samples every trace, at detail as Setup installs it
// (telemetry.WithTraceDetail), and returns the exporter its spans end in.
// Tests that use it must not run in parallel.
func traceInMemory(t *testing.T, detail string) *tracetest.InMemoryExporter {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	tp := telemetry.WithTraceDetail(sdk, detail)
	sw := tracerSwitch()
	sw.cur.Store(&tp)
	t.Cleanup(func() {
		var off trace.TracerProvider = tracenoop.NewTracerProvider()
		sw.cur.Store(&off)
		_ = sdk.Shutdown(context.Background())
	})
	return mem
}

// tracedMesh starts a mesh whose spans, at trace detail detail, go to the
// returned exporter: a server, a worker of job on the real engine
// (add_f32) and the NATS door, each on its own connection; caller is a
// connection to call the door on.
func tracedMesh(t *testing.T, detail string) (mem *tracetest.InMemoryExporter, caller *nats.Conn, job string) {
	t.Helper()
	infertest.RequireLibrary(t)
	mem = traceInMemory(t, detail)
	s := meshtest.StartServer(t)
	job = "traced"
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}}
	ensure(t, meshtest.Connect(t, s), cfg.Stream)
	runWorker(t, meshtest.Connect(t, s), cfg, newPredictor(t, "add_f32"))
	return mem, serveNATS(t, s, job), job
}

// TestTraceCrossesTheMesh sends one request with a caller's traceparent
// through the NATS door, JetStream and a worker running the real engine,
// each on its own connection, at trace detail stages, and checks the
// spans form one trace: door -> publish -> (queue wait, worker process ->
// reply), with the batch span linked to the worker's span and the ONNX
// Runtime run under the batch.
func TestTraceCrossesTheMesh(t *testing.T) {
	mem, caller, job := tracedMesh(t, telemetry.TraceDetailStages)

	callerSC := tracedRequest(t, caller, job)
	traceID := callerSC.TraceID()

	var spans tracetest.SpanStubs
	meshtest.WaitFor(t, "spans", func() bool {
		spans = mem.GetSpans()
		// Every span this test reads: they end on different goroutines,
		// the batch's after its waiters have their answers.
		for _, name := range []string{telemetry.SpanDoorNATS, telemetry.SpanPublish, telemetry.SpanQueueWait,
			telemetry.SpanProcess, telemetry.SpanReply, "infer batch", "onnxruntime run"} {
			if find(spans, name) == nil {
				return false
			}
		}
		return true
	})
	door, pub := find(spans, telemetry.SpanDoorNATS), find(spans, telemetry.SpanPublish)
	queue, proc, rep := find(spans, telemetry.SpanQueueWait), find(spans, telemetry.SpanProcess), find(spans, telemetry.SpanReply)
	batch, run := find(spans, "infer batch"), find(spans, "onnxruntime run")
	for _, c := range []struct {
		name     string
		span     *tracetest.SpanStub
		parent   trace.SpanContext
		wantKind trace.SpanKind
	}{
		{telemetry.SpanDoorNATS, door, callerSC, trace.SpanKindServer},
		{telemetry.SpanPublish, pub, door.SpanContext, trace.SpanKindProducer},
		{telemetry.SpanQueueWait, queue, pub.SpanContext, trace.SpanKindInternal},
		{telemetry.SpanProcess, proc, pub.SpanContext, trace.SpanKindConsumer},
		{telemetry.SpanReply, rep, proc.SpanContext, trace.SpanKindProducer},
	} {
		if c.span.SpanContext.TraceID() != traceID {
			t.Errorf("%s: got trace %s, want the caller's %s", c.name, c.span.SpanContext.TraceID(), traceID)
		}
		if c.span.Parent.SpanID() != c.parent.SpanID() {
			t.Errorf("%s: got parent %s, want %s", c.name, c.span.Parent.SpanID(), c.parent.SpanID())
		}
		if c.span.SpanKind != c.wantKind {
			t.Errorf("%s: got kind %v, want %v", c.name, c.span.SpanKind, c.wantKind)
		}
	}
	if len(batch.Links) != 1 || batch.Links[0].SpanContext.SpanID() != proc.SpanContext.SpanID() {
		t.Errorf("batch links: got %v, want one link to the worker span %s", batch.Links, proc.SpanContext.SpanID())
	}
	if run.Parent.SpanID() != batch.SpanContext.SpanID() {
		t.Errorf("onnxruntime run: got parent %s, want the batch %s", run.Parent.SpanID(), batch.SpanContext.SpanID())
	}
	var sawBatchSize bool
	for _, kv := range proc.Attributes {
		if kv.Key == "cluster_serving.batch.size" && kv.Value.AsInt64() == 1 {
			sawBatchSize = true
		}
	}
	if !sawBatchSize {
		t.Errorf("worker span attributes %v lack cluster_serving.batch.size=1", proc.Attributes)
	}
	checkSampledOut(t, mem, caller, job)
}

// checkSampledOut sends a request whose caller sampled its trace out
// (traceparent flags 00) through the same path: it is answered, no span of
// its trace records, and its batch's span (a root of its own, sampled on
// its own) still links into the caller's trace.
func checkSampledOut(t *testing.T, mem *tracetest.InMemoryExporter, caller *nats.Conn, job string) {
	t.Helper()
	batches := func(spans tracetest.SpanStubs) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, sp := range spans {
			if sp.Name == "infer batch" {
				out = append(out, sp)
			}
		}
		return out
	}
	before := len(batches(mem.GetSpans()))
	traceID := trace.TraceID{0xca, 0x11, 0xe4}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{1}, Remote: true})
	msg := nats.NewMsg(mesh.PredictSubject(job))
	msg.Data = []byte(`{"instances":[{"x":[1,2,3,4]}]}`)
	propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), propagation.HeaderCarrier(msg.Header))
	reply, err := caller.RequestMsg(msg, 10*time.Second)
	if err != nil || reply.Header.Get("Nats-Service-Error") != "" {
		t.Fatalf("sampled-out request: %v %v", err, reply.Header)
	}
	if got, want := predictionData(t, reply.Data), []float32{3, 5, 7, 9}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sampled-out answer: got %v, want %v", got, want)
	}
	var spans tracetest.SpanStubs
	meshtest.WaitFor(t, "the sampled-out request's batch span", func() bool {
		spans = mem.GetSpans()
		return len(batches(spans)) > before
	})
	for _, sp := range spans {
		if sp.SpanContext.TraceID() == traceID {
			t.Errorf("span %q recorded in the sampled-out trace", sp.Name)
		}
	}
	if b := batches(spans)[before]; len(b.Links) != 1 || b.Links[0].SpanContext.TraceID() != traceID {
		t.Errorf("sampled-out batch links: got %v, want one into trace %s", b.Links, traceID)
	}
}

// TestTraceRequestDetail sends a traced request through the same mesh at
// the default trace detail (request): the trace holds the door's span
// and the worker's process span, its child, which carries the queue wait
// and the batch; the stage and messaging spans (publish, queue wait,
// decode, infer batch, onnxruntime run, encode, reply) are not recorded.
func TestTraceRequestDetail(t *testing.T) {
	mem, caller, job := tracedMesh(t, telemetry.TraceDetailRequest)

	request := func() trace.SpanContext { return tracedRequest(t, caller, job) }
	caller1 := request()
	// A second request: its spans end after the first request's batch
	// ran, so a stage span of the first would be there by then.
	caller2 := request()
	inTrace := func(spans tracetest.SpanStubs, id trace.TraceID) map[string]tracetest.SpanStub {
		m := map[string]tracetest.SpanStub{}
		for _, sp := range spans {
			if sp.SpanContext.TraceID() == id {
				m[sp.Name] = sp
			}
		}
		return m
	}
	var spans tracetest.SpanStubs
	// Both requests' door and process spans: a door span ends when its
	// store's PubAck is back, which may be after the worker answered
	// (and, coalesced, after a hand-over from the store's goroutine).
	meshtest.WaitFor(t, "both requests' spans", func() bool {
		spans = mem.GetSpans()
		for _, sc := range []trace.SpanContext{caller1, caller2} {
			got := inTrace(spans, sc.TraceID())
			_, door := got[telemetry.SpanDoorNATS]
			_, proc := got[telemetry.SpanProcess]
			if !door || !proc {
				return false
			}
		}
		return true
	})
	got := inTrace(spans, caller1.TraceID())
	door, proc := got[telemetry.SpanDoorNATS], got[telemetry.SpanProcess]
	if door.Parent.SpanID() != caller1.SpanID() {
		t.Errorf("%s: got parent %s, want the caller's %s", telemetry.SpanDoorNATS, door.Parent.SpanID(), caller1.SpanID())
	}
	if proc.Parent.SpanID() != door.SpanContext.SpanID() || !proc.SpanContext.IsValid() {
		t.Errorf("%s: got parent %s, want the door's %s", telemetry.SpanProcess, proc.Parent.SpanID(), door.SpanContext.SpanID())
	}
	attrs := map[string]bool{}
	for _, kv := range proc.Attributes {
		attrs[string(kv.Key)] = true
	}
	for _, k := range []string{"cluster_serving.queue_wait_ms", "cluster_serving.batch.size", "cluster_serving.batch.wait_ms", "messaging.delivery_count"} {
		if !attrs[k] {
			t.Errorf("%s attributes %v lack %s", telemetry.SpanProcess, proc.Attributes, k)
		}
	}
	for _, sp := range spans {
		switch sp.Name {
		case telemetry.SpanPublish, telemetry.SpanQueueWait, telemetry.SpanDecode, telemetry.SpanBatch,
			telemetry.SpanInferRun, telemetry.SpanEncode, telemetry.SpanReply, telemetry.SpanResultWrite:
			t.Errorf("span %q recorded at trace detail request", sp.Name)
		}
	}
	if n := len(got); n != 3 {
		t.Errorf("trace of the first request: %d spans %v, want 3 (caller, door, process)", n, slices.Collect(maps.Keys(got)))
	}
}

func find(spans tracetest.SpanStubs, name string) *tracetest.SpanStub {
	for i := range spans {
		if spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}

// tracedRequest sends one request to job's NATS door on caller under a
// caller's own span, propagated as a W3C traceparent header, checks the
// answer of add_f32 and returns the caller span's context.
func tracedRequest(t *testing.T, caller *nats.Conn, job string) trace.SpanContext {
	t.Helper()
	ctx, callerSpan := otel.Tracer("test").Start(context.Background(), "caller")
	msg := nats.NewMsg(mesh.PredictSubject(job))
	msg.Data = []byte(`{"instances":[{"x":[1,2,3,4]}]}`)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(msg.Header))
	reply, err := caller.RequestMsg(msg, 10*time.Second)
	callerSpan.End()
	if err != nil || reply.Header.Get("Nats-Service-Error") != "" {
		t.Fatalf("request: %v %v", err, reply.Header)
	}
	if got, want := predictionData(t, reply.Data), []float32{3, 5, 7, 9}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("answer: got %v, want %v", got, want)
	}
	return callerSpan.SpanContext()
}
