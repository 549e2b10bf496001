package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestServeMetricsUntilCtxEnds(t *testing.T) {
	tel := setup(t, telemetry.Config{MetricsEnabled: true, Output: io.Discard})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tel.ServeMetrics(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
		t.Errorf("GET /metrics: got %d %.100s, want 200 with the Go collector", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeMetrics after ctx ended: got %v, want nil", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/metrics"); err == nil {
		t.Error("the listener still serves after ServeMetrics returned")
	}
}
