package infer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
)

func TestConfigValidate(t *testing.T) {
	ok := infer.Config{ModelPath: "m"}
	tests := []struct {
		name    string
		cfg     infer.Config
		wantKey string // "" = valid
	}{
		{"zero but model is valid", ok, ""},
		{"topN", infer.Config{ModelPath: "m", PostProcessing: "topN(5)"}, ""},
		{"pickTopN", infer.Config{ModelPath: "m", PostProcessing: "pickTopN(2)"}, ""},
		{"no model", infer.Config{}, "modelPath"},
		{"negative parallelism", infer.Config{ModelPath: "m", Parallelism: -1}, "modelParallelism"},
		{"negative threads", infer.Config{ModelPath: "m", Threads: -1}, "threadPerModel"},
		{"negative max batch", infer.Config{ModelPath: "m", MaxBatch: -1}, "maxBatch"},
		{"negative wait", infer.Config{ModelPath: "m", MaxWait: -time.Second}, "maxWait"},
		{"negative queue", infer.Config{ModelPath: "m", QueueSize: -1}, "queueSize"},
		{"unknown post", infer.Config{ModelPath: "m", PostProcessing: "argmax"}, "postProcessing"},
		{"topN zero", infer.Config{ModelPath: "m", PostProcessing: "topN(0)"}, "postProcessing"},
		{"topN no n", infer.Config{ModelPath: "m", PostProcessing: "topN()"}, "postProcessing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantValidate(t, tt.cfg, tt.wantKey)
		})
	}
}

// wantValidate fails tb unless cfg.Validate is nil, for key "", or an
// ErrConfigValidation naming key.
func wantValidate(tb testing.TB, cfg infer.Config, key string) {
	tb.Helper()
	err := cfg.Validate()
	if key == "" {
		if err != nil {
			tb.Errorf("Validate() = %v, want nil", err)
		}
		return
	}
	if !errors.Is(err, infer.ErrConfigValidation) || !strings.Contains(err.Error(), key) {
		tb.Errorf("Validate() = %v, want ErrConfigValidation naming %q", err, key)
	}
}
