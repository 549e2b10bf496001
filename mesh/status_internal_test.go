package mesh

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
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
	stats := WorkerStats{Processed: 7, P50: 1200 * time.Microsecond, P90: 3 * time.Millisecond, P99: 2 * time.Second}
	s := &Status{At: at, Jobs: []JobStatus{{Job: "j", Pending: 4, Delivered: 7, Rate: 2}},
		Workers: []WorkerInfo{{ID: "abcdefghij", Job: "j", Model: "m", Host: "h", PID: "42", Stats: stats}}}
	s.addWorkers(&s.Jobs[0]) // as TakeStatus does
	var out bytes.Buffer
	s.Print(&out, "nats://x:4222")
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

// TestStatusBatching: status prints, per job and model, whether its
// workers batch and why, once for workers that agree.
func TestStatusBatching(t *testing.T) {
	s := &Status{At: time.Now(), Jobs: []JobStatus{{Job: "a"}, {Job: "s"}},
		Workers: []WorkerInfo{
			{ID: "1", Job: "a", Model: "add", Batching: "true", BatchReason: "dim 0 of every input and output is dynamic"},
			{ID: "2", Job: "a", Model: "add", Batching: "true", BatchReason: "dim 0 of every input and output is dynamic"},
			{ID: "3", Job: "s", Model: "sum", Batching: "false", BatchReason: `output "y" has fixed dim 0 = 1`},
			{ID: "4", Job: "o", Model: "old"},
		}}
	var out bytes.Buffer
	s.Print(&out, "nats://x:4222")
	lines := strings.Split(out.String(), "\n")
	want := [][]string{
		{"JOB", "MODEL", "BATCHING", "WHY"},
		{"a", "add", "yes", "dim 0 of every input and output is dynamic"},
		{"s", "sum", "no", `output "y" has fixed dim 0 = 1`},
		{"o", "old", "-", "-"},
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, "JOB") || !strings.Contains(line, "BATCHING") {
			continue
		}
		for j, w := range want {
			if got := columns(lines[i+j]); strings.Join(got, "|") != strings.Join(w, "|") {
				t.Errorf("batching row %d: got %q, want %q", j, got, w)
			}
		}
		return
	}
	t.Errorf("status has no batching table:\n%s", out.String())
}

// columns splits a tabwriter line on runs of two or more spaces, so that
// "IN FLIGHT" and "LATENCY P50" stay one column.
func columns(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}

// TestStatusDocumentJSON: the document's workers are flat, latencies in
// milliseconds (WorkerStats stays the workers' wire format).
func TestStatusDocumentJSON(t *testing.T) {
	started := time.Now().Add(-time.Minute)
	s := &Status{At: time.Now(), Workers: []WorkerInfo{{ID: "w", Job: "j", ExecutionProvider: "cpu", Started: started,
		Stats: WorkerStats{Processed: 3, P50: 1500 * time.Microsecond, P99: 4 * time.Millisecond}}}}
	doc, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"executionProvider":"cpu"`, `"processed":3`, `"latencyP50Ms":1.5`, `"latencyP99Ms":4`, `"uptimeS":60`} {
		if !strings.Contains(string(doc), key) {
			t.Errorf("document lacks %s: %s", key, doc)
		}
	}
}
