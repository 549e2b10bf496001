package serving

import (
	"strings"
	"testing"
)

// TestExecutionProviderAndBatchingKeys: the top-level keys reach the
// engine, a models entry's own win for its model, and a bad value names
// its key.
func TestExecutionProviderAndBatchingKeys(t *testing.T) {
	f, err := ParseFile([]byte("jobName: j\nexecutionProvider: cpu\nbatching: off\nmodels:\n" +
		"  - {name: a, path: /m/a}\n  - {name: b, path: /m/b, executionProvider: cuda, batching: \"on\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Engine(); e.ExecutionProvider != "cpu" || e.Batching != "off" {
		t.Errorf("Engine: got executionProvider %q batching %q, want cpu off", e.ExecutionProvider, e.Batching)
	}
	ms := f.ServedModels()
	if ms[0].ExecutionProvider != "" || ms[0].Batching != "" || ms[1].ExecutionProvider != "cuda" || ms[1].Batching != "on" {
		t.Errorf("ServedModels: got %+v, want a without its own, b with cuda and on", ms)
	}
	tests := []struct{ name, yaml, want string }{
		{"provider", "modelPath: m\nexecutionProvider: gpu\n", `config key "executionProvider": "gpu" is not one of cpu, cuda, tensorrt, openvino`},
		{"batching", "modelPath: m\nbatching: yes\n", `config key "batching": "yes" is not one of auto, on, off`},
		{"entry provider", "models:\n  - {name: a, path: p, executionProvider: CUDA}\n", `entry 1: executionProvider "CUDA" is not one of`},
		{"entry batching", "models:\n  - {name: a, path: p, batching: always}\n", `entry 1: batching "always" is not one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseFile([]byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
