package door_test

import (
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

func TestCacheEnabled(t *testing.T) {
	on := &kservepb.ModelResponseCache{Enable: true}
	tests := []struct {
		name string
		cfg  *kservepb.ModelConfig
		want bool
	}{
		{"no config", nil, false},
		{"no response_cache", &kservepb.ModelConfig{Name: "m"}, false},
		{"enable: false", &kservepb.ModelConfig{ResponseCache: &kservepb.ModelResponseCache{}}, false},
		{"enable: true", &kservepb.ModelConfig{ResponseCache: on}, true},
		{"an ensemble", &kservepb.ModelConfig{Platform: "ensemble", ResponseCache: on}, false},
		{"ensemble_scheduling", &kservepb.ModelConfig{ResponseCache: on, SchedulingChoice: &kservepb.ModelConfig_EnsembleScheduling{EnsembleScheduling: &kservepb.ModelEnsembling{}}}, false},
		{"a built-in step", &kservepb.ModelConfig{Backend: prepost.Backend, ResponseCache: on}, false},
	}
	for _, tt := range tests {
		if got := door.CacheEnabled(door.Model{Name: "m", Config: tt.cfg}); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
