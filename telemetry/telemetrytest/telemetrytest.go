// Package telemetrytest reads what telemetry exposes, for tests: the
// Prometheus text exposition of the metrics handler, parsed into metric
// families, the series of a family that carry given labels, and the log
// lines written to a Config.Output. It is for _test.go files only.
package telemetrytest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape GETs /metrics from h (telemetry's MetricsHandler) and parses the
// exposition; a status other than 200 fails the test.
func Scrape(tb testing.TB, h http.Handler) map[string]*dto.MetricFamily {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("scrape status %d: %s", rec.Code, rec.Body)
	}
	return Parse(tb, rec.Body)
}

// Parse reads a Prometheus text exposition into its metric families by
// name; a malformed one fails the test.
func Parse(tb testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	tb.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		tb.Fatalf("parse exposition: %v", err)
	}
	return fams
}

// Series returns the series of family name whose labels include want (all
// of them for a nil want), in the exposition's order.
func Series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		if hasLabels(m, want) {
			out = append(out, m)
		}
	}
	return out
}

// hasLabels reports whether m carries every label of want.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// LogBuffer collects log output (a Config.Output, a slog handler's
// writer) that several goroutines write, such as exporters and servers.
// Its zero value is ready to use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
