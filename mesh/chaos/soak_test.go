package chaos_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh/chaos"
)

// TestSoak is `make soak`: the cluster at steady load for SOAK_DURATION
// (unset: skipped), sampling RSS, open fds, threads and goroutines of every
// cluster-serving process each SOAK_INTERVAL (default 30s). It fails when
// a request is lost, answered twice or in error, or a metric grows (see
// chaos.Judge).
func TestSoak(t *testing.T) {
	env := os.Getenv("SOAK_DURATION")
	if env == "" {
		t.Skip("set SOAK_DURATION (make soak SOAK_DURATION=3m)")
	}
	d, err := time.ParseDuration(env)
	if err != nil {
		t.Fatalf("SOAK_DURATION=%q: %v", env, err)
	}
	interval := 30 * time.Second
	if v := os.Getenv("SOAK_INTERVAL"); v != "" {
		if interval, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SOAK_INTERVAL=%q: %v", v, err)
		}
	}
	c := startCluster(t, false)
	row, trends, notes, err := chaos.RunSoak(context.Background(), c, d, interval, chaos.LoadConfig{Rate: *rate}, t.Logf)
	var buf bytes.Buffer
	chaos.WriteTable(&buf, []chaos.Row{row}, notes)
	buf.WriteString("\n")
	chaos.WriteTrends(&buf, trends)
	t.Logf("soak, %d req/s per door, sampled every %v:\n%s", *rate, interval, buf.String())
	if *table != "" {
		if werr := os.WriteFile(*table, buf.Bytes(), 0o644); werr != nil {
			t.Error(werr)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if row.Lost != 0 || row.Dup != 0 || row.Err != 0 {
		t.Errorf("soak: lost %d, dup %d, errors %d: want 0 each", row.Lost, row.Dup, row.Err)
	}
	for _, tr := range trends {
		if !tr.Flat {
			t.Errorf("%s %s: %.0f -> %.0f (max %.0f, %.1f/hour): got growth, want flat", tr.Proc, tr.Metric, tr.First, tr.Last, tr.Max, tr.SlopePerHour)
		}
	}
}
