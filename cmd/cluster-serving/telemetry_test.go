package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// scrape reads the Prometheus text exposition at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// sample sums the counter, gauge or histogram count of family name over
// the series whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

func TestPrometheusMetricsMove(t *testing.T) {
	skipIfShort(t)
	mp := freePorts(t, 1)[0]
	cfg, url, job, env := testJob(t, fmt.Sprintf("metricsListen: 127.0.0.1:%d\n", mp))
	start := spawn(t, env, "start", "-c", cfg)
	nc := waitReady(t, url, start)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", mp)
	before := scrape(t, metricsURL)
	const n = 25
	for i := range n {
		if err := predictAdd(nc, job, [4]float32{float32(i), 1, 2, 3}, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// One bad request counts as bad_input.
	if _, err := nc.Request("serving."+job+".predict", []byte(`{"instances":[{"x":[1]}]}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, metricsURL)
	jobL := map[string]string{"job_name": job}
	checks := []struct {
		name   string
		labels map[string]string
		delta  float64
	}{
		{"cluster_serving_requests_total", map[string]string{"job_name": job, "door": "nats", "outcome": "ok"}, n},
		{"cluster_serving_requests_total", map[string]string{"job_name": job, "door": "nats", "outcome": "bad_input"}, 1},
		{"cluster_serving_request_duration_seconds", map[string]string{"job_name": job, "door": "nats"}, n + 1},
		{"cluster_serving_stage_duration_seconds", map[string]string{"job_name": job, "stage": "queue_wait"}, n + 1},
		{"cluster_serving_stage_duration_seconds", map[string]string{"job_name": job, "stage": "decode"}, n + 1},
		{"cluster_serving_stage_duration_seconds", map[string]string{"job_name": job, "stage": "infer"}, n},
		{"cluster_serving_stage_duration_seconds", map[string]string{"job_name": job, "stage": "encode"}, n},
		{"cluster_serving_batch_size", jobL, n},
	}
	for _, c := range checks {
		b, a := max(0, sample(before, c.name, c.labels)), sample(after, c.name, c.labels)
		if a-b != c.delta {
			t.Errorf("%s%v: got %v -> %v, want +%v", c.name, c.labels, b, a, c.delta)
		}
	}
	// The worker acks (or terminates) a message just after it replies, so
	// the last ack may reach the server a moment after the caller's answer.
	for _, name := range []string{"cluster_serving_queue_pending", "cluster_serving_queue_ack_pending"} {
		deadline := time.Now().Add(5 * time.Second)
		v := sample(after, name, jobL)
		for v != 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			v = sample(scrape(t, metricsURL), name, jobL)
		}
		if v != 0 {
			t.Errorf("%s: got %v, want 0 (a present, empty queue)", name, v)
		}
	}
	if v := sample(after, "cluster_serving_workers", jobL); v != 1 {
		t.Errorf("cluster_serving_workers: got %v, want 1", v)
	}
	// Every metric the Grafana dashboard charts exists.
	dash, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`cluster_serving_[a-z_]+`).FindAllString(string(dash), -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
		if _, ok := after[base]; !ok {
			t.Errorf("deploy/grafana-dashboard.json charts %s; the metrics have no %s", m, base)
		}
	}
	if v := sample(after, "cluster_serving_model_load_duration_seconds", nil); v < 1 {
		t.Errorf("cluster_serving_model_load_duration_seconds: got count %v, want >= 1", v)
	}
	start.signalAndWait(t, syscall.SIGTERM)
}

// startReceiver starts an OTLP receiver (OTLP/gRPC on a free loopback
// port, OTLP/HTTP as a handler) that keeps the spans it gets, until the
// test ends.
func startReceiver(t *testing.T) *telemetry.Receiver {
	t.Helper()
	recv, err := telemetry.StartReceiver("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(recv.Close)
	return recv
}

// TestTraceAcrossProcesses sends an HTTP request with a traceparent to a
// `cluster-serving http` process whose requests only workers of another
// process (`start`, HTTP off) can serve; both export over OTLP/gRPC to a
// receiver in this test, at trace detail stages. The trace must be one
// tree across both.
func TestTraceAcrossProcesses(t *testing.T) {
	skipIfShort(t)
	recv := startReceiver(t)
	otlp := fmt.Sprintf("tracesExporter: otlp-grpc\notlpEndpoint: %s\notlpInsecure: true\ntraceDetail: stages\n", recv.Addr())
	cfg, url, _, env := testJob(t, otlp+"httpPort: -1\n")
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)

	hp := freePorts(t, 1)[0]
	httpCfg := filepath.Join(filepath.Dir(cfg), "http.yaml")
	data, _ := os.ReadFile(cfg)
	data = []byte(strings.Replace(string(data), "httpPort: -1", fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d", hp), 1))
	writeFile(t, httpCfg, data, 0o644)
	door := spawn(t, env, "http", "-c", httpCfg, "-nats", url)
	waitLog(t, door, "HTTP door on")

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/predict", hp), strings.NewReader(`{"instances":[{"x":[1,2,3,4]}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("predict: %d %s", resp.StatusCode, b)
	}
	// Both processes flush their spans when they stop.
	door.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)

	spans, _ := recv.Spans()
	byName := map[string][]byte{} // name -> span id
	parent := map[string][]byte{} // name -> parent span id
	for _, s := range spans {
		if fmt.Sprintf("%x", s.GetTraceId()) != traceID {
			continue
		}
		byName[s.GetName()] = s.GetSpanId()
		parent[s.GetName()] = s.GetParentSpanId()
	}
	want := []struct{ name, parent string }{
		{"POST /predict", ""},
		{telemetry.SpanPublish, "POST /predict"},
		{telemetry.SpanQueueWait, telemetry.SpanPublish},
		{telemetry.SpanProcess, telemetry.SpanPublish},
		{"decode", telemetry.SpanProcess},
		{"encode", telemetry.SpanProcess},
		{telemetry.SpanReply, telemetry.SpanProcess},
	}
	for _, w := range want {
		if _, ok := byName[w.name]; !ok {
			t.Errorf("trace %s has no span %q (got %v)", traceID, w.name, keys(byName))
			continue
		}
		if w.parent == "" {
			if fmt.Sprintf("%x", parent[w.name]) != "00f067aa0ba902b7" {
				t.Errorf("%s: got parent %x, want the caller's 00f067aa0ba902b7", w.name, parent[w.name])
			}
			continue
		}
		if fmt.Sprintf("%x", parent[w.name]) != fmt.Sprintf("%x", byName[w.parent]) {
			t.Errorf("%s: got parent %x, want %s's %x", w.name, parent[w.name], w.parent, byName[w.parent])
		}
	}
}

func TestStatusShowsWorkers(t *testing.T) {
	skipIfShort(t)
	cfg, url, job, env := testJob(t, "")
	start := spawn(t, env, "start", "-c", cfg)
	nc := waitReady(t, url, start)
	for i := range 7 {
		if err := predictAdd(nc, job, [4]float32{float32(i), 0, 0, 0}, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The job's row and one worker row that served the 7 requests. A
	// worker counts and acks a request just after replying, so poll.
	jobRow := regexp.MustCompile(`(?m)^` + job + `\s+\d+\.\d\s+0\s+0\s+0\s+1\s`)
	// The NATS door's row: its subject, its process, 7 requests, none refused.
	doorRow := regexp.MustCompile(`(?m)^nats\s+serving\.` + job + `\.predict\s+cluster-serving start ` + job + `\s+\S+\s+\d+\s+[\d.]+\s+7\s+0\s`)
	// The VERSION column says which version of the model serves.
	workerRow := regexp.MustCompile(`(?m)^\S+\s+` + job + `\s+` + job + `\s+1\s+\S+\s+\d+\s+7\s+0\s`)
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		st := spawn(t, env, "status", "-c", cfg, "-once")
		<-st.done
		out = st.logs()
		if st.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("status failed:\n%s", out)
		}
		if jobRow.MatchString(out) && workerRow.MatchString(out) && doorRow.MatchString(out) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !jobRow.MatchString(out) {
		t.Errorf("no job row with 0 queued, 1 worker in:\n%s", out)
	}
	if !workerRow.MatchString(out) {
		t.Errorf("no worker row with 7 processed in:\n%s", out)
	}
	if !doorRow.MatchString(out) {
		t.Errorf("no NATS door row with 7 requests in:\n%s", out)
	}
	// add_f32 batches: dim 0 of its input and output is dynamic.
	if !regexp.MustCompile(`(?m)^` + job + `\s+` + job + `\s+yes\s+dim 0 of every input and output is dynamic$`).MatchString(out) {
		t.Errorf("no batching row saying the model batches and why in:\n%s", out)
	}
	start.signalAndWait(t, syscall.SIGTERM)
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOTLPEndpointAloneExports points a `start` process at a collector the
// way one points any OTel-instrumented service at one: only
// OTEL_EXPORTER_OTLP_ENDPOINT, no config key, no OTEL_TRACES_EXPORTER.
// Its spans must reach the OTLP/HTTP receiver in this test; with
// OTEL_TRACES_EXPORTER=none beside it, none may.
func TestOTLPEndpointAloneExports(t *testing.T) {
	skipIfShort(t)
	for _, tc := range []struct {
		name     string
		exporter string // OTEL_TRACES_EXPORTER, "" for unset
		want     bool
	}{
		{"endpoint alone", "", true},
		{"exporter none", "none", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := startReceiver(t)
			srv := httptest.NewServer(recv)
			t.Cleanup(srv.Close)
			cfg, url, job, env := testJob(t, "")
			env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_TRACES_EXPORTER="+tc.exporter)
			start := spawn(t, env, "start", "-c", cfg)
			nc := waitReady(t, url, start)
			if err := predictAdd(nc, job, [4]float32{1, 2, 3, 4}, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			start.signalAndWait(t, syscall.SIGTERM) // flushes its spans
			spans, _ := recv.Spans()
			names := map[string]bool{}
			for _, s := range spans {
				names[s.GetName()] = true
			}
			if got := names[telemetry.SpanProcess]; got != tc.want {
				t.Errorf("got a %q span: %v, want %v (received %d spans)", telemetry.SpanProcess, got, tc.want, len(spans))
			}
		})
	}
}
