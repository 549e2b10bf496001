package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
)

func TestLatency(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "-"},
		{850*time.Microsecond + 400, "850µs"},
		{4*time.Millisecond + 443*time.Microsecond, "4.44ms"},
		{1234 * time.Millisecond, "1.234s"},
	} {
		if got := latency(tc.d); got != tc.want {
			t.Errorf("latency(%d) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestStatusNumbersHaveUnits prints a snapshot and checks each cell under
// a LATENCY header carries a unit, and that the legend explains the
// counts and the latency.
func TestStatusNumbersHaveUnits(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	stats := mesh.WorkerStats{Processed: 7, P50: 1200 * time.Microsecond, P90: 3 * time.Millisecond, P99: 2 * time.Second}
	prev := &snapshot{at: at.Add(-2 * time.Second), jobs: []jobStatus{{job: "j", delivered: 3}}}
	s := &snapshot{at: at, jobs: []jobStatus{{job: "j", pending: 4, delivered: 7}},
		workers: []mesh.WorkerInfo{{ID: "abcdefghij", Job: "j", Model: "m", Host: "h", PID: "42", Stats: stats}}}
	var out bytes.Buffer
	s.print(&out, prev, "nats://x:4222")
	text := out.String()
	unit := regexp.MustCompile(`^\d+(\.\d+)?(µs|ms|s)$`)
	lines := strings.Split(text, "\n")
	checked := 0
	for i, line := range lines {
		if !strings.Contains(line, "LATENCY P50") {
			continue
		}
		header, row := columns(line), columns(lines[i+1])
		if len(header) != len(row) {
			t.Fatalf("header %q and row %q differ in columns", header, row)
		}
		for c, h := range header {
			if strings.HasPrefix(h, "LATENCY") {
				checked++
				if !unit.MatchString(row[c]) {
					t.Errorf("%s = %q, want a number with its unit", h, row[c])
				}
			}
		}
	}
	if checked != 5 {
		t.Errorf("checked %d latency cells, want 5 (2 job, 3 worker):\n%s", checked, text)
	}
	for _, want := range []string{"p50", "1.2ms", "2s", "count requests", "REQ/S", "2.0"} {
		if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
}

// columns splits a tabwriter line on runs of two or more spaces, so that
// "IN FLIGHT" and "LATENCY P50" stay one column.
func columns(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}
