package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// TestStatusBatching: status prints, per job and model, whether its
// workers batch and why, once for workers that agree.
func TestStatusBatching(t *testing.T) {
	s := &snapshot{at: time.Now(), jobs: []jobStatus{{job: "a"}, {job: "s"}},
		workers: []mesh.WorkerInfo{
			{ID: "1", Job: "a", Model: "add", Batching: "true", BatchReason: "dim 0 of every input and output is dynamic"},
			{ID: "2", Job: "a", Model: "add", Batching: "true", BatchReason: "dim 0 of every input and output is dynamic"},
			{ID: "3", Job: "s", Model: "sum", Batching: "false", BatchReason: `output "y" has fixed dim 0 = 1`},
			{ID: "4", Job: "o", Model: "old"},
		}}
	var out bytes.Buffer
	s.print(&out, nil, "nats://x:4222")
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
