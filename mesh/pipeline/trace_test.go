package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// diamond is an ensemble over two_io (sum = a+b, prod = a*b) whose steps
// form a diamond: 0 feeds 1 and 2, 3 joins them; OUT = 3x + x³.
var diamond = string(must(os.ReadFile("../../infer/testdata/diamond.pbtxt")))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// serveDiamond runs a node on a repository of two_io and the diamond
// and returns a client of its NATS server.
func serveDiamond(t *testing.T) *mesh.Client {
	return serveRepo(t, 0, map[string]string{"diamond": diamond})
}

// serveRepo runs a node on a repository of two_io and the ensembles
// (name to config.pbtxt), its NATS server taking messages of up to
// maxPayload bytes (0: the default), and returns a client of it.
func serveRepo(t *testing.T, maxPayload int32, ensembles map[string]string) *mesh.Client {
	t.Helper()
	infertest.RequireLibrary(t)
	repo := t.TempDir()
	model, err := os.ReadFile("../../infer/testdata/two_io.onnx")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"two_io/1/model.onnx": model}
	for name, cfg := range ensembles {
		files[name+"/config.pbtxt"], files[name+"/1/.keep"] = []byte(cfg), nil
	}
	for name, data := range files {
		if err := os.MkdirAll(filepath.Join(repo, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := serving.NewNode(context.Background(), serving.Config{
		Embedded:   embedded.Config{Port: embedded.RandomPort, MaxPayload: maxPayload},
		Serve:      true,
		Repository: serving.RepositoryConfig{Dir: repo, Job: "p"},
		Unit:       serving.UnitConfig{Engine: infer.Config{Threads: 1}, Stream: mesh.StreamConfig{Storage: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = n.Close() })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := n.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	c, err := mesh.NewClient(n.Conn(), mesh.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var (
	traceOnce sync.Once
	mem       = tracetest.NewInMemoryExporter()
	sdk       = sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
)

// TestPipelineTrace sends one request to the diamond under a caller's
// span, at trace detail stages: every span is in the caller's trace; the
// four steps each have a span under the ensemble worker's, step 0 ending
// before 1 and 2 start and 3 starting after both ended; each step's
// request crosses the mesh under its step span (its publish, and the
// composing model's worker with its batch).
func TestPipelineTrace(t *testing.T) {
	traceOnce.Do(func() {
		// This test binary's only provider: OTel binds package tracers to
		// the first one installed.
		otel.SetTracerProvider(telemetry.WithTraceDetail(sdk, telemetry.TraceDetailStages))
		otel.SetTextMapPropagator(propagation.TraceContext{}) // as telemetry.Setup does
	})
	mem.Reset()
	c := serveDiamond(t)

	// A first request warms the connections and caches up; the second is
	// the one traced.
	if _, err := c.Submit(context.Background(), "p-diamond", mesh.Request{ContentType: wire.MediaTypeOIP,
		Body: []byte(`{"inputs":[{"name":"IN","datatype":"FP32","shape":[1,3],"data":[0,0,0]}]}`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	mem.Reset()
	ctx, root := sdk.Tracer("test").Start(context.Background(), "caller")
	res, err := c.Submit(ctx, "p-diamond", mesh.Request{ContentType: wire.MediaTypeOIP,
		Body: []byte(`{"inputs":[{"name":"IN","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`)})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answer %s", res.Body)
	var spans tracetest.SpanStubs
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans = mem.GetSpans()
		if steps(spans, root.SpanContext().TraceID()) == 4 && count(spans, telemetry.SpanProcess) >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	byStep := map[int64]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.SpanContext().TraceID() {
			// A batch is a root of its own, linked to its requests.
			if s.Name != telemetry.SpanBatch && s.Name != telemetry.SpanInferRun {
				t.Errorf("span %q in trace %s, not the caller's", s.Name, s.SpanContext.TraceID())
			}
			continue
		}
		if s.Name == telemetry.SpanStep {
			byStep[attr(s, "cs.step")] = s
		}
	}
	if len(byStep) != 4 {
		t.Fatalf("got %d step spans, want 4", len(byStep))
	}
	before := func(a, b int64) {
		if !byStep[a].EndTime.Before(byStep[b].StartTime) {
			t.Errorf("step %d ended %v, after step %d started %v", a, byStep[a].EndTime, b, byStep[b].StartTime)
		}
	}
	before(0, 1)
	before(0, 2)
	before(1, 3)
	before(2, 3)
	proc := byStep[0].Parent
	for i, s := range byStep {
		if s.Parent.SpanID() != proc.SpanID() {
			t.Errorf("step %d: parent %s, want the ensemble worker's %s", i, s.Parent.SpanID(), proc.SpanID())
		}
		pub := child(spans, s.SpanContext, telemetry.SpanPublish)
		if pub == nil || child(spans, pub.SpanContext, telemetry.SpanProcess) == nil {
			t.Errorf("step %d: no publish with a worker's process span under it", i)
		}
	}
	var t0 time.Time
	for _, s := range spans {
		if s.Name == "caller" {
			t0 = s.StartTime
		}
	}
	logTree(t, spans, root.SpanContext().SpanID(), t0, 0)
}

// logTree logs the spans under parent as a tree: name, start after the
// caller's and duration, children in the order they started.
func logTree(t *testing.T, spans tracetest.SpanStubs, parent trace.SpanID, t0 time.Time, depth int) {
	var kids []tracetest.SpanStub
	for _, s := range spans {
		if s.Parent.SpanID() == parent && s.Parent.IsValid() {
			kids = append(kids, s)
		}
	}
	slices.SortFunc(kids, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	for _, s := range kids {
		what := s.Name
		if step := attr(s, "cs.step"); s.Name == telemetry.SpanStep {
			what += fmt.Sprintf(" %d", step)
		}
		t.Logf("%*s%-22s +%-9v %v", 2*depth, "", what, s.StartTime.Sub(t0).Round(time.Microsecond), s.EndTime.Sub(s.StartTime).Round(time.Microsecond))
		logTree(t, spans, s.SpanContext.SpanID(), t0, depth+1)
	}
}

func steps(spans tracetest.SpanStubs, id trace.TraceID) int {
	n := 0
	for _, s := range spans {
		if s.Name == telemetry.SpanStep && s.SpanContext.TraceID() == id {
			n++
		}
	}
	return n
}

func count(spans tracetest.SpanStubs, name string) int {
	return len(slices.DeleteFunc(slices.Clone(spans), func(s tracetest.SpanStub) bool { return s.Name != name }))
}

func child(spans tracetest.SpanStubs, parent trace.SpanContext, name string) *tracetest.SpanStub {
	for i, s := range spans {
		if s.Name == name && s.Parent.SpanID() == parent.SpanID() {
			return &spans[i]
		}
	}
	return nil
}

func attr(s tracetest.SpanStub, key string) int64 {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsInt64()
		}
	}
	return -1
}
