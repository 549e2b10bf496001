package mesh_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/infertest"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestTraceCrossesTheMesh sends one request with a caller's traceparent
// through the NATS door, JetStream and a worker running the real engine,
// each on its own connection, and checks the spans form one trace: door ->
// publish -> (queue wait, worker process -> reply), with the batch span
// linked to the worker's span and the ONNX Runtime run under the batch.
func TestTraceCrossesTheMesh(t *testing.T) {
	infertest.RequireLibrary(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{TracesExporter: "memory", Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })

	s := meshtest.StartServer(t)
	job := "traced"
	cfg := mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: job}}
	ensure(t, meshtest.Connect(t, s), cfg.Stream)
	runWorker(t, meshtest.Connect(t, s), cfg, newPredictor(t, "add_f32"))
	caller := serveNATS(t, s, job)

	// The caller's own span, propagated as a W3C traceparent header.
	ctx, callerSpan := otel.Tracer("test").Start(context.Background(), "caller")
	msg := nats.NewMsg(mesh.PredictSubject(job))
	msg.Data = []byte(`{"instances":[{"x":[1,2,3,4]}]}`)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(msg.Header))
	reply, err := caller.RequestMsg(msg, 10*time.Second)
	callerSpan.End()
	if err != nil || reply.Header.Get("Nats-Service-Error") != "" {
		t.Fatalf("request: %v %v", err, reply.Header)
	}
	traceID := callerSpan.SpanContext().TraceID()

	var spans tracetest.SpanStubs
	meshtest.WaitFor(t, "spans", func() bool {
		spans = tel.Spans()
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
		{telemetry.SpanDoorNATS, door, callerSpan.SpanContext(), trace.SpanKindServer},
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
	checkSampledOut(t, tel, caller, job)
}

// checkSampledOut sends a request whose caller sampled its trace out
// (traceparent flags 00) through the same path: it is answered, no span of
// its trace records, and its batch's span (a root of its own, sampled on
// its own) still links into the caller's trace. It shares
// TestTraceCrossesTheMesh's Setup: package tracers stay bound to the first
// provider a process installs.
func checkSampledOut(t *testing.T, tel *telemetry.Telemetry, caller *nats.Conn, job string) {
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
	before := len(batches(tel.Spans()))
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
		spans = tel.Spans()
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

func find(spans tracetest.SpanStubs, name string) *tracetest.SpanStub {
	for i := range spans {
		if spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}
