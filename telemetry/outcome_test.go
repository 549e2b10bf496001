package telemetry_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{200, telemetry.OutcomeOK},
		{400, telemetry.OutcomeBadInput},
		{404, telemetry.OutcomeBadInput},
		{413, telemetry.OutcomeBadInput},
		{429, telemetry.OutcomeRejected},
		{499, telemetry.OutcomeBadInput},
		{500, telemetry.OutcomeError},
		{503, telemetry.OutcomeRejected},
		{504, telemetry.OutcomeTimeout},
	}
	for _, tt := range tests {
		if got := telemetry.OutcomeOf(tt.status); got != tt.want {
			t.Errorf("OutcomeOf(%d): got %q, want %q", tt.status, got, tt.want)
		}
	}
}

func TestEndSpan(t *testing.T) {
	tel := setup(t, telemetry.Config{TracesExporter: telemetry.ExporterMemory, Output: io.Discard})
	tracer := otel.Tracer(telemetry.ScopeName)
	_, ok := tracer.Start(context.Background(), "ok")
	telemetry.EndSpan(ok, nil)
	_, failed := tracer.Start(context.Background(), "failed")
	telemetry.EndSpan(failed, errors.New("boom"))

	spans := tel.Spans()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	if got := spans[0].Status.Code; got != codes.Unset {
		t.Errorf("span without error: got status %v, want Unset", got)
	}
	if got := spans[1].Status; got.Code != codes.Error || got.Description != "boom" {
		t.Errorf("span with error: got status %+v, want Error boom", got)
	}
	if len(spans[1].Events) != 1 || spans[1].Events[0].Name != "exception" {
		t.Errorf("span with error: got events %+v, want one exception", spans[1].Events)
	}
}
