package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/cluster-serving/cluster-serving/telemetry/telemetrytest"
)

// find returns the first metric of family name whose labels include want,
// or nil.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	if series := telemetrytest.Series(fams, name, want); len(series) > 0 {
		return series[0]
	}
	return nil
}

func TestMetricsPrometheus(t *testing.T) {
	tel := setup(t, telemetry.Config{MetricsEnabled: true, Output: io.Discard})
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	depths := []telemetry.QueueDepth{{Job: "serving_stream", Pending: 7, AckPending: 3}}
	reg, err := m.ObserveQueues(func(context.Context) ([]telemetry.QueueDepth, error) { return depths, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()

	ctx := context.Background()
	m.RecordRequest(ctx, telemetry.DoorHTTP, "serving_stream", telemetry.OutcomeOK, 12*time.Millisecond)
	m.RecordRequest(ctx, telemetry.DoorHTTP, "serving_stream", telemetry.OutcomeOK, 30*time.Millisecond)
	m.RecordRequest(ctx, telemetry.DoorRedis, "serving_stream", telemetry.OutcomeBadInput, time.Millisecond)
	m.RecordStage(ctx, telemetry.StageInfer, "serving_stream", "resnet50", 8*time.Millisecond)
	m.RecordStage(ctx, telemetry.StageDecode, "serving_stream", "resnet50", 300*time.Microsecond)
	m.RecordBatch(ctx, "serving_stream", "resnet50", 16)
	m.AddWorkers(ctx, "serving_stream", "resnet50", 2)
	m.AddWorkers(ctx, "serving_stream", "resnet50", -1)
	m.RecordModelLoad(ctx, "resnet50", telemetry.OutcomeOK, 1500*time.Millisecond)

	fams := telemetrytest.Scrape(t, tel.MetricsHandler())

	counter := find(fams, "cluster_serving_requests_total",
		map[string]string{"door": "http", "job_name": "serving_stream", "outcome": "ok"})
	if got := counter.GetCounter().GetValue(); got != 2 {
		t.Errorf("requests_total{door=http,outcome=ok} = %v, want 2", got)
	}
	if fams["cluster_serving_requests_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("requests_total type = %v, want COUNTER", fams["cluster_serving_requests_total"].GetType())
	}

	dur := find(fams, "cluster_serving_request_duration_seconds", map[string]string{"door": "http"}).GetHistogram()
	if dur.GetSampleCount() != 2 || dur.GetSampleSum() < 0.041 || dur.GetSampleSum() > 0.043 {
		t.Errorf("request_duration_seconds count=%d sum=%v, want 2 and 0.042", dur.GetSampleCount(), dur.GetSampleSum())
	}
	if got, want := len(dur.GetBucket()), len(telemetry.LatencyBuckets)+1; got != want { // +Inf
		t.Errorf("request_duration buckets = %d, want %d", got, want)
	}
	for _, b := range dur.GetBucket() {
		if b.GetUpperBound() == 0.025 && b.GetCumulativeCount() != 1 {
			t.Errorf("bucket le=0.025 = %d, want 1", b.GetCumulativeCount())
		}
	}

	stage := find(fams, "cluster_serving_stage_duration_seconds",
		map[string]string{"stage": "decode", "model": "resnet50"}).GetHistogram()
	if stage.GetSampleCount() != 1 {
		t.Errorf("stage_duration{stage=decode} count = %d, want 1", stage.GetSampleCount())
	}

	tests := []struct {
		family string
		labels map[string]string
		value  func(*dto.Metric) float64
		want   float64
	}{
		{"cluster_serving_batch_size", map[string]string{"model": "resnet50"},
			func(m *dto.Metric) float64 { return m.GetHistogram().GetSampleSum() }, 16},
		{"cluster_serving_workers", map[string]string{"job_name": "serving_stream"},
			func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }, 1},
		{"cluster_serving_queue_pending", map[string]string{"job_name": "serving_stream"},
			func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }, 7},
		{"cluster_serving_queue_ack_pending", map[string]string{"job_name": "serving_stream"},
			func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }, 3},
		{"cluster_serving_model_load_duration_seconds", map[string]string{"model": "resnet50"},
			func(m *dto.Metric) float64 { return m.GetHistogram().GetSampleSum() }, 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.family, func(t *testing.T) {
			m := find(fams, tt.family, tt.labels)
			if m == nil {
				names := make([]string, 0, len(fams))
				for n := range fams {
					names = append(names, n)
				}
				t.Fatalf("no %s%v in scrape; families: %v", tt.family, tt.labels, names)
			}
			if got := tt.value(m); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	// The counter moves between scrapes.
	m.RecordRequest(ctx, telemetry.DoorHTTP, "serving_stream", telemetry.OutcomeOK, time.Millisecond)
	depths[0].Pending = 0
	fams = telemetrytest.Scrape(t, tel.MetricsHandler())
	if got := find(fams, "cluster_serving_requests_total", map[string]string{"door": "http", "outcome": "ok"}).GetCounter().GetValue(); got != 3 {
		t.Errorf("after one more request: %v, want 3", got)
	}
	if got := find(fams, "cluster_serving_queue_pending", nil).GetGauge().GetValue(); got != 0 {
		t.Errorf("queue_pending after drain = %v, want 0", got)
	}
	if fams["go_goroutines"] == nil {
		t.Error("go runtime collector missing from the registry")
	}
}

// TestCacheMetrics checks the response cache's lookups in Prometheus:
// counted by result, with their time.
func TestCacheMetrics(t *testing.T) {
	tel := setup(t, telemetry.Config{MetricsEnabled: true, Output: io.Discard})
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m.RecordCache(ctx, "j", "add", true, time.Millisecond)
	m.RecordCache(ctx, "j", "add", true, time.Millisecond)
	m.RecordCache(ctx, "j", "add", false, 3*time.Millisecond)
	var none *telemetry.Metrics
	none.RecordCache(ctx, "j", "add", true, time.Millisecond) // records nothing, no panic
	fams := telemetrytest.Scrape(t, tel.MetricsHandler())
	for _, tt := range []struct {
		result string
		count  float64
		sum    float64
	}{{telemetry.CacheHit, 2, 0.002}, {telemetry.CacheMiss, 1, 0.003}} {
		labels := map[string]string{"job_name": "j", "model": "add", "result": tt.result}
		if got := find(fams, "cluster_serving_cache_lookups_total", labels).GetCounter().GetValue(); got != tt.count {
			t.Errorf("lookups_total{result=%s}: got %v, want %v", tt.result, got, tt.count)
		}
		h := find(fams, "cluster_serving_cache_lookup_duration_seconds", labels).GetHistogram()
		if h.GetSampleCount() != uint64(tt.count) || h.GetSampleSum() < tt.sum*0.999 || h.GetSampleSum() > tt.sum*1.001 {
			t.Errorf("lookup_duration{result=%s}: got %d samples, sum %v; want %v, %v", tt.result, h.GetSampleCount(), h.GetSampleSum(), tt.count, tt.sum)
		}
	}
}

func TestQueueCallbackErrorIsLoggedNotFatal(t *testing.T) {
	var buf telemetrytest.LogBuffer
	tel := setup(t, telemetry.Config{MetricsEnabled: true, Output: &buf})
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ObserveQueues(func(context.Context) ([]telemetry.QueueDepth, error) {
		return nil, errors.New("consumer info: timeout")
	}); err != nil {
		t.Fatal(err)
	}
	m.RecordBatch(context.Background(), "j", "m", 1)
	fams := telemetrytest.Scrape(t, tel.MetricsHandler())
	if fams["cluster_serving_batch_size"] == nil {
		t.Error("a failing queue callback hid the other metrics")
	}
	if fams["cluster_serving_queue_pending"] != nil {
		t.Error("queue_pending exported although its callback failed")
	}
	if !strings.Contains(buf.String(), "consumer info: timeout") {
		t.Errorf("callback error not logged; log: %s", buf.String())
	}
}

func TestMetricsNoopWhenDisabled(t *testing.T) {
	setup(t, telemetry.Config{Output: io.Discard})
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ObserveQueues(func(context.Context) ([]telemetry.QueueDepth, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		m.RecordStage(context.Background(), telemetry.StageInfer, "j", "m", time.Millisecond)
	})
	if allocs != 0 {
		t.Errorf("RecordStage with metrics disabled: %v allocs, want 0", allocs)
	}
}

// TestTally: what a process tells the status page about its doors. Counts
// by door, job and outcome; latency from answered requests only; errors
// newest first, capped, with the trace id of their context; an open
// door listed with no requests yet, and gone once closed.
func TestTally(t *testing.T) {
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	closeHTTP := m.OpenDoor(telemetry.DoorHTTP, "http://127.0.0.1:8080")
	m.OpenDoor(telemetry.DoorGRPC, "127.0.0.1:8001")
	ctx := context.Background()
	for range 3 {
		m.RecordRequest(ctx, telemetry.DoorHTTP, "j", telemetry.OutcomeOK, 2*time.Millisecond)
	}
	m.RecordRequest(ctx, telemetry.DoorHTTP, "j", telemetry.OutcomeRejected, time.Hour)
	m.RecordRequest(ctx, telemetry.DoorNATS, "k", telemetry.OutcomeOK, time.Millisecond)
	m.RecordError(ctx, telemetry.DoorHTTP, "j", 200, "not an error")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}}))
	for i := range 40 {
		m.RecordError(traced, telemetry.DoorHTTP, "j", 400, fmt.Sprint("bad ", i, strings.Repeat(".", 400*(i/39))))
	}
	doors, errs := m.Tally().Snapshot()
	if len(doors) != 3 || doors[0].Door != "grpc" || len(doors[0].Jobs) != 0 || doors[1].Listen != "http://127.0.0.1:8080" || doors[2].Listen != "" {
		t.Fatalf("doors %+v: want grpc (open, no requests), http (open) and nats (answered, not open)", doors)
	}
	h := doors[1].Jobs[0]
	if h.Outcomes["ok"] != 3 || h.Outcomes["rejected"] != 1 || h.LatencyP99Ms != 2 {
		t.Errorf("http job j: %+v, want 3 ok, 1 rejected, p99 2ms (refusals keep out of latency)", h)
	}
	if len(errs) != 32 || !strings.HasPrefix(errs[0].Message, "bad 39") || len(errs[0].Message) > 310 || errs[31].Message != "bad 8" ||
		errs[0].TraceID != tid.String() || errs[0].Status != 400 {
		t.Errorf("errors: %d, newest %+v, oldest %+v; want the last 32, newest first, capped messages, with the trace id", len(errs), errs[0], errs[len(errs)-1])
	}
	closeHTTP()
	if doors, _ := m.Tally().Snapshot(); doors[1].Listen != "" {
		t.Errorf("closed door still listens: %+v", doors[1])
	}
}
