package meshtest

import (
	"context"
	"io"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Spans is telemetry set up for one test with its spans kept in memory.
type Spans struct{ tel *telemetry.Telemetry }

// CaptureSpans sets telemetry up for the test (telemetry.Setup) with every
// span kept in memory, at trace detail stages, logs discarded; it shuts
// down at cleanup. Setup installs the process's global provider: tests
// that use it must not run in parallel.
func CaptureSpans(tb testing.TB) *Spans {
	tb.Helper()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{
		TracesExporter: telemetry.ExporterMemory, TraceDetail: telemetry.TraceDetailStages, Output: io.Discard})
	if err != nil {
		tb.Fatalf("telemetry.Setup: %v", err)
	}
	tb.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return &Spans{tel}
}

// All returns the spans ended so far.
func (s *Spans) All() Ended { return Ended(s.tel.Spans()) }

// Wait polls until a span of each of names has ended (see WaitFor) and
// returns the spans ended by then.
func (s *Spans) Wait(tb testing.TB, names ...string) Ended {
	tb.Helper()
	var ended Ended
	WaitFor(tb, "spans", func() bool {
		ended = s.All()
		for _, name := range names {
			if ended.Find(name) == nil {
				return false
			}
		}
		return true
	})
	return ended
}

// Ended are ended spans, in the order they ended.
type Ended tracetest.SpanStubs

// Find returns the first span named name; nil when none is.
func (e Ended) Find(name string) *tracetest.SpanStub {
	for i := range e {
		if e[i].Name == name {
			return &e[i]
		}
	}
	return nil
}
