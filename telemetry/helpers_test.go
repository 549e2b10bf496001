package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// setup runs telemetry.Setup and shuts it down at the end of the test.
// Setup installs process-wide globals, so tests in this package must not
// run in parallel.
func setup(tb testing.TB, cfg telemetry.Config) *telemetry.Telemetry {
	tb.Helper()
	tel, err := telemetry.Setup(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("Setup(%+v): %v", cfg, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
	})
	return tel
}
